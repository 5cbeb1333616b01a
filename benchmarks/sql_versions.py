"""A function of sql/ against its version at an earlier commit, alternating the two question by
question on a scale tenant, as the application role.

    python benchmarks/sql_versions.py scale-100k --before 15d0701 [--function bm25_search] [--frequent] [--k 10]
    python benchmarks/sql_versions.py scale-100k --before 29817b6 --function hybrid_search --args text-vector
    python benchmarks/sql_versions.py scale-100k --before 84aa6a5 --function supported_traverse --args walk
    python benchmarks/sql_versions.py scale-100k --before e1c2519 --function traverse --args engine-walk --differ

The earlier version is read from git, created for the run in a schema of its own (dropped
afterwards) and called like the current one, with `--args`: `text` calls FUNCTION(question, k);
`text-vector` FUNCTION(question, its hash embedding, k), as the scale suite embeds it; `walk`
FUNCTION(hybrid search's 5 best chunks, the embedding, '{}'), the walk the scale suite times;
`engine-walk` the same with the engine's walk policy (its bounds, at the base radius). Both must
return the same rows for every question (floats to 1e-9), unless `--differ`, which counts the
questions whose rows differ instead. Run it from the workspace that holds the
scale tenants (`tortus-pg bench --scale 100k` builds them), as the database owner; the earlier
version must still run on today's schema.
"""

from __future__ import annotations

import argparse
import math
import re
import statistics
import subprocess
import time
from pathlib import Path

import numpy as np
import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from tortus_pg.config import load_settings
from tortus_pg.db import APP_ROLE, connect, database_url, tenant_scope
from tortus_pg.embed import make_embedder
from tortus_pg.eval.metrics import paired_bootstrap_diff
from tortus_pg.policy import TraversalPolicy
from tortus_pg.query.walk import BASE_RADIUS, walk_policy
from tortus_pg.scale.workloads import tenant_questions

SCHEMA = "tortus_before"
SQL_DIR = Path(__file__).resolve().parent.parent / "sql"
EMBEDDER = make_embedder("hash", dim=384)


def definition_at(commit: str, function: str) -> str:
    """The `create or replace function tortus.FUNCTION(…) … $$;` statement of sql/ at `commit`."""
    start = re.compile(rf"create or replace function tortus\.{re.escape(function)}\(")
    for path in sorted(SQL_DIR.glob("*.sql")):
        text = subprocess.run(["git", "show", f"{commit}:sql/{path.name}"], capture_output=True, text=True,
                              cwd=SQL_DIR).stdout
        found = start.search(text)
        if found:
            end = text.index("$$;", text.index("$$", found.end()) + 2) + 3
            return text[found.start():end].replace(f"tortus.{function}(", f"{SCHEMA}.{function}(", 1)
    raise SystemExit(f"no function tortus.{function} in sql/ at {commit}")


def create_before(conn: psycopg.Connection, definition: str) -> None:
    conn.execute(sql.SQL("create schema {}").format(sql.Identifier(SCHEMA)))
    conn.execute(definition)  # the project's own history
    conn.execute(sql.SQL("grant usage on schema {} to {}").format(sql.Identifier(SCHEMA), sql.Identifier(APP_ROLE)))
    conn.execute(sql.SQL("grant execute on all functions in schema {} to {}").format(
        sql.Identifier(SCHEMA), sql.Identifier(APP_ROLE)))
    conn.commit()


def timed(conn: psycopg.Connection, tenant: str, calls: dict[str, str],
          questions: list[list[object]], differ: list[int] | None = None) -> dict[str, list[float]]:
    """Milliseconds per call of each version, each in its own tenant-scoped transaction, the order
    alternating question by question. Versions that disagree stop the run, unless `differ` is
    given: it collects the calls where they do."""
    ms: dict[str, list[float]] = {name: [] for name in calls}
    names = list(calls)
    for i, question in enumerate(questions):
        rows = {}
        for name in names if i % 2 else names[::-1]:
            start = time.perf_counter()
            with tenant_scope(conn, tenant):
                rows[name] = conn.execute(calls[name], question).fetchall()
            ms[name].append((time.perf_counter() - start) * 1000)
        if not same_rows(rows["before"], rows["now"]):
            if differ is not None:
                differ.append(i)
                continue
            raise SystemExit(f"the two versions disagree on call {i} ({str(question[0])[:60]})")
    return ms


