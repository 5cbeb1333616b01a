"""The scale suite: tenants of growing size in one database (and a small one among them), every
kind of query timed as the application role at 1 and more concurrent clients, each next to its
peer on the same data; the figures as a report."""

from __future__ import annotations

import math
import os
import platform
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from tortus_pg.db import connect, tenant_scope
from tortus_pg.embed import Embedder
from tortus_pg.scale import peers
from tortus_pg.scale.build import NODES_PER_DOCUMENT, Built, build, check_suite_tenant
from tortus_pg.scale.corpus import SyntheticCorpus
from tortus_pg.scale.peers import HnswPoint
from tortus_pg.scale.timing import Latency, Workload, measure
from tortus_pg.scale.workloads import K, prepare, workloads

SMALL_NODES = 1_000  # the small tenant among the large ones


@dataclass(frozen=True)
class SizeReport:
    """One tenant's figures: how it was built, the question embedding's cost, each query kind's
    latency per client count, the peers', the BM25 race on frequent terms and the HNSW curve."""

    target_nodes: int
    built: Built
    embed_p50_ms: float
    latencies: list[Latency]
    peers: list[Latency]
    frequent: list[Latency]  # bm25_search against ts_rank_cd on questions with a term in most documents
    hnsw: list[HnswPoint]


@dataclass(frozen=True)
class ScaleReport:
    machine: str
    questions: int
    sizes: list[SizeReport]
    small_tenant: str
    small_tenant_results: int  # vector results the small tenant got for k = K
    slopes: dict[str, float] = field(default_factory=dict)  # log-log slope of p50 against nodes, 1 client


def machine() -> str:
    return f"{platform.system()} {platform.machine()}, {_cpus()} cores, Python {platform.python_version()}"


def _cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def run_suite(url: str, sizes: Sequence[int], embedder: Embedder, *, questions: int = 100,
              clients: Sequence[int] = (1, 4), reuse: bool = False,
              on_step: Callable[[str, int, int], None] | None = None) -> ScaleReport:
    """Build (or with `reuse` keep) a small tenant and one tenant per size in nodes, then
    measure each size; `on_step(what, done, total)` reports progress."""
    def step(what: str, done: int, total: int) -> None:
        if on_step is not None:
            on_step(what, done, total)

    corpus = SyntheticCorpus.make(max(sizes) * 2 // NODES_PER_DOCUMENT)
    for tenant in ["scale-small", *(f"scale-{_short(n)}" for n in sizes)]:
        check_suite_tenant(url, tenant)  # before anything is built
    small = build(url, "scale-small", corpus, SMALL_NODES, embedder, reuse=reuse,
                  on_progress=partial(step, "building scale-small"))
    tenants = [build(url, f"scale-{_short(n)}", corpus, n, embedder, reuse=reuse,
                     on_progress=partial(step, f"building scale-{_short(n)}")) for n in sizes]
    reports = [_measure_size(url, n, b, corpus, embedder, questions, clients, step)
               for n, b in zip(sizes, tenants, strict=True)]
    asked, _ = prepare(url, small.tenant, corpus.queries(5, small.documents), embedder)
    with connect(url) as conn, tenant_scope(conn, small.tenant):
        got = min(len(conn.execute("select node_id from tortus.vector_search(%s, %s)", [a.vector, K]).fetchall())
                  for a in asked)
    return ScaleReport(machine(), questions, reports, small.tenant, got, _slopes(reports))


def _measure_size(url: str, nodes: int, built: Built, corpus: SyntheticCorpus, embedder: Embedder, questions: int,
                  clients: Sequence[int], step: Callable[[str, int, int], None]) -> SizeReport:
    tenant = built.tenant
    asked, embed_ms = prepare(url, tenant, corpus.queries(questions, built.documents), embedder)
    frequent, _ = prepare(url, tenant, corpus.queries(questions, built.documents, frequent=True, seed=2), embedder)
    work = workloads(asked, embedder)
    latencies = []
    for n, (w, c) in enumerate([(w, c) for c in clients for w in work]):
        step(f"timing {tenant}: {w.kind} x{c}", n, len(work) * len(clients))
        latencies.append(measure(url, tenant, w, c))
    chunks = peers.Chunks.load(url, tenant)
    step(f"peers on {tenant}", 0, 1)
    found = [peers.bm25s_latency(chunks, [a.text for a in asked]), peers.exact_latency(chunks, asked),
             *(measure(url, tenant, w) for w in peers.ts_rank_workloads(asked))]
    race = [measure(url, tenant, Workload("bm25 (frequent terms)", work[0].run, frequent)),
            *(measure(url, tenant, w) for w in peers.ts_rank_workloads(frequent))]
    hnsw = peers.hnsw_curve(url, tenant, chunks, asked)
    return SizeReport(nodes, built, float(np.median(embed_ms)), latencies, [p for p in found if p is not None],
                      race, hnsw)


def _slopes(reports: Sequence[SizeReport]) -> dict[str, float]:
    """Per query kind, the slope of log p50 against log nodes between the smallest and largest
    size (1 client): 1 is linear growth, 0.5 grows as the square root."""
    if len(reports) < 2:
        return {}
    low, high = min(reports, key=lambda r: r.built.nodes), max(reports, key=lambda r: r.built.nodes)
    span = math.log(high.built.nodes / low.built.nodes)
    p50 = {(r.target_nodes, lat.kind): lat.p50_ms for r in reports for lat in r.latencies if lat.clients == 1}
    return {kind: round(math.log(p50[(high.target_nodes, kind)] / p50[(low.target_nodes, kind)]) / span, 3)
            for (n, kind) in p50 if n == low.target_nodes and span > 0}


def _short(nodes: int) -> str:
    """10000 -> "10k", 1000000 -> "1m"."""
    for size, suffix in ((1_000_000, "m"), (1_000, "k")):
        if nodes % size == 0:
            return f"{nodes // size}{suffix}"
    return str(nodes)
