"""Each tenant's rows live in partitions of their own: created with the tenant, dropped with it,
closed to every role but the owner, and kept whole when the migration converts a database."""

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from tenant_rows import NODE, SOURCE, seed_nodes

from tortus_pg import logs, migrate, tenants
from tortus_pg.db import connect, tenant_scope
from tortus_pg.embed import HashEmbedder
from tortus_pg.errors import DatabaseBusy
from tortus_pg.indexing import build_index
from tortus_pg.ingest import pipeline, sources
from tortus_pg.ingest.pipeline import IngestOptions

PARTITIONED = """
select c.relname from pg_partitioned_table p join pg_class c on c.oid = p.partrelid
where c.relnamespace = 'tortus'::regnamespace order by 1
"""
PARTITIONS_OF = """
select count(*) from pg_inherits i join pg_class c on c.oid = i.inhrelid
where c.relnamespace = 'tortus_tenant'::regnamespace
  and pg_get_expr(c.relpartbound, c.oid) = format('FOR VALUES IN (%%L)', %s::text)
"""


def _partitions(conn: psycopg.Connection, tenant: str) -> int:
    return conn.execute(PARTITIONS_OF, [tenant]).fetchone()[0]  # type: ignore[index]


def test_a_tenant_gets_a_partition_of_every_tenant_table_and_loses_them_with_it(conn: psycopg.Connection) -> None:
    tables = [r[0] for r in conn.execute(PARTITIONED)]
    assert {"node", "edge", "evidence_span", "bm25_posting", "query_trace"} <= set(tables)
    tenants.create_tenant(conn, "part-a")
    tenants.create_tenant(conn, "part-b")
    assert _partitions(conn, "part-a") == len(tables)
    for tenant in ("part-a", "part-b"):
        with tenant_scope(conn, tenant):
            source = conn.execute(SOURCE, [f"{tenant}.md"]).fetchone()[0]  # type: ignore[index]
            conn.execute(NODE, ["k", "label", source])
    tenants.delete_tenant(conn, "part-a")
    assert _partitions(conn, "part-a") == 0
    with tenant_scope(conn, "part-b"):
        assert conn.execute("select count(*) from tortus.node").fetchone() == (1,)


@pytest.mark.parametrize("role", ["tortus_app", "tortus_analyst"])
def test_partitions_are_closed_to_every_role_but_the_owner(conn: psycopg.Connection, role: str) -> None:
    tenants.create_tenant(conn, "part-c")
    name = conn.execute("select tortus.tenant_partition('source', 'part-c')").fetchone()[0]  # type: ignore[index]
    with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():
        conn.execute(f"set local role {role}")
        conn.execute("select set_config('tortus.tenant', 'part-c', true)")
        conn.execute(f'select * from tortus_tenant."{name}"')


def _seed(url: str) -> dict[str, list[tuple[int, str]]]:
    """Two tenants with a source and two nodes each; returns each tenant's (node_id, label)."""
    seen = {}
    with connect(url) as conn:
        for tenant in ("m1", "m2"):
            tenants.create_tenant(conn, tenant)
            seed_nodes(conn, tenant, [f"{tenant} node {i}" for i in range(2)])
        conn.commit()
        for tenant in ("m1", "m2"):
            with tenant_scope(conn, tenant):
                seen[tenant] = conn.execute("select node_id, label from tortus.node order by 1").fetchall()
    return seen


def _nodes(url: str, tenant: str) -> list[tuple[int, str]]:
    with connect(url) as conn, tenant_scope(conn, tenant):
        return conn.execute("select node_id, label from tortus.node order by 1").fetchall()


def test_the_conversion_keeps_rows_ids_and_counters_both_ways(fresh_db: Callable[..., str]) -> None:
    url = fresh_db()
    migrate.upgrade(url, "0003")
    before = _seed(url)
    migrate.upgrade(url)
    assert {t: _nodes(url, t) for t in before} == before
    with connect(url) as conn:
        assert _partitions(conn, "m1") > 0
        with tenant_scope(conn, "m1"):
            new = conn.execute(NODE, ["k9", "new", None]).fetchone()[0]  # type: ignore[index]
        conn.commit()
    assert new > max(node_id for rows in before.values() for node_id, _ in rows)
    migrate.downgrade(url, "0003")
    assert _nodes(url, "m2") == before["m2"]
    assert _nodes(url, "m1") == [*before["m1"], (new, "new")]


