"""Probe tenant isolation as an attacker with a database login would.

Into a database you name (an empty one: the probe creates tenants `probe-a` and `probe-b`, four
login roles, and removes the roles at the end), it ingests a small document into tenant A whose
text carries a marker. Then, as each login that is not A's own (the login bound to B, a login
bound to nothing, and a service login meant to enter tenants only with API keys), under each
role it holds and each of a dozen values of `tortus.tenant` (A's id, its variants, injections,
nothing), it reads every tenant table and view and calls every SQL function that takes ids or
text, with A's real ids. A leak is any row of A, or A's marker, in what comes back. Writes
aimed at A (update, delete, BM25 rebuild) are tried as well, and A's rows are counted
afterwards.

    python benchmarks/isolation_probe.py --url postgresql://owner@host/probe_db

Prints the attempts, the leaks and the writes that changed A. Every count must be 0 for
isolation to hold.
"""

from __future__ import annotations

import argparse
import re
import uuid
from dataclasses import dataclass

import psycopg

from tortus_pg import migrate, tenants
from tortus_pg.db import connect, tenant_scope
from tortus_pg.embed import HashEmbedder
from tortus_pg.ingest.pipeline import IngestOptions, ingest_bytes
from tortus_pg.schema import TENANT_TABLES

MARKER = "zq7marker"
DOCUMENT = f"# Vault\n\nThe vault code {MARKER} is owned by the Platform Team and depends on Key Store.\n"
SETTINGS = [None, "", "probe-a", "PROBE-A", " probe-a", "probe-a ", "probe-a'--", "probe-b", "%", "probe-a\\",
            "probe-b,probe-a", "' or true --"]


@dataclass
class Tally:
    attempts: int = 0
    leaks: int = 0
    refused: int = 0  # errors (permission denied and the like): no data either way


def _functions(ids: dict[str, int]) -> list[tuple[str, list[object]]]:
    vec = "[" + ",".join(["0.1"] * 384) + "]"
    return [
        ("select * from tortus.bm25_search(%s, 50)", [MARKER]),
        ("select * from tortus.vector_search(%s::vector, 50)", [vec]),
        ("select * from tortus.hybrid_search(%s, %s::vector, 50)", [MARKER, vec]),
        ("select tortus.span_text('probe-a', %s, 0, 200)", [ids["source"]]),
        ("select * from tortus.chunk_at('probe-a', %s, 0, 200)", [ids["source"]]),
        ("select * from tortus.traverse(array[%s]::bigint[], %s::vector, '{}')", [ids["chunk"], vec]),
        ("select * from tortus.supported_traverse(array[%s]::bigint[], %s::vector, '{}')", [ids["chunk"], vec]),
        ("select * from tortus.ppr(array[%s]::bigint[])", [ids["chunk"]]),
        ("select * from tortus.local_density(array[%s]::bigint[], 3.14)", [ids["chunk"]]),
    ]


EXPLAIN = "explain (analyze, costs off, timing off, summary off, buffers off) "


def _reads(conn: psycopg.Connection, ids: dict[str, int]) -> list[tuple[str, list[object]]]:
    views = [r[0] for r in conn.execute("select viewname from pg_views where schemaname = 'tortus'")]
    tables = [f"select * from tortus.{t}" for t in TENANT_TABLES]
    # Plans, too: the probing logins' own tenants are empty, so any row a plan counts is A's. Not
    # those of tortus.tenant: which tenants exist is public (the catalogs list their partitions).
    plans = ([EXPLAIN + t for t in tables if t != "select * from tortus.tenant"]
             + [EXPLAIN + f"select * from tortus.node where label like '%{MARKER}%'"])
    return ([(t, []) for t in tables + plans] + [(f"select * from tortus.{v}", []) for v in views]
            + _functions(ids))


def _leaked(rows: list[tuple[object, ...]]) -> bool:
    """Whether rows show anything of A: its tenant id, its marker, words only its document has, or
    a plan that met rows (the probing login's own tenant has none)."""
    text = repr(rows)
    counted = re.search(r"Rows Removed by \w+: [1-9]|Scan on [^(]*\(actual rows=[1-9]", text)
    return counted is not None or any(word in text for word in ("probe-a", MARKER, "Vault", "Key Store"))


