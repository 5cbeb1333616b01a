"""Two variants of the engine asked the same questions, question by question in alternating order
(so drift in the machine's speed falls on both alike), and their report: p50, p95 and mean
latency of each, and the paired bootstrap interval of the difference. The benchmark scripts
that compare two variants of the engine on a scale tenant use it (`compare`)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from functools import partial

import numpy as np
import psycopg

from tortus_pg.config import load_settings
from tortus_pg.db import connect, database_url, tenant_scope
from tortus_pg.embed import Embedder, make_embedder
from tortus_pg.engine import Answer
from tortus_pg.eval.metrics import paired_bootstrap_diff
from tortus_pg.scale.workloads import tenant_questions

Ask = Callable[[str], Answer]  # one variant: asks the engine a question
Side = Callable[[psycopg.Connection, Embedder, str], Answer]  # a variant on a tenant's connection


def compare(tenant: str, questions: int, sides: tuple[Side, Side], names: tuple[str, str]) -> None:
    """Ask the scale tenant's own questions (`questions` of them, embedded with `hash` as the
    scale suite's are) under both sides, alternating, as the application role on the
    workspace's database (the embedded server unless TORTUS_DATABASE_URL is set); print the
    report."""
    embedder = make_embedder("hash", dim=384)
    with connect(database_url(load_settings())) as conn, tenant_scope(conn, tenant):
        asks = (partial(sides[0], conn, embedder), partial(sides[1], conn, embedder))
        ms, differ = alternate(tenant_questions(conn, questions), asks)
    report(names, ms, differ)


def alternate(questions: Sequence[str], sides: tuple[Ask, Ask]) -> tuple[list[list[float]], int]:
    """Milliseconds per question of each side, and the questions whose five best evidence chunks
    differ between them. The first question is asked of both once before timing, to warm the
    caches and the plans."""
    for ask in sides:
        ask(questions[0])
    ms: list[list[float]] = [[], []]
    differ = 0
    for i, question in enumerate(questions):
        top: list[list[int]] = [[], []]
        for side in (0, 1) if i % 2 else (1, 0):
            start = time.perf_counter()
            top[side] = sides[side](question).ranking[:5]
            ms[side].append((time.perf_counter() - start) * 1000)
        differ += top[0] != top[1]
    return ms, differ


def report(names: tuple[str, str], ms: list[list[float]], differ: int) -> None:
    """Print each side's p50, p95 and mean, and the mean difference (second minus first) with its
    95% bootstrap interval."""
    width = max(len(n) for n in names)
    for name, times in zip(names, ms, strict=True):
        p50, p95 = np.percentile(times, [50, 95])
        print(f"{name:{width}s}  p50 {p50:7.1f} ms  p95 {p95:7.1f} ms  mean {statistics.mean(times):7.1f} ms")
    mean, lo, hi = paired_bootstrap_diff(ms[1], ms[0], resamples=2000)
    print(f"{names[1]} - {names[0]}, mean {mean:.1f} ms, 95% bootstrap interval [{lo:.1f}, {hi:.1f}]; "
          f"the five best evidence chunks differ for {differ} of {len(ms[0])} questions")
