"""Tenant isolation: for every tenant table, tenant B's roles see none of A's rows and cannot write them."""

from collections.abc import Iterator

import psycopg
import pytest
from psycopg.types.json import Jsonb

from tortus_pg import tenants
from tortus_pg.db import connect, tenant_scope
from tortus_pg.errors import TenantNotFound
from tortus_pg.schema import TENANT_TABLES

SEED_A = """
insert into tortus.source (tenant_id, uri, kind, sha256, text)
    values ('a', 'doc.md', 'markdown', repeat('0', 64), 'Ledger Service depends on Key Vault.');
insert into tortus.node (tenant_id, kind, key, label, text, source_id, embedding, embedding_model, tsv, theta, phi)
    select 'a', 'chunk', 'c1', 'chunk 1', 'Ledger Service depends on Key Vault.', source_id,
           '[1,0,0]', 'hash:3', to_tsvector('english', 'ledger'), 0.5, 1.5 from tortus.source;
insert into tortus.node (tenant_id, kind, key, label) values ('a', 'entity', 'key vault', 'Key Vault');
insert into tortus.edge (tenant_id, src, dst, type, source_id)
    select 'a', c.node_id, e.node_id, 'mentions', c.source_id
    from tortus.node c, tortus.node e where c.kind = 'chunk' and e.kind = 'entity';
insert into tortus.subgraph (tenant_id, name) values ('a', 'payments'), ('a', 'platform');
insert into tortus.membership (tenant_id, node_id, subgraph) select 'a', node_id, 'payments' from tortus.node;
insert into tortus.portal (tenant_id, src, dst, src_subgraph, dst_subgraph, kind, reason)
    select 'a', c.node_id, e.node_id, 'payments', 'platform', 'shared_entity', 'same entity'
    from tortus.node c, tortus.node e where c.kind = 'chunk' and e.kind = 'entity';
insert into tortus.evidence_span (tenant_id, source_id, start_char, end_char, node_id)
    select 'a', source_id, 0, 14, node_id from tortus.node where kind = 'chunk';
-- bm25_posting, bm25_doc, bm25_term and bm25_corpus rows come from the chunk's tsvector (trigger).
select tortus.rebuild_torus_grid();
insert into tortus.embedding_cache (tenant_id, model, text_sha256, embedding)
    values ('a', 'hash:3', repeat('1', 64), '[1,0,0]');
insert into tortus.query_trace (tenant_id, query, mode) values ('a', 'what?', 'hybrid');
insert into tortus.eval_run (tenant_id, dataset) values ('a', 'demo');
insert into tortus.eval_result (tenant_id, run_id, question_id, strategy)
    select 'a', run_id, 'q1', 'bm25' from tortus.eval_run;
"""


@pytest.fixture
def two_tenants(db_url: str) -> Iterator[psycopg.Connection]:
    """Tenants a (with one row in every table) and b (empty); rolled back afterwards."""
    with connect(db_url) as conn, conn.transaction(force_rollback=True):
        tenants.create_tenant(conn, "a")
        tenants.create_tenant(conn, "b")
        tenants.create_key(conn, "a", ["query"])
        with tenant_scope(conn, "a"):
            conn.execute(SEED_A)
        yield conn


@pytest.mark.parametrize("table", TENANT_TABLES)
def test_tenant_sees_own_rows(two_tenants: psycopg.Connection, table: str) -> None:
    if table == "api_key":  # the application reads keys only through tortus.authenticate_hash()
        assert two_tenants.execute("select count(*) from tortus.api_key where tenant_id = 'a'").fetchone() == (1,)
        return
    with tenant_scope(two_tenants, "a"):
        assert two_tenants.execute(f"select count(*) from tortus.{table}").fetchone()[0] >= 1  # type: ignore[index]


