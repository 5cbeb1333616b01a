"""The engine under two traversal policies, alternating the two question by question on a scale
tenant, as the application role: the latency each costs and how often their evidence differs.

    python benchmarks/policies.py scale-100k --before failover_level=1 --after failover_level=0

Each side is a list of policy fields (`tortus_pg.policy.TraversalPolicy`) over the default
policy. Run it from the workspace that holds the scale tenants (`tortus-pg bench --scale 100k`
builds them); it uses that workspace's database (the embedded server unless TORTUS_DATABASE_URL
is set). Questions are embedded with `hash`, as the scale suite's are.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
import psycopg

from tortus_pg.config import load_settings
from tortus_pg.db import connect, database_url, tenant_scope
from tortus_pg.embed import make_embedder
from tortus_pg.engine import answer
from tortus_pg.eval.metrics import paired_bootstrap_diff
from tortus_pg.policy import TraversalPolicy, make_policy
from tortus_pg.scale.workloads import tenant_questions


def policy(fields: list[str]) -> TraversalPolicy:
    """The default policy with `fields` ("name=value", each value read as JSON where it parses:
    1, true, or a bare word such as prefer) set, checked as a request's would be."""
    return make_policy({name: _value(text) for name, text in (f.split("=", 1) for f in fields)})[0]


def _value(text: str) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def timed(conn: psycopg.Connection, questions: list[str], sides: tuple[TraversalPolicy, TraversalPolicy],
          ) -> tuple[list[list[float]], int]:
    """Milliseconds per question under each policy, in alternating order, and the questions
    whose five best evidence chunks differ between them."""
    embedder = make_embedder("hash", dim=384)
    answer(conn, questions[0], embedder=embedder, store=False)  # warm the caches and the plans
    ms: list[list[float]] = [[], []]
    differ = 0
    for i, question in enumerate(questions):
        top: list[list[int]] = [[], []]
        for side in (0, 1) if i % 2 else (1, 0):
            start = time.perf_counter()
            result = answer(conn, question, embedder=embedder, store=False, policy=sides[side])
            ms[side].append((time.perf_counter() - start) * 1000)
            top[side] = result.ranking[:5]
        differ += top[0] != top[1]
    return ms, differ


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tenant", help="a scale tenant (scale-10k, scale-100k, …)")
    parser.add_argument("--before", nargs="*", default=[], help="policy fields of the first side (name=value)")
    parser.add_argument("--after", nargs="*", default=[], help="policy fields of the second side (name=value)")
    parser.add_argument("--questions", type=int, default=50)
    args = parser.parse_args()
    sides = (policy(args.before), policy(args.after))
    with connect(database_url(load_settings())) as conn, tenant_scope(conn, args.tenant):
        ms, differ = timed(conn, tenant_questions(conn, args.questions), sides)
    for name, fields, times in (("before", args.before, ms[0]), ("after", args.after, ms[1])):
        p50, p95 = np.percentile(times, [50, 95])
        print(f"{name:6s} {' '.join(fields) or 'default':28s} p50 {p50:7.1f} ms  p95 {p95:7.1f} ms  "
              f"mean {statistics.mean(times):7.1f} ms")
    mean, lo, hi = paired_bootstrap_diff(ms[1], ms[0], resamples=2000)
    print(f"after - before, mean {mean:.1f} ms, 95% bootstrap interval [{lo:.1f}, {hi:.1f}]; "
          f"the five best evidence chunks differ for {differ} of {len(ms[0])} questions")


if __name__ == "__main__":
    main()
