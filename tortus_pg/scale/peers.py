"""What the scale suite sets tortus-pg's figures against, on the same data and questions: bm25s
(in-process BM25), exact search over the vectors in numpy, and PostgreSQL's own ts_rank_cd over
the GIN index on chunk text."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import psycopg

from tortus_pg.db import connect, tenant_scope
from tortus_pg.scale.timing import Latency, Workload, time_each
from tortus_pg.scale.workloads import Asked, K

_CHUNKS = """
select node_id, label || E'\n' || text, embedding from tortus.node
where tenant_id = tortus.current_tenant() and kind = 'chunk' and embedding is not null order by node_id
"""
# Any of the question's lexemes, as BM25 scores them (ts_rank_cd over the tsv GIN index).
_TS_RANK = """
with q as (select replace(plainto_tsquery('english', %s)::text, ' & ', ' | ')::tsquery as q)
select n.node_id from tortus.node n, q
where n.tenant_id = tortus.current_tenant() and n.kind = 'chunk' and n.tsv @@ q.q
order by ts_rank_cd(n.tsv, q.q) desc limit 10
"""
_HNSW = "select node_id from tortus.vector_search(%s, %s, %s)"


@dataclass(frozen=True)
class Chunks:
    """A tenant's chunks: ids, texts (with their heading paths, as BM25 indexes them) and unit vectors."""

    ids: np.ndarray
    texts: list[str]
    vectors: np.ndarray

    @classmethod
    def load(cls, url: str, tenant: str) -> Chunks:
        with connect(url) as conn, tenant_scope(conn, tenant):
            rows = conn.execute(_CHUNKS).fetchall()
        vectors = np.array([r[2].to_numpy() for r in rows], dtype=np.float32)
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        return cls(np.array([r[0] for r in rows]), [r[1] for r in rows], vectors)

    def exact(self, vector: np.ndarray, k: int = K) -> list[int]:
        """The k nearest chunks by cosine similarity, exactly."""
        scores = self.vectors @ (vector / max(float(np.linalg.norm(vector)), 1e-12))
        top = np.argpartition(-scores, min(k, len(scores) - 1))[:k]
        return [int(self.ids[i]) for i in top[np.argsort(-scores[top])]]


def bm25s_latency(chunks: Chunks, questions: Sequence[str]) -> Latency | None:
    """bm25s (English stop words, Snowball stemmer) indexing the same texts, one query at a
    time; None when bm25s is not installed (`pip install 'tortus-pg[bench]'`)."""
    search = bm25s_search(chunks.texts, min(K, len(chunks.texts)))
    return None if search is None else time_each("bm25s", search, questions)


def bm25s_search(texts: Sequence[str], k: int) -> Callable[[str], np.ndarray] | None:
    """A question's top k of `texts` (their indices, best first) by bm25s's scores; None when
    bm25s is not installed. The top k is taken from the negated scores: numpy 2.4's argpartition
    takes about 2.5 ms for the largest k of 20,000 scores that are mostly equal (zero), and 0.1 ms
    for the smallest, so timing bm25s's own `retrieve` timed numpy."""
    try:
        import bm25s
        import Stemmer
    except ImportError:
        return None
    stemmer = Stemmer.Stemmer("english")
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(list(texts), stopwords="en", stemmer=stemmer, show_progress=False),
                    show_progress=False)

    def search(question: str) -> np.ndarray:
        tokens = bm25s.tokenize([question], stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False)[0]
        scores = retriever.get_scores([t for t in tokens if t in retriever.vocab_dict])
        top = np.argpartition(-scores, k - 1)[:k]
        return top[np.argsort(-scores[top], kind="stable")]

    return search


def exact_latency(chunks: Chunks, asked: Sequence[Asked]) -> Latency:
    """Exact cosine search in numpy over the tenant's vectors, one query at a time."""
    return time_each("exact vectors (numpy)", lambda a: chunks.exact(a.vector), asked)


def ts_rank_workloads(asked: Sequence[Asked]) -> list[Workload[Asked]]:
    """ts_rank_cd over the GIN index, as the application role and as the owner."""
    def run(conn: psycopg.Connection, a: Asked) -> object:
        return conn.execute(_TS_RANK, [a.text]).fetchall()

    return [Workload("ts_rank_cd", run, asked), Workload("ts_rank_cd (owner)", run, asked, as_owner=True)]


@dataclass(frozen=True)
class HnswPoint:
    ef_search: int
    recall_at_10: float  # against exact search
    p50_ms: float


def hnsw_curve(url: str, tenant: str, chunks: Chunks, asked: Sequence[Asked],
               efs: Sequence[int] = (10, 20, 40, 100, 200, 400)) -> list[HnswPoint]:
    """The recall@10 against exact search, and the median latency, each ef_search buys."""
    truth = [set(chunks.exact(a.vector)) for a in asked]
    points = []
    with connect(url) as conn:
        for ef in efs:
            found, ms = [], []
            for a in asked:
                with tenant_scope(conn, tenant):
                    began = time.perf_counter()
                    found.append({r[0] for r in conn.execute(_HNSW, [a.vector, K, ef]).fetchall()})
                    ms.append((time.perf_counter() - began) * 1000)
            recall = float(np.mean([len(f & t) / max(len(t), 1) for f, t in zip(found, truth, strict=True)]))
            points.append(HnswPoint(ef, recall, float(np.median(ms))))
    return points