@pytest.mark.parametrize("role", ["app", "analyst"])
@pytest.mark.parametrize("table", TENANT_TABLES)
def test_other_tenant_sees_nothing(two_tenants: psycopg.Connection, table: str, role: str) -> None:
    with two_tenants.transaction(force_rollback=True), tenant_scope(two_tenants, "b", role=role):  # type: ignore[arg-type]
        try:
            with two_tenants.transaction():
                rows = two_tenants.execute(f"select count(*) from tortus.{table} where tenant_id <> 'b'").fetchone()
            assert rows == (0,)
        except psycopg.errors.InsufficientPrivilege:
            assert table == "api_key"  # not readable at all by these roles


@pytest.mark.parametrize("role", ["app", "analyst"])
@pytest.mark.parametrize("table", TENANT_TABLES)
def test_other_tenant_cannot_write_for_a(two_tenants: psycopg.Connection, table: str, role: str) -> None:
    row = two_tenants.execute(f"select to_jsonb(t) from tortus.{table} t where tenant_id = 'a' limit 1").fetchone()
    assert row is not None
    with two_tenants.transaction(force_rollback=True), tenant_scope(two_tenants, "b", role=role):  # type: ignore[arg-type]
        with pytest.raises(psycopg.errors.InsufficientPrivilege), two_tenants.transaction():
            two_tenants.execute(
                f"insert into tortus.{table} overriding system value "
                f"select * from jsonb_populate_record(null::tortus.{table}, %s)",
                [Jsonb(row[0])],
            )
        if role == "app" and table not in ("tenant", "api_key"):
            assert two_tenants.execute(f"update tortus.{table} set tenant_id = tenant_id").rowcount == 0
            assert two_tenants.execute(f"delete from tortus.{table}").rowcount == 0
    assert two_tenants.execute(f"select count(*) from tortus.{table} where tenant_id = 'a'").fetchone()[0] >= 1  # type: ignore[index]


def test_no_tenant_set_means_no_rows(two_tenants: psycopg.Connection) -> None:
    with two_tenants.transaction(force_rollback=True):
        two_tenants.execute("set local role tortus_app")
        assert two_tenants.execute("select count(*) from tortus.node").fetchone() == (0,)


def test_tenant_context_does_not_outlive_the_transaction(two_tenants: psycopg.Connection) -> None:
    with tenant_scope(two_tenants, "a"):
        assert two_tenants.execute("select tortus.current_tenant(), current_user").fetchone() == ("a", "tortus_app")
    assert two_tenants.execute("select tortus.current_tenant()").fetchone() == (None,)
    assert two_tenants.execute("select current_user").fetchone() != ("tortus_app",)


def test_unknown_tenant_is_a_clear_error(two_tenants: psycopg.Connection) -> None:
    with pytest.raises(TenantNotFound, match="tortus-pg tenant create nobody"), tenant_scope(two_tenants, "nobody"):
        pass


def test_analyst_is_read_only(two_tenants: psycopg.Connection) -> None:
    with pytest.raises(psycopg.errors.InsufficientPrivilege), tenant_scope(two_tenants, "a", role="analyst"):
        two_tenants.execute("delete from tortus.node")


def test_roles_do_not_bypass_rls(conn: psycopg.Connection) -> None:
    rows = conn.execute(
        "select rolname from pg_roles where rolname like 'tortus\\_%%' and (rolbypassrls or rolsuper)"
    ).fetchall()
    assert rows == []


def test_every_function_that_pins_its_search_path_searches_temp_last(conn: psycopg.Connection) -> None:
    # Without pg_temp named last, PostgreSQL searches the caller's temporary schema first for
    # tables, so a role that may create temp objects could shadow what a function reads.
    rows = conn.execute(
        "select p.proname, c from pg_proc p join pg_namespace n on n.oid = p.pronamespace, "
        "unnest(p.proconfig) c where n.nspname = 'tortus' and c like 'search_path=%'").fetchall()
    assert len(rows) >= 10
    # The Apache AGE functions also search the extension's schema, which only its owner may write.
    allowed = {"search_path=pg_catalog, pg_temp", "search_path=ag_catalog, pg_catalog, pg_temp"}
    assert {c for _, c in rows} <= allowed, rows
    assert all(c == "search_path=pg_catalog, pg_temp" for name, c in rows if not name.startswith("age_")
               and name != "cypher"), rows