def probe(login_url: str, roles: list[str], reads: list[tuple[str, list[object]]], ids: dict[str, int],
          tally: Tally) -> None:
    with psycopg.connect(login_url) as conn:
        for role in roles:
            for setting in SETTINGS:
                for statement, params in reads:
                    tally.attempts += 1
                    try:
                        with conn.transaction(force_rollback=True):
                            conn.execute(f"set local role {role}")
                            if setting is not None:
                                conn.execute("select set_config('tortus.tenant', %s, true)", [setting])
                            rows = conn.execute(statement, params).fetchall()
                    except psycopg.Error:
                        tally.refused += 1
                        continue
                    tally.leaks += _leaked(rows)


def writes(login_url: str, roles: list[str], ids: dict[str, int]) -> int:
    """Writes aimed at A by a login not A's; the number that went through."""
    done = 0
    statements = [("update tortus.node set label = 'pwned' where node_id = %s", [ids["chunk"]]),
                  ("delete from tortus.source where source_id = %s", [ids["source"]]),
                  ("select tortus.bm25_rebuild('probe-a')", [])]
    with psycopg.connect(login_url, autocommit=False) as conn:
        for role in roles:
            for setting in ("probe-a", "probe-b"):
                for statement, params in statements:
                    try:
                        with conn.transaction():
                            conn.execute(f"set local role {role}")
                            conn.execute("select set_config('tortus.tenant', %s, true)", [setting])
                            changed = conn.execute(statement, params).rowcount
                            done += changed if changed > 0 and statement.startswith(("update", "delete")) else 0
                    except psycopg.Error:
                        pass
    return done


def setup(url: str, suffix: str) -> tuple[dict[str, int], dict[str, tuple[str, list[str]]]]:
    migrate.upgrade(url)
    names = {k: f"probe_{k}_{suffix}" for k in ("b", "unbound", "service")}
    with connect(url) as conn:
        for tenant in ("probe-a", "probe-b"):
            tenants.create_tenant(conn, tenant)
        with conn.transaction():
            ingest_bytes(conn, "probe-a", "vault.md", DOCUMENT.encode(), HashEmbedder(dim=384), IngestOptions())
        with tenant_scope(conn, "probe-a"):
            source = conn.execute("select source_id from tortus.source").fetchone()
            chunk = conn.execute("select node_id from tortus.node where kind = 'chunk'").fetchone()
        for name in names.values():
            conn.execute(f"create role {name} login password 'probe'")
        tenants.grant_login(conn, names["b"], "probe-b")
        conn.execute(f"grant tortus_analyst, tortus_app to {names['unbound']}")
        conn.execute(f"grant tortus_app to {names['service']}")
        conn.commit()
    assert source is not None and chunk is not None
    logins = {"bound to B": (names["b"], ["tortus_analyst"]),
              "bound to nothing": (names["unbound"], ["tortus_analyst", "tortus_app"]),
              "service (keys only)": (names["service"], ["tortus_app"])}
    return {"source": source[0], "chunk": chunk[0]}, logins


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True, help="the owner's URL of an empty database to probe")
    args = parser.parse_args()
    suffix = uuid.uuid4().hex[:8]
    ids, logins = setup(args.url, suffix)
    try:
        with connect(args.url) as conn, tenant_scope(conn, "probe-a"):
            reads = _reads(conn, ids)
            before = conn.execute("select count(*), min(label) from tortus.node").fetchone()
        print("| login | attempts | leaks | refused | writes to A that went through |")
        print("| --- | --- | --- | --- | --- |")
        for label, (name, roles) in logins.items():
            url = re.sub(r"//[^@/]*@", f"//{name}:probe@", args.url, count=1)
            tally = Tally()
            probe(url, roles, reads, ids, tally)
            print(f"| {label} | {tally.attempts} | {tally.leaks} | {tally.refused} | {writes(url, roles, ids)} |")
        with connect(args.url) as conn, tenant_scope(conn, "probe-a"):
            after = conn.execute("select count(*), min(label) from tortus.node").fetchone()
        print(f"tenant A's nodes before and after: {before} -> {after}")
    finally:
        with connect(args.url, autocommit=True) as conn:
            for name, _ in logins.values():
                conn.execute(f"drop role {name}")


if __name__ == "__main__":
    main()
