"""community_summary: a GraphRAG-style baseline. The tenant's chunks are partitioned into
communities through the concepts they mention (Leiden, with a cap on community size), each
community gets an extractive summary, and a question is routed to the communities whose
summaries it resembles most; their chunks come first, in hybrid-search order."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

import igraph
import leidenalg
import numpy as np
import numpy.typing as npt
import psycopg

from tortus_pg.embed import Embedder
from tortus_pg.errors import InvalidInput
from tortus_pg.eval.strategies import (
    OVERFETCH,
    Hybrid,
    StrategyContext,
    StrategyFailed,
    StrategyResult,
    StrategySkipped,
    hit_ids,
    register,
)
from tortus_pg.retrieve import MAX_K

MAX_SIZE = 40  # chunks per community at most
HUB_SHARE = 0.02  # concepts mentioned by more than this share of chunks do not link chunks
MIN_HUB_DF = 10  # ... unless the corpus is so small that this many chunks is more than the share
SEED = 0
LABELS = 8
SENTENCES = 5
SUMMARY_CHARS = 1000
SENTENCE_CHARS = 300
TOP_COMMUNITIES = 3
WIDEN = 4  # hybrid list this many times longer than the other strategies' lists

_CHUNKS = """
select node_id, label, left(text, 2000) from tortus.node
where tenant_id = tortus.current_tenant() and kind = 'chunk'
order by node_id
"""

_MENTIONS = """
select e.src, e.dst, c.label from tortus.edge e
join tortus.node ch on ch.tenant_id = e.tenant_id and ch.node_id = e.src and ch.kind = 'chunk'
join tortus.node c on c.tenant_id = e.tenant_id and c.node_id = e.dst and c.kind <> 'chunk'
where e.tenant_id = tortus.current_tenant() and e.type = 'mentions'
order by e.src, e.dst
"""

_SENTENCE = re.compile(r".+?[.!?](?=\s|$)")

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Community:
    """The chunk node ids of one community, most central first, and its extractive summary."""

    chunk_ids: tuple[int, ...]
    summary: str


@dataclass(frozen=True)
class _Graph:
    """Chunk-to-chunk affinity in CSR form: the neighbours of chunk i are nbr[indptr[i]:indptr[i + 1]]."""

    indptr: IntArray
    nbr: IntArray
    weight: FloatArray


def _affinity(n: int, members: Sequence[IntArray]) -> _Graph:
    """Chunks sharing a concept are linked with weight log(1 + n / df), summed over shared concepts."""
    src, dst, weight = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)], [np.zeros(0)]
    for chunks in members:
        d = len(chunks)
        src.append(np.repeat(chunks, d))
        dst.append(np.tile(chunks, d))
        weight.append(np.full(d * d, math.log1p(n / d)))
    s, t, w = np.concatenate(src), np.concatenate(dst), np.concatenate(weight)
    keep = s != t
    keys, inverse = np.unique(s[keep] * n + t[keep], return_inverse=True)
    summed = np.bincount(inverse, weights=w[keep], minlength=len(keys))
    indptr = np.searchsorted(keys // n, np.arange(n + 1)).astype(np.int64)
    return _Graph(indptr, (keys % n).astype(np.int64), summed.astype(np.float64))


def _partition(graph: _Graph, n: int, max_size: int, seed: int) -> IntArray:
    """Leiden communities of the affinity graph (modularity, weighted), split again, as GraphRAG's
    hierarchical Leiden does, until none has more than `max_size` chunks; a community Leiden
    will not split is cut in node order. A chunk linked to nothing is alone."""
    src = np.repeat(np.arange(n), np.diff(graph.indptr))
    upper = src < graph.nbr  # each undirected link once
    whole = igraph.Graph(n=n, edges=list(zip(src[upper].tolist(), graph.nbr[upper].tolist(), strict=True)),
                         edge_attrs={"weight": graph.weight[upper].tolist()})
    labels = np.zeros(n, dtype=np.int64)
    pending, made = _leiden(whole, np.arange(n), seed), 0
    while pending:
        members = pending.pop()
        if len(members) > max_size:
            parts = _leiden(whole.induced_subgraph(members.tolist()), members, seed)
            if len(parts) == 1:  # Leiden keeps them together
                parts = [members[i:i + max_size] for i in range(0, len(members), max_size)]
            pending.extend(parts)
            continue
        labels[members] = made
        made += 1
    return labels


def _leiden(sub: igraph.Graph, members: IntArray, seed: int) -> list[IntArray]:
    """The communities Leiden finds among `members` (their induced subgraph), as member arrays."""
    found = leidenalg.find_partition(sub, leidenalg.ModularityVertexPartition, weights="weight", seed=seed)
    membership = np.asarray(found.membership, dtype=np.int64)
    return [members[membership == c] for c in np.unique(membership)]


def first_sentence(text: str) -> str:
    """The first sentence of a chunk (a heading line repeated by the body is dropped), bounded."""
    head, _, body = text.strip().partition("\n\n")
    flat = " ".join((body if body.strip().startswith(head.strip()) else text).split())
    match = _SENTENCE.match(flat)
    sentence = match.group(0) if match else flat
    return sentence if len(sentence) <= SENTENCE_CHARS else sentence[:SENTENCE_CHARS].rsplit(" ", 1)[0] + " …"


def _summary(labels: Sequence[str], sentences: Sequence[str]) -> str:
    text = "; ".join(labels) + ("." if labels else "")
    for sentence in sentences:
        text = f"{text} {sentence}".strip()
        if len(text) >= SUMMARY_CHARS:
            break
    return text if len(text) <= SUMMARY_CHARS else text[:SUMMARY_CHARS].rsplit(" ", 1)[0]


def communities(
    conn: psycopg.Connection,
    *,
    max_size: int = MAX_SIZE,
    hub_share: float = HUB_SHARE,
    min_hub_df: int = MIN_HUB_DF,
    seed: int = SEED,
) -> list[Community]:
    """Partition the tenant's chunks into communities of at most `max_size` chunks through the
    concepts they mention, largest community first. Concepts mentioned by more than `hub_share`
    of the chunks (and by more than `min_hub_df`) glue unrelated chunks together: they neither
    link chunks nor name communities. Deterministic for the same data and seed."""
    if max_size < 1:
        raise InvalidInput(f"max_size must be at least 1, got {max_size}")
    chunks = conn.execute(_CHUNKS).fetchall()
    ids = np.array([r[0] for r in chunks], dtype=np.int64)
    n = len(ids)
    position = {int(node_id): i for i, node_id in enumerate(ids)}
    mentioned: dict[int, list[int]] = {}
    names: dict[int, str] = {}
    for src, dst, label in conn.execute(_MENTIONS):
        mentioned.setdefault(dst, []).append(position[src])
        names[dst] = label
    max_df = max(min_hub_df, math.floor(hub_share * n))
    linking = {c: np.array(sorted(set(m)), dtype=np.int64) for c, m in mentioned.items() if len(set(m)) <= max_df}
    graph = _affinity(n, [m for m in linking.values() if len(m) > 1])
    labels = _partition(graph, n, max_size, seed)
    # Centrality: affinity to the rest of the chunk's own community.
    src = np.repeat(np.arange(n), np.diff(graph.indptr))
    inside = labels[src] == labels[graph.nbr]
    centrality = np.bincount(src[inside], weights=graph.weight[inside], minlength=n)
    groups: dict[int, list[int]] = {}
    for i in np.lexsort((ids, -centrality)):
        groups.setdefault(int(labels[i]), []).append(int(i))
    counts: dict[int, dict[int, int]] = {}
    for concept, mentioning in linking.items():
        for i in mentioning:
            per = counts.setdefault(int(labels[i]), {})
            per[concept] = per.get(concept, 0) + 1
    found = []
    for label, members in sorted(groups.items(), key=lambda g: (-len(g[1]), int(ids[min(g[1])]))):
        per = counts.get(label, {})
        top = sorted(per, key=lambda c: (-per[c], len(linking[c]), names[c], c))[:LABELS]
        sentences = [first_sentence(chunks[i][2]) for i in members[:SENTENCES]]
        found.append(Community(tuple(int(ids[i]) for i in members), _summary([names[c] for c in top], sentences)))
    return found


class _Remembering:
    """An embedder that returns its last answer again for the same texts, so a question
    embedded to rank communities is not embedded a second time by hybrid search."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.last: tuple[tuple[str, ...], list[list[float]]] | None = None

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        key = tuple(texts)
        if self.last is None or self.last[0] != key:
            self.last = (key, self.inner.embed(texts))
        return self.last[1]


