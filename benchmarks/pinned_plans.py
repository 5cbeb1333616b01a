"""The engine with and without its statements naming the tenant as a literal (`db.pinned`),
alternating the two question by question on a scale tenant, as the application role.

    python benchmarks/pinned_plans.py scale-100k --questions 30

Run it from the workspace that holds the scale tenants (`tortus-pg bench --scale 100k` builds
them); it uses that workspace's database (the embedded server unless TORTUS_DATABASE_URL is set).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np
import psycopg

from tortus_pg import bridges, disputes, retrieve
from tortus_pg.config import load_settings
from tortus_pg.db import connect, database_url, pinned, tenant_scope
from tortus_pg.embed import make_embedder
from tortus_pg.engine import answer
from tortus_pg.eval.metrics import paired_bootstrap_diff
from tortus_pg.query import chains, terms
from tortus_pg.scale.workloads import tenant_questions

USERS = (bridges, disputes, retrieve, chains, terms)  # the modules whose statements are pinned


def unpinned(query: str, tenant: str | None) -> str:
    return query


def use(pin: Callable[[str, str | None], str]) -> None:
    for module in USERS:
        module.pinned = pin  # type: ignore[attr-defined]


def timed(conn: psycopg.Connection, questions: list[str]) -> dict[bool, list[float]]:
    """Milliseconds per question with (True) and without (False) pinning, in alternating order."""
    embedder = make_embedder("hash", dim=384)
    answer(conn, questions[0], embedder=embedder, store=False)  # warm the caches and the plans
    ms: dict[bool, list[float]] = {True: [], False: []}
    for i, question in enumerate(questions):
        for on in (True, False) if i % 2 else (False, True):
            use(pinned if on else unpinned)
            start = time.perf_counter()
            answer(conn, question, embedder=embedder, store=False)
            ms[on].append((time.perf_counter() - start) * 1000)
    use(pinned)
    return ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tenant", help="a scale tenant (scale-10k, scale-100k, …)")
    parser.add_argument("--questions", type=int, default=30)
    args = parser.parse_args()
    with connect(database_url(load_settings())) as conn, tenant_scope(conn, args.tenant):
        ms = timed(conn, tenant_questions(conn, args.questions))
    for on in (False, True):
        p50, p95 = np.percentile(ms[on], [50, 95])
        print(f"{'pinned' if on else 'unpinned':9s} p50 {p50:7.1f} ms  p95 {p95:7.1f} ms  "
              f"mean {statistics.mean(ms[on]):7.1f} ms")
    mean, lo, hi = paired_bootstrap_diff(ms[True], ms[False], resamples=2000)
    print(f"pinned - unpinned, mean {mean:.1f} ms, 95% bootstrap interval [{lo:.1f}, {hi:.1f}]")


if __name__ == "__main__":
    main()
