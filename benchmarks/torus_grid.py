"""The engine with the tenant's torus grid and without it, alternating the two question by
question on a scale tenant, as the application role: what counting a large tenant's density
from its grid (`tortus.local_density`) saves over its fixed sample.

    python benchmarks/torus_grid.py scale-100k --questions 100

Without the grid is the same question asked in a transaction that deletes the tenant's grid
first and is rolled back after. Run it from the workspace that holds the scale tenants
(`tortus-pg bench --scale 100k` builds them and their grids); it uses that workspace's database
(the embedded server unless TORTUS_DATABASE_URL is set).
"""

from __future__ import annotations

import argparse

import psycopg
from alternating import compare

from tortus_pg.config import load_settings
from tortus_pg.db import connect, database_url, tenant_scope
from tortus_pg.embed import Embedder
from tortus_pg.engine import Answer, answer


def with_grid(conn: psycopg.Connection, embedder: Embedder, question: str) -> Answer:
    return answer(conn, question, embedder=embedder, store=False)


def without_grid(conn: psycopg.Connection, embedder: Embedder, question: str) -> Answer:
    with conn.transaction(force_rollback=True):
        conn.execute("delete from tortus.torus_grid where tenant_id = tortus.current_tenant()")
        return answer(conn, question, embedder=embedder, store=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tenant", help="a scale tenant (scale-100k, scale-1m: over 4,000 chunks)")
    parser.add_argument("--questions", type=int, default=100)
    args = parser.parse_args()
    with connect(database_url(load_settings())) as conn, tenant_scope(conn, args.tenant):
        if conn.execute("select count(*) from tortus.torus_grid").fetchone() != (1,):
            raise SystemExit(f"{args.tenant} has no torus grid: run `tortus-pg index` on it first")
    compare(args.tenant, args.questions, (without_grid, with_grid), ("sample", "grid"))


if __name__ == "__main__":
    main()
