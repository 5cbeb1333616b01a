"""Graph strategies: hybrid seeds expanded through the concept graph by the SQL functions
tortus.traverse (graph_local: typed edges, no portals) and tortus.ppr (HippoRAG-style), and the
full query engine (tortus)."""

from __future__ import annotations

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from tortus_pg.engine import answer
from tortus_pg.eval.strategies import Hybrid, StrategyResult, hit_ids, register, source_ids
from tortus_pg.indexing import store_layout
from tortus_pg.policy import TraversalPolicy
from tortus_pg.query.question import question_concepts
from tortus_pg.retrieve import rrf

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


@register("tortus")
class Tortus(Hybrid):
    """The query engine with its default policy: its ranking of candidate chunks, best first."""

    policy = TraversalPolicy()
    layout: str | None = None  # the live coordinates

    def retrieve(self, conn: psycopg.Connection, question: str, k: int) -> StrategyResult:
        layout = self.prepared_layout(conn)
        result = answer(conn, question, embedder=self.ctx.embedder, policy=self.policy, ts_config=self.ctx.ts_config,
                        store=False, layout=layout)
        prefix = self.ctx.uri_prefix
        d = result.diagnostics
        diagnostics = {
            "fan_out": float(d.get("reached_chunks", 0)),
            "portal_hops": float(result.budget.portal_hops.used),
            "shard_crossings": float(d.get("shard_crossings", 0)),
            # graph hops (not search hops) on the evidence's paths: what crossings are counted of
            "path_hops": float(sum(1 for hop in result.path if not hop.searched)),
            "tokens": float(result.budget.tokens.used),
            **{f"signal_{k}": float(v) for k, v in d.get("signals", {}).items()},
        }
        seeds = source_ids(conn, [s["node_id"] for s in d.get("seeds", [])], prefix)
        return StrategyResult(source_ids(conn, result.ranking, prefix)[:k], diagnostics, seed_ids=seeds,
                              withheld=result.withheld, answer=result.answer, short_answer=result.short_answer,
                              confidence=result.confidence, draft=d.get("draft"),
                              refusal=result.refusal.name if result.refusal else None)

    def prepared_layout(self, conn: psycopg.Connection) -> str | None:
        """The layout to walk with, stored for this snapshot on first use."""
        if self.layout is not None and not conn.execute(_HAS_LAYOUT, [self.layout]).fetchone():
            store_layout(conn, self.layout)
        return self.layout


_HAS_LAYOUT = """
select 1 from tortus.node
where tenant_id = tortus.current_tenant() and kind = 'chunk' and props -> 'layouts' ? %s limit 1
"""


@register("layout_torus")
class LayoutTorus(Tortus):
    """The engine walking with torus coordinates recomputed for the ablation."""

    layout = "torus"


@register("layout_euclidean")
class LayoutEuclidean(Tortus):
    """The engine with the first two principal components spread over the square (no wrap-around)."""

    layout = "euclidean"


@register("layout_random")
class LayoutRandom(Tortus):
    """The engine with random coordinates: what locality is worth."""

    layout = "random"