@dataclass(frozen=True)
class _Index:
    communities: list[Community]
    vectors: npt.NDArray[np.float32]  # unit-length summary embeddings, one row per community


def _unit_rows(vectors: Sequence[Sequence[float]], dim: int) -> npt.NDArray[np.float32]:
    matrix = np.asarray(vectors, dtype=np.float32).reshape(len(vectors), dim)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.where(norms > 0, norms, 1.0)).astype(np.float32)


@register("community_summary")
class CommunitySummary(Hybrid):
    """Route the question to the `top` communities whose summaries it is most similar to
    (cosine), then list their chunks in hybrid order, then the rest of the hybrid list.
    Communities and summary embeddings are built on the first question of each tenant."""

    def __init__(self, ctx: StrategyContext, top: int = TOP_COMMUNITIES) -> None:
        if ctx.embedder is None:
            raise StrategySkipped("community_summary needs an embedder")
        super().__init__(replace(ctx, embedder=_Remembering(ctx.embedder)))
        self.embedder: Embedder = ctx.embedder
        self.top = top
        self.indexes: dict[str, _Index] = {}

    def index(self, conn: psycopg.Connection) -> _Index:
        """The communities and summary embeddings of the current tenant, built once."""
        row = conn.execute("select tortus.current_tenant()").fetchone()
        tenant = row[0] if row else None
        if tenant is None:
            raise StrategyFailed("community_summary needs a tenant scope")
        if tenant not in self.indexes:
            found = communities(conn)
            vectors = self.embedder.embed([c.summary for c in found]) if found else []
            self.indexes[tenant] = _Index(found, _unit_rows(vectors, self.embedder.dim))
        return self.indexes[tenant]

    def rank(self, conn: psycopg.Connection, question: str) -> list[Community]:
        """Communities by the cosine similarity of their summary to the question, best first."""
        index = self.index(conn)
        assert self.ctx.embedder is not None
        query = _unit_rows(self.ctx.embedder.embed([question]), self.embedder.dim)[0]
        order = np.argsort(-(index.vectors @ query), kind="stable")
        return [index.communities[i] for i in order]

    def retrieve(self, conn: psycopg.Connection, question: str, k: int) -> StrategyResult:
        chosen = self.rank(conn, question)[: self.top]
        members = {node_id for c in chosen for node_id in c.chunk_ids}
        hits = self.hits(conn, question, min(MAX_K // OVERFETCH, k * WIDEN))
        prefix = self.ctx.uri_prefix
        ranked = hit_ids(hits, prefix)
        routed = hit_ids([h for h in hits if h.node_id in members], prefix)
        ids = list(dict.fromkeys(routed + ranked))[:k]
        return StrategyResult(ids, {"fan_out": float(len(chosen))}, seed_ids=ranked)
