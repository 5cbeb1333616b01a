"""Logins bound to tenants: a login bound to tenant A reads A and nothing of B, however it sets
`tortus.tenant`; a login bound to nothing reads nothing; and an API served by a login bound to
no tenant still serves both tenants, each entered with its key."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg
import pytest
from tortus_pg.api.app import create_app

from tortus_pg import migrate, tenants
from tortus_pg.config import load_settings
from tortus_pg.db import connect, tenant_scope
from tortus_pg.schema import TENANT_TABLES

from .conftest import serving

SEED = ("insert into tortus.source (tenant_id, uri, kind, sha256, text) "
        "values (tortus.current_tenant(), %s, 'markdown', repeat('0', 64), 'text')")


@dataclass
class Logins:
    owner: str
    url: Callable[[str], str]  # a login's URL
    names: dict[str, str]  # a, b, unbound, service
    keys: dict[str, str]  # the API keys of tenants a and b


def _as(owner_url: str, login: str) -> str:
    return re.sub(r"//[^@/]*@", f"//{login}:pw@", owner_url, count=1)


@pytest.fixture
def logins(fresh_db: Callable[..., str]) -> Iterator[Logins]:
    url = fresh_db()
    migrate.upgrade(url)
    suffix = uuid.uuid4().hex[:8]
    names = {k: f"t_{k}_{suffix}" for k in ("a", "b", "unbound", "service")}
    with connect(url) as conn:
        keys = {}
        for tenant in ("a", "b"):
            tenants.create_tenant(conn, tenant)
            with tenant_scope(conn, tenant):
                conn.execute(SEED, [f"{tenant}-doc.md"])
            keys[tenant] = tenants.create_key(conn, tenant, ["query"]).key
        for name in names.values():
            conn.execute(f"create role {name} login password 'pw'")
        tenants.grant_login(conn, names["a"], "a")
        tenants.grant_login(conn, names["b"], "b")
        conn.execute(f"grant tortus_analyst to {names['unbound']}")
        conn.execute(f"grant tortus_app to {names['service']}")
        conn.commit()
    try:
        yield Logins(url, lambda login: _as(url, login), names, keys)
    finally:
        with connect(url, autocommit=True) as conn:
            for name in names.values():  # roles are the cluster's: they outlive the test's database
                conn.execute(f"drop role {name}")


def _visible(conn: psycopg.Connection, tenant: str, role: str = "tortus_analyst") -> dict[str, int]:
    """Rows of every tenant table the session sees with `tortus.tenant` set to `tenant`."""
    with conn.transaction(force_rollback=True):
        conn.execute(f"set local role {role}")
        conn.execute("select set_config('tortus.tenant', %s, true)", [tenant])
        return {t: conn.execute(f"select count(*) from tortus.{t}").fetchone()[0]  # type: ignore[index]
                for t in TENANT_TABLES if t != "api_key"}


def test_a_bound_login_reads_its_tenant_and_nothing_of_another(logins: Logins) -> None:
    with psycopg.connect(logins.url(logins.names["a"])) as conn:
        assert _visible(conn, "a")["source"] == 1
        assert not any(_visible(conn, "b").values())
        # A proof of entry cannot be forged, nor the functions behind it called.
        with conn.transaction(force_rollback=True):
            conn.execute("set local role tortus_analyst")
            conn.execute("select set_config('tortus.tenant', 'b', true), set_config('tortus.tenant_proof', %s, true)",
                         ["0" * 64])
            assert conn.execute("select count(*) from tortus.source").fetchone() == (0,)
        for forbidden in ("select tortus.tenant_proof('b')", "select * from tortus.tenant_secret",
                          "select * from tortus.tenant_login", "select tortus.enter_tenant(repeat('0', 64))",
                          "set role tortus_app"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction(force_rollback=True):
                conn.execute(forbidden)


def test_a_login_bound_to_no_tenant_reads_nothing(logins: Logins) -> None:
    with psycopg.connect(logins.url(logins.names["unbound"])) as conn:
        for tenant in ("a", "b"):
            assert not any(_visible(conn, tenant).values())


def test_a_service_login_enters_a_tenant_only_with_its_key(logins: Logins) -> None:
    with psycopg.connect(logins.url(logins.names["service"])) as conn:
        assert not any(_visible(conn, "b", "tortus_app").values())
        with conn.transaction(force_rollback=True):
            conn.execute("set local role tortus_app")
            entered = conn.execute("select tortus.enter_tenant(%s)", [tenants.key_hash(logins.keys["b"])]).fetchone()
            assert entered == ("b",)
            assert conn.execute("select uri from tortus.source").fetchall() == [("b-doc.md",)]
            # The proof is for b: switching the setting to a by hand shows nothing.
            conn.execute("select set_config('tortus.tenant', 'a', true)")
            assert conn.execute("select count(*) from tortus.source").fetchone() == (0,)


def test_revoking_a_binding_ends_the_logins_access(logins: Logins) -> None:
    with connect(logins.owner) as conn:
        tenants.revoke_login(conn, logins.names["a"], "a")
        conn.commit()
    with psycopg.connect(logins.url(logins.names["a"])) as conn:
        assert not any(_visible(conn, "a").values())


def test_the_api_served_by_an_unbound_login_serves_both_tenants(logins: Logins, tmp_path: Path) -> None:
    settings = load_settings(tmp_path, environ={"TORTUS_DATABASE_URL": logins.url(logins.names["service"]),
                                               "TORTUS_EMBEDDER": "hash"})
    with serving(create_app(settings, pool_size=2)) as base:
        for tenant, other in (("a", "b"), ("b", "a")):
            with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {logins.keys[tenant]}"}) as http:
                uris = [s["uri"] for s in http.get("/api/sources").json()]
            assert uris == [f"{tenant}-doc.md"] and f"{other}-doc.md" not in uris


PROBES = (  # what a login might EXPLAIN ANALYZE to count or locate another tenant's rows
    "select count(*) from tortus.node where label like 'probe%'",
    "select node_id from tortus.node order by embedding <=> '[1,0,0]' limit 3",
    "select count(*) from tortus.bm25_posting where lexeme = 'merger'",
)
NODES = ("insert into tortus.node (tenant_id, kind, key, label, embedding, embedding_model) "
         "select tortus.current_tenant(), 'concept', 'probe-' || i, 'probe ' || i, "
         "array[1, i / 1000.0, 0]::vector, 'test' from generate_series(%s::int, %s::int) i")


def _plans(conn: psycopg.Connection, tenant: str) -> list[str]:
    with conn.transaction(force_rollback=True):
        conn.execute("set local role tortus_analyst")
        conn.execute("select set_config('tortus.tenant', %s, true)", [tenant])
        return ["\n".join(row[0] for row in conn.execute(
            "explain (analyze, costs off, timing off, summary off, buffers off) " + probe)) for probe in PROBES]


def test_explain_analyze_shows_a_login_nothing_of_another_tenants_rows(logins: Logins) -> None:
    with connect(logins.owner) as conn:
        for tenant, last in (("a", 5), ("b", 2000)):
            with tenant_scope(conn, tenant):
                conn.execute(NODES, [1, last])
        conn.commit()
        conn.execute("analyze tortus.node")
        conn.commit()
    with psycopg.connect(logins.url(logins.names["a"])) as conn:
        plans = _plans(conn, "a")
    # Every count a plan shows is of a's 5 rows; b's 2,000 nearer, matching rows are never met.
    counts = [int(n) for plan in plans for n in re.findall(r"(?:rows=|Removed by \w+: )(\d+)", plan)]
    assert counts and max(counts) <= 5, plans
