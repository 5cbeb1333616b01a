"""The engine with and without its statements naming the tenant as a literal (`db.pinned`),
alternating the two question by question on a scale tenant, as the application role.

    python benchmarks/pinned_plans.py scale-100k --questions 30

Run it from the workspace that holds the scale tenants (`tortus-pg bench --scale 100k` builds
them); it uses that workspace's database (the embedded server unless TORTUS_DATABASE_URL is set).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from functools import partial

import psycopg
from alternating import compare

from tortus_pg import bridges, disputes, retrieve
from tortus_pg.db import pinned
from tortus_pg.embed import Embedder
from tortus_pg.engine import Answer, answer
from tortus_pg.query import chains, terms

USERS = (bridges, disputes, retrieve, chains, terms)  # the modules whose statements are pinned


def unpinned(query: str, tenant: str | None) -> str:
    return query


def use(pin: Callable[[str, str | None], str]) -> None:
    for module in USERS:
        module.pinned = pin  # type: ignore[attr-defined]


def _ask(pin: Callable[[str, str | None], str], conn: psycopg.Connection, embedder: Embedder,
         question: str) -> Answer:
    use(pin)
    try:
        return answer(conn, question, embedder=embedder, store=False)
    finally:
        use(pinned)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tenant", help="a scale tenant (scale-10k, scale-100k, …)")
    parser.add_argument("--questions", type=int, default=30)
    args = parser.parse_args()
    compare(args.tenant, args.questions, (partial(_ask, unpinned), partial(_ask, pinned)), ("unpinned", "pinned"))


if __name__ == "__main__":
    main()
