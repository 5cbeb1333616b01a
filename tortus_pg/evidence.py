"""What the engine answers from: evidence items, how the walk reached a chunk, and the facts
about candidate chunks that ranking and selection need."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import psycopg


@dataclass(frozen=True)
class Evidence:
    """A chunk the answer may quote: its span in the source, its text (cut to the token budget)
    and how it was found."""

    node_id: int
    label: str
    uri: str
    start: int
    end: int
    page: int | None
    text: str
    score: float
    origin: str  # "seed" (found by search) or "walk" (reached through the graph)


@dataclass(frozen=True)
class Reached:
    """How the walk (or a bridge) reached a chunk: the path from a seed with one edge type,
    direction and reason per hop, the path's strength, the torus distance to the nearest seed,
    and the path's weakest edge confidence and evidence span count."""

    node_id: int
    hop: int
    path: list[int]
    edge_types: list[str]
    directions: list[str]
    reasons: list[str]
    strength: float
    torus_distance: float | None
    min_confidence: float
    spans: int


_CHUNKS = """
select n.node_id, n.label, n.text, tortus.vector_similarity(n.embedding, %(v)s),
       extract(epoch from now() - n.freshness) / 86400, s.uri, sp.start_char, sp.end_char, sp.page
from unnest(%(ids)s::bigint[]) as t(node_id)
join tortus.node n on n.tenant_id = tortus.current_tenant() and n.node_id = t.node_id
join tortus.evidence_span sp on sp.tenant_id = n.tenant_id and sp.node_id = n.node_id
join tortus.source s on s.tenant_id = sp.tenant_id and s.source_id = sp.source_id
"""


@dataclass(frozen=True)
class Chunk:
    """What ranking and evidence selection need of a candidate chunk."""

    label: str
    text: str
    similarity: float | None
    age_days: float
    uri: str
    start: int
    end: int
    page: int | None

    def evidence(self, node_id: int, origin: str) -> Evidence:
        """The whole chunk as an evidence item that no search scored (a hop or a chain led to it)."""
        return Evidence(node_id, self.label, self.uri, self.start, self.end, self.page, self.text, 0.0, origin)


def chunk_info(conn: psycopg.Connection, ids: list[int], vector: np.ndarray) -> dict[int, Chunk]:
    """The chunks among `ids`, with their similarity to the question vector and their age."""
    rows = conn.execute(_CHUNKS, {"ids": list(dict.fromkeys(ids)), "v": vector}).fetchall()
    return {r[0]: Chunk(r[1], r[2], r[3], float(r[4] or 0), r[5], r[6], r[7], r[8]) for r in rows}
