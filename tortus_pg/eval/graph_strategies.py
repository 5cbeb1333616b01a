"""Graph strategies: hybrid seeds expanded through the concept graph by the SQL functions
tortus.traverse (graph_local: typed edges, no portals) and tortus.ppr (HippoRAG-style)."""

from __future__ import annotations

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from tortus_pg.eval.strategies import Hybrid, StrategyResult, hit_ids, register, rrf, source_ids
from tortus_pg.ingest.chunking import chunk_document
from tortus_pg.ingest.extract import extract_concepts
from tortus_pg.ingest.types import Document

SEEDS = 5
# chunk -> concept -> chunk is two edge hops: one concept hop away from the seeds.
LOCAL_POLICY = {"max_hops": 2, "fan_out": 25, "max_nodes": 400, "max_portal_hops": 0}

_EXPAND = """
select t.node_id, t.directions from tortus.traverse(%s::bigint[], %s, %s) t
where not t.pruned and t.kind = 'chunk'
order by t.hop = 0 desc, t.score desc, t.node_id
"""

_PPR = """
select p.node_id from tortus.ppr(%s::bigint[], 0.85, 20, 2000) p
join tortus.node n on n.tenant_id = tortus.current_tenant() and n.node_id = p.node_id
where n.kind = 'chunk'
order by p.score desc, p.node_id
"""


class _Seeded(Hybrid):
    def seeds(self, conn: psycopg.Connection, question: str, k: int) -> tuple[list[str], list[int]]:
        hits = self.hits(conn, question, k)
        return hit_ids(hits, self.ctx.uri_prefix), [h.node_id for h in hits[:SEEDS]]


@register("graph_local")
class GraphLocal(_Seeded):
    """Hybrid seeds plus the chunks one shared concept away: the walk's list (seeds first, then
    reached chunks by path score) fused with the hybrid list by RRF."""

    def retrieve(self, conn: psycopg.Connection, question: str, k: int) -> StrategyResult:
        ranked, seeds = self.seeds(conn, question, k)
        assert self.ctx.embedder is not None  # hybrid seeding has already required one
        vector = np.asarray(self.ctx.embedder.embed([question])[0], dtype=np.float32)
        rows = conn.execute(_EXPAND, [seeds, vector, Jsonb(LOCAL_POLICY)]).fetchall()
        expanded = source_ids(conn, [r[0] for r in rows], self.ctx.uri_prefix)
        portals = sum(1 for _, directions in rows if "portal" in directions)
        diagnostics = {"fan_out": float(len(rows) - len(seeds)), "portal_hops": float(portals)}
        return StrategyResult(rrf([ranked, expanded])[:k], diagnostics, seed_ids=ranked)


_QUESTION_CONCEPTS = """
select node_id from tortus.node
where tenant_id = tortus.current_tenant() and kind <> 'chunk' and key = any(%s)
"""


def question_concepts(conn: psycopg.Connection, question: str) -> list[int]:
    """Graph nodes of the concepts the deterministic extractor finds in the question."""
    doc = Document(text=question, kind="text")
    keys = [c.key for c in extract_concepts(doc, chunk_document(doc)).concepts]
    return [r[0] for r in conn.execute(_QUESTION_CONCEPTS, [keys]).fetchall()]


@register("ppr")
class Ppr(_Seeded):
    """HippoRAG-style: personalized PageRank restarting at the question's concepts and the
    top hybrid chunk; chunks ranked by their PPR score."""

    def retrieve(self, conn: psycopg.Connection, question: str, k: int) -> StrategyResult:
        ranked, seeds = self.seeds(conn, question, k)
        restart = question_concepts(conn, question) + seeds[:1]
        nodes = [r[0] for r in conn.execute(_PPR, [restart]).fetchall()]
        diagnostics = {"fan_out": float(len(restart))}
        return StrategyResult(source_ids(conn, nodes, self.ctx.uri_prefix)[:k], diagnostics, seed_ids=ranked)
