"""The kinds of query the scale suite times, each as the application would ask it: BM25, vector
and hybrid search in SQL, the bounded walk from hybrid's seeds, and the whole engine."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import psycopg

from tortus_pg.db import connect, tenant_scope
from tortus_pg.embed import Embedder
from tortus_pg.engine import answer
from tortus_pg.scale.corpus import SyntheticCorpus
from tortus_pg.scale.timing import Workload

K = 10
SEEDS = 5  # the walk starts from hybrid search's best chunks, as the engine's does
SUITE_DOCUMENTS = 40_000  # the corpus `tortus-pg bench --scale 10k,100k` builds its tenants from

_BM25 = "select node_id from tortus.bm25_search(%s, %s)"
_VECTOR = "select node_id from tortus.vector_search(%s, %s)"
_HYBRID = "select node_id from tortus.hybrid_search(%s, %s, %s)"
_TRAVERSE = "select count(*) from tortus.traverse(%s, %s, '{}'::jsonb)"


@dataclass(frozen=True)
class Asked:
    """A question with its embedding and the chunks hybrid search seeds its walk with."""

    text: str
    vector: np.ndarray
    seeds: list[int]


def tenant_questions(conn: psycopg.Connection, count: int, *, frequent: bool = False) -> list[str]:
    """`count` questions about the documents of the scale tenant `conn` is scoped to, drawn as the
    suite draws its own (benchmarks that compare two versions of a query ask these)."""
    row = conn.execute("select count(*) from tortus.source").fetchone()
    documents = int(row[0]) if row else 0
    return SyntheticCorpus.make(SUITE_DOCUMENTS).queries(count, documents, frequent=frequent, seed=2 if frequent else 1)


def prepare(url: str, tenant: str, questions: Sequence[str], embedder: Embedder) -> tuple[list[Asked], list[float]]:
    """The questions embedded (with each embedding's milliseconds, reported apart from the
    queries) and seeded."""
    vectors, embed_ms = [], []
    for q in questions:
        began = time.perf_counter()
        vectors.append(np.asarray(embedder.embed([q])[0], dtype=np.float32))
        embed_ms.append((time.perf_counter() - began) * 1000)
    with connect(url) as conn, tenant_scope(conn, tenant):
        seeds = [[r[0] for r in conn.execute(_HYBRID, [q, v, SEEDS]).fetchall()]
                 for q, v in zip(questions, vectors, strict=True)]
    return [Asked(q, v, s) for q, v, s in zip(questions, vectors, seeds, strict=True)], embed_ms


def workloads(asked: Sequence[Asked], embedder: Embedder) -> list[Workload[Asked]]:
    """The five kinds of query over the same questions."""
    def bm25(conn: psycopg.Connection, a: Asked) -> object:
        return conn.execute(_BM25, [a.text, K]).fetchall()

    def vector(conn: psycopg.Connection, a: Asked) -> object:
        return conn.execute(_VECTOR, [a.vector, K]).fetchall()

    def hybrid(conn: psycopg.Connection, a: Asked) -> object:
        return conn.execute(_HYBRID, [a.text, a.vector, K]).fetchall()

    def traverse(conn: psycopg.Connection, a: Asked) -> object:
        return conn.execute(_TRAVERSE, [a.seeds, a.vector]).fetchone()

    def engine(conn: psycopg.Connection, a: Asked) -> object:
        return answer(conn, a.text, embedder=embedder, store=False)

    return [Workload(name, run, asked) for name, run in
            (("bm25", bm25), ("vector", vector), ("hybrid", hybrid), ("traverse", traverse), ("engine", engine))]