def same_rows(before: list[tuple[object, ...]], now: list[tuple[object, ...]]) -> bool:
    """Row for row the same values, floats to 1e-9 of each other: summing a row's terms in
    another order may change a score's last bits."""
    def same(a: object, b: object) -> bool:
        if isinstance(a, float) and isinstance(b, float):
            return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
        return a == b
    return len(before) == len(now) and all(
        len(x) == len(y) and all(same(a, b) for a, b in zip(x, y, strict=True))
        for x, y in zip(before, now, strict=True))


PLACEHOLDERS = {"text": "%s, %s", "text-vector": "%s, %s, %s", "walk": "%s::bigint[], %s, '{}'::jsonb",
                "engine-walk": "%s::bigint[], %s, %s"}


def arguments(conn: psycopg.Connection, shape: str, question: str, k: int) -> list[object]:
    """One call's arguments for `shape` (see PLACEHOLDERS); `conn` is inside the tenant's scope."""
    if shape == "text":
        return [question, k]
    vector = np.asarray(EMBEDDER.embed([question])[0], dtype=np.float32)
    if shape == "text-vector":
        return [question, vector, k]
    seeds = [r[0] for r in conn.execute("select node_id from tortus.hybrid_search(%s, %s, 5)", [question, vector])]
    if shape == "engine-walk":
        return [seeds, vector, Jsonb(walk_policy(TraversalPolicy(), BASE_RADIUS, 0, None))]
    return [seeds, vector]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tenant", help="a scale tenant (scale-10k, scale-100k, …)")
    parser.add_argument("--before", required=True, help="the commit whose version to compare with")
    parser.add_argument("--function", default="bm25_search")
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--frequent", action="store_true", help="questions holding one of the commonest words")
    parser.add_argument("--args", choices=list(PLACEHOLDERS), default="text", help="what the function is called with")
    parser.add_argument("--differ", action="store_true", help="count the questions whose rows differ, not stop")
    args = parser.parse_args()
    params = PLACEHOLDERS[args.args]
    calls = {"before": f"select * from {SCHEMA}.{args.function}({params})",
             "now": f"select * from tortus.{args.function}({params})"}
    with connect(database_url(load_settings())) as conn:
        create_before(conn, definition_at(args.before, args.function))
        try:
            with tenant_scope(conn, args.tenant):
                texts = tenant_questions(conn, args.questions + 3, frequent=args.frequent)
                questions = [arguments(conn, args.args, q, args.k) for q in texts]
            differ: list[int] | None = [] if args.differ else None
            timed(conn, args.tenant, calls, questions[:3], [] if args.differ else None)  # warm caches and plans
            ms = timed(conn, args.tenant, calls, questions[3:], differ)
        finally:
            conn.rollback()
            conn.execute(sql.SQL("drop schema {} cascade").format(sql.Identifier(SCHEMA)))
            conn.commit()
    for name in calls:
        p50, p95 = np.percentile(ms[name], [50, 95])
        print(f"{name:6s} p50 {p50:6.2f} ms  p95 {p95:6.2f} ms  mean {statistics.mean(ms[name]):6.2f} ms")
    if differ is not None:
        print(f"the rows differ for {len(differ)} of {len(ms['now'])} questions")
    mean, lo, hi = paired_bootstrap_diff(ms["now"], ms["before"], resamples=2000)
    print(f"now - before, mean {mean:+.2f} ms, 95% bootstrap interval [{lo:+.2f}, {hi:+.2f}]")


if __name__ == "__main__":
    main()