def test_a_new_tenant_is_made_while_a_query_reads_the_tenant_tables(
    db_url: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Partitions are attached, which does not wait for readers: a query holding the tenant
    tables neither holds up a new tenant (one try is enough) nor waits for it."""
    monkeypatch.setattr(tenants, "PARTITION_TRIES", 1)
    with connect(db_url) as query, connect(db_url) as admin:
        query.execute("select count(*) from tortus.edge").fetchone()  # holds its lock until it ends
        assert tenants.create_tenant(admin, "part-read")
        admin.commit()
        assert query.execute("select count(*) from tortus.source").fetchone() is not None
        assert _partitions(query, "part-read") > 0
        query.rollback()
        tenants.delete_tenant(admin, "part-read")
        admin.commit()


def test_creating_a_tenant_behind_a_long_writer_gives_up_leaving_nothing_half_made(
    db_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    """Attaching a partition waits for writes in progress on the tables its foreign keys join:
    behind a writer that stays, it gives up after its tries (each retry logged) with a clear
    error, leaving nothing half-made and the caller's lock timeout as it was, and succeeds once
    the writer is done."""
    monkeypatch.setattr(tenants, "PARTITION_TRIES", 2)
    logs.configure("info", logs.LogFormat.JSON)
    with connect(db_url) as writer, connect(db_url, lock_timeout_ms=5000) as admin:
        writer.execute("lock table tortus.node in row exclusive mode")  # what an insert holds until commit
        with pytest.raises(DatabaseBusy, match="'part-wait' was not changed"):
            tenants.create_tenant(admin, "part-wait")
        retries = [json.loads(line)["message"] for line in capsys.readouterr().err.splitlines()]
        assert retries == ["tenant part-wait: other sessions hold its tables; try 2 of 2 in 0.05s"]
        assert _partitions(admin, "part-wait") == 0
        assert admin.execute("select count(*) from tortus.tenant where tenant_id = 'part-wait'").fetchone() == (0,)
        assert admin.execute("select current_setting('lock_timeout')").fetchone() == ("5s",)
        writer.rollback()
        assert tenants.create_tenant(admin, "part-wait")
        assert _partitions(admin, "part-wait") > 0
        assert admin.execute("select current_setting('lock_timeout')").fetchone() == ("5s",)
        admin.rollback()


def test_a_tenant_being_deleted_gives_way_to_a_query_holding_the_tenant_tables(db_url: str) -> None:
    """Dropping a tenant's partitions locks every tenant table in turn: a query holding one that
    asks for another the drop has locked would deadlock with it. The deletion gives way and
    tries again, so the query is never cancelled, and the tenant is gone once the query ends."""
    with connect(db_url) as setup:
        tenants.create_tenant(setup, "part-q")
        tenants.create_tenant(setup, "part-new")
        setup.commit()
    failures: list[BaseException] = []
    with connect(db_url) as query, connect(db_url) as admin, connect(db_url, autocommit=True) as watcher:

        def delete() -> None:
            try:
                tenants.delete_tenant(admin, "part-new")
                admin.commit()
            except BaseException as exc:  # reported by the test below
                failures.append(exc)

        with tenant_scope(query, "part-q"):
            query.execute("select count(*) from tortus.edge").fetchone()  # edge is locked after source and node
            deleting = threading.Thread(target=delete)
            deleting.start()
            waiting = "select wait_event_type from pg_stat_activity where pid = %s"
            deadline = time.monotonic() + 10
            while watcher.execute(waiting, [admin.info.backend_pid]).fetchone() != ("Lock",):
                assert time.monotonic() < deadline, ("the deletion never waited for the query", failures)
                time.sleep(0.005)
            assert query.execute("select count(*) from tortus.source").fetchone() is not None
        query.rollback()
        deleting.join(timeout=30)
        assert not failures, failures
        assert _partitions(query, "part-new") == 0
    with connect(db_url) as cleanup:
        tenants.delete_tenant(cleanup, "part-q")
        cleanup.commit()


VACUUMED = """
select c.relname, s.last_vacuum is not null, c.relpages > 0 and c.relallvisible = c.relpages
from pg_class c join pg_stat_user_tables s on s.relid = c.oid
where c.relnamespace = 'tortus_tenant'::regnamespace
  and pg_get_expr(c.relpartbound, c.oid) = format('FOR VALUES IN (%%L)', %s::text)
"""


def _vacuumed(url: str, tenant: str) -> dict[str, tuple[bool, bool]]:
    """Each of the tenant's partitions: whether VACUUM ran on it, and whether every page is all-visible."""
    with connect(url) as conn:
        return {name: (ran, visible) for name, ran, visible in conn.execute(VACUUMED, [tenant])}


def test_indexing_vacuums_the_tenants_own_partitions_and_no_others(
        fresh_db: Callable[..., str], tmp_path: Path) -> None:
    url = fresh_db()
    migrate.upgrade(url)
    (tmp_path / "vault.md").write_text("# Key Vault\n\nKey Vault stores certificates for every service.\n")
    with connect(url) as conn:
        for tenant in ("vac-a", "vac-b"):
            tenants.create_tenant(conn, tenant)
            conn.commit()
            pipeline.ingest(conn, tenant, sources.resolve([str(tmp_path)], None), HashEmbedder(64), IngestOptions())
        # Inside a transaction of the caller's the rows are not committed: nothing is vacuumed.
        with conn.transaction():
            build_index(conn, "vac-b")
        build_index(conn, "vac-a")
    vacuumed, other = _vacuumed(url, "vac-a"), _vacuumed(url, "vac-b")
    assert vacuumed and all(ran for ran, _ in vacuumed.values())
    # The postings the BM25 search reads through an index alone are all-visible again.
    posting = next(name for name in vacuumed if name.startswith("bm25_posting_"))
    assert vacuumed[posting] == (True, True)
    assert other and not any(ran for ran, _ in other.values())
