"""Search from Python: composes the SQL functions tortus.bm25_search / vector_search / hybrid_search."""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

import numpy as np
import psycopg
from psycopg.rows import class_row

from tortus_pg.db import pinned
from tortus_pg.embed import Embedder
from tortus_pg.errors import InvalidInput

Mode = Literal["keyword", "vector", "hybrid"]
MODES: tuple[Mode, ...] = ("keyword", "vector", "hybrid")
MAX_K = 1000
MAX_QUERY_CHARS = 10_000
RRF_K = 60
_H = TypeVar("_H", bound=Hashable)


@dataclass(frozen=True)
class Hit:
    """A ranked chunk with the evidence span it came from."""

    node_id: int
    rank: int
    score: float
    bm25_rank: int | None
    vector_rank: int | None
    heading_match: bool  # hybrid: the chunk's heading carries every identifier the query names
    label: str
    text: str
    uri: str
    start_char: int
    end_char: int
    page: int | None


_LEGS = {
    "keyword": "select node_id, score, rank, rank as bm25_rank, null::int as vector_rank, false as heading_match "
    "from tortus.bm25_search(%(q)s, %(k)s, config => %(cfg)s::regconfig)",
    "vector": "select node_id, score, rank, null::int as bm25_rank, rank as vector_rank, false as heading_match "
    "from tortus.vector_search(%(v)s, %(k)s)",
    "hybrid": "select node_id, score, rank, bm25_rank, vector_rank, heading_match "
    "from tortus.hybrid_search(%(q)s, %(v)s, %(k)s, %(bw)s, %(vw)s, %(rrf)s, config => %(cfg)s::regconfig)",
}

_HITS = """
select h.node_id, h.rank, h.score, h.bm25_rank, h.vector_rank, h.heading_match, n.label, n.text, s.uri,
       sp.start_char, sp.end_char, sp.page
from ({leg}) h
join tortus.node n on n.tenant_id = tortus.current_tenant() and n.node_id = h.node_id
join tortus.evidence_span sp on sp.tenant_id = n.tenant_id and sp.node_id = n.node_id
join tortus.source s on s.tenant_id = n.tenant_id and s.source_id = sp.source_id
order by h.rank
"""


def search(
    conn: psycopg.Connection,
    query: str,
    *,
    mode: Mode = "hybrid",
    k: int = 10,
    embedder: Embedder | None = None,
    bm25_weight: float = 1.0,
    vector_weight: float = 1.0,
    rrf_k: int = 60,
    ts_config: str = "english",
    query_vector: np.ndarray | None = None,
    tenant: str | None = None,
) -> list[Hit]:
    """Top-k chunks for `query` (inside a tenant scope); vector and hybrid modes need an embedder,
    or the query's embedding as `query_vector`. Naming the scope's `tenant` plans the hits'
    lookups for its partitions alone (`db.pinned`)."""
    if mode not in MODES:
        raise InvalidInput(f"unknown mode {mode!r}; choose from {', '.join(MODES)}")
    check_text(query, "query")
    if not 1 <= k <= MAX_K:
        raise InvalidInput(f"k must be between 1 and {MAX_K}")
    if not all(math.isfinite(w) and w >= 0 for w in (bm25_weight, vector_weight)) or rrf_k < 1:
        raise InvalidInput("weights must be finite and non-negative, and rrf_k at least 1")
    vector = None
    if mode != "keyword":
        vector = query_vector if query_vector is not None else embed_query(embedder, query, f"{mode} search")
    params = {"q": query, "v": vector, "k": k, "bw": bm25_weight, "vw": vector_weight, "rrf": rrf_k, "cfg": ts_config}
    with conn.cursor(row_factory=class_row(Hit)) as cur:
        return cur.execute(pinned(_HITS.format(leg=_LEGS[mode]), tenant), params).fetchall()


def check_text(text: str, what: str) -> str:
    """A question or query as the database can take it: 1 to MAX_QUERY_CHARS characters of valid
    UTF-8 (text read from a terminal may carry undecodable bytes) with no NUL."""
    if not text.strip() or len(text) > MAX_QUERY_CHARS:
        raise InvalidInput(f"the {what} must have 1 to {MAX_QUERY_CHARS} characters")
    if "\x00" in text:
        raise InvalidInput(f"the {what} contains a NUL character; remove it")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"the {what} is not valid UTF-8; check the terminal's or the file's encoding") from None
    return text


def embed_query(embedder: Embedder | None, query: str, purpose: str = "this search") -> np.ndarray:
    """The query's embedding as float32, or a clear error when there is no embedder."""
    if embedder is None:
        raise InvalidInput(f"{purpose} needs an embedder")
    return np.asarray(embedder.embed([query])[0], dtype=np.float32)


def rrf(rankings: Sequence[Sequence[_H]], k: int = RRF_K) -> list[_H]:
    """Reciprocal-rank fusion of ranked lists in Python (the SQL side is `tortus.rrf`): sum of
    1 / (k + rank); ties keep the order of first appearance."""
    scores: dict[_H, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(dict.fromkeys(ranking), 1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    order = {item: i for i, item in enumerate(dict.fromkeys(x for r in rankings for x in r))}
    return sorted(scores, key=lambda x: (-scores[x], order[x]))
