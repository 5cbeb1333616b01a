"""Deployment paths: a separately started server reached by URL as a non-superuser owner (as on
managed services), and a server that lacks pgvector."""

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tortus_pg import embedded, migrate, tenants
from tortus_pg.db import connect, tenant_scope
from tortus_pg.doctor import run_checks
from tortus_pg.errors import ExtensionMissing

PG15 = Path("/usr/lib/postgresql/15/bin")


@pytest.fixture
def second_server(tmp_path: Path) -> Iterator[str]:
    """A new embedded server; returns its socket directory."""
    pgdata = tmp_path / "second" / "pgdata"
    socket_dir = embedded.start(pgdata)
    yield str(socket_dir)
    embedded.stop(pgdata)


@pytest.mark.slow
def test_migrates_as_non_superuser_owner_with_createrole(second_server: str) -> None:
    admin = f"postgresql://postgres@/postgres?host={second_server}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("create role app_owner login createrole")
        conn.execute("create database app owner app_owner")
    url = f"postgresql://app_owner@/app?host={second_server}"

    with pytest.raises(
        ExtensionMissing, match=r"may not create the pgvector extension.*CREATE EXTENSION vector;.*'app'"
    ):
        migrate.upgrade(url)

    with psycopg.connect(f"postgresql://postgres@/app?host={second_server}", autocommit=True) as conn:
        conn.execute("create extension vector")  # the one administrator step
    assert migrate.upgrade(url) == migrate.head_revision()

    with connect(url) as conn:
        assert conn.execute("select rolsuper, rolbypassrls from pg_roles where rolname = current_user").fetchone() == (
            False,
            False,
        )
        failed = [c for c in run_checks(conn) if not c.ok]
        assert failed == []
        tenants.create_tenant(conn, "t1")
        with tenant_scope(conn, "t1"):
            conn.execute("insert into tortus.subgraph (tenant_id, name) values ('t1', 'ops')")
        conn.commit()
        with tenant_scope(conn, "t1", role="analyst"):
            assert conn.execute("select name from tortus.subgraph").fetchall() == [("ops",)]


@pytest.fixture
def server_without_pgvector() -> Iterator[str]:
    if not (PG15 / "pg_ctl").exists() or shutil.which("runuser") is None:
        pytest.skip("Debian's PostgreSQL 15 (no pgvector) is not installed")
    # pytest's temporary directories are private to root; the server runs as postgres.
    home = Path(tempfile.mkdtemp(prefix="tortus-pg15-"))
    shutil.chown(home, "postgres", "postgres")
    as_pg = ["runuser", "-u", "postgres", "--"]
    subprocess.run(
        [*as_pg, str(PG15 / "initdb"), "-D", str(home / "data"), "--auth=trust", "-U", "postgres"],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [
            *as_pg,
            str(PG15 / "pg_ctl"),
            "-D",
            str(home / "data"),
            "-w",
            "-l",
            str(home / "log"),
            "-o",
            f"-k {home} -h ''",
            "start",
        ],
        check=True,
        capture_output=True,
    )
    try:
        yield f"postgresql://postgres@/postgres?host={home}"
    finally:
        subprocess.run(
            [*as_pg, str(PG15 / "pg_ctl"), "-D", str(home / "data"), "-m", "immediate", "stop"],
            check=False,
            capture_output=True,
        )
        shutil.rmtree(home, ignore_errors=True)


@pytest.mark.slow
def test_server_without_pgvector_is_one_clear_error(server_without_pgvector: str) -> None:
    with pytest.raises(ExtensionMissing, match="pgvector is not installed on this PostgreSQL server"):
        migrate.upgrade(server_without_pgvector)
    with connect(server_without_pgvector) as conn:
        checks = {c.name: c for c in run_checks(conn)}
    assert not checks["pgvector"].ok and "CREATE EXTENSION vector" in checks["pgvector"].fix
    assert checks["postgresql"].ok and checks["postgresql"].detail.startswith("15")


def test_ensure_vector_index_creates_an_hnsw_index(conn: psycopg.Connection) -> None:
    assert conn.execute("select tortus.ensure_vector_index(8)").fetchone() == ("node_embedding_8_hnsw",)
    indexdef = conn.execute("select indexdef from pg_indexes where indexname = 'node_embedding_8_hnsw'").fetchone()
    assert indexdef is not None and "hnsw" in indexdef[0] and "vector(8)" in indexdef[0]
    assert "ef_construction='256'" in indexdef[0]
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="1 to 4000 dimensions"):
        conn.execute("select tortus.ensure_vector_index(4096)")
