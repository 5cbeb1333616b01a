"""Test database: one real PostgreSQL with pgvector per test session.

Chosen in this order: TORTUS_TEST_DATABASE_URL (a role that may create databases and the
vector extension); with TORTUS_TEST_BACKEND=docker and a Docker engine that answers, a container
of the project's own image (docker/postgres.Dockerfile: pgvector and Apache AGE); else the
embedded server in a temporary directory. Each test gets isolation by a rolled-back transaction;
tests that must commit ask for a database of their own.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from docker_engine import docker_engine
from psycopg import sql

from tortus_pg import embedded, migrate, tenants
from tortus_pg.db import connect, tenant_scope
from tortus_pg.embed import HashEmbedder
from tortus_pg.ingest import pipeline, sources
from tortus_pg.ingest.pipeline import IngestOptions

MAIN_DB = "tortus_test"
ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Server:
    """How to reach the test server as an administrator and as the owner role."""

    admin_template: str  # URL with {db} placeholder, for creating databases and extensions
    owner_template: str
    owner_role: str

    def admin_url(self, db: str) -> str:
        return self.admin_template.format(db=db)

    def owner_url(self, db: str) -> str:
        return self.owner_template.format(db=db)

    def create_database(self, db: str, *, with_vector: bool = True) -> str:
        with psycopg.connect(self.admin_url("postgres"), autocommit=True) as conn:
            conn.execute(sql.SQL("drop database if exists {} with (force)").format(sql.Identifier(db)))
            conn.execute(
                sql.SQL("create database {} owner {}").format(sql.Identifier(db), sql.Identifier(self.owner_role))
            )
        if with_vector:
            with psycopg.connect(self.admin_url(db), autocommit=True) as conn:
                conn.execute("create extension if not exists vector")
        return self.owner_url(db)

    def drop_database(self, db: str) -> None:
        with psycopg.connect(self.admin_url("postgres"), autocommit=True) as conn:
            conn.execute(sql.SQL("drop database if exists {} with (force)").format(sql.Identifier(db)))


def _template(url: str) -> str:
    """Replace the database name of a URL with a {db} placeholder."""
    head, sep, query = url.partition("?")
    base, _, _ = head.rpartition("/")
    return f"{base}/{{db}}{sep}{query}"


def _docker_server() -> tuple[Server, object] | None:
    if os.environ.get("TORTUS_TEST_BACKEND") != "docker" or not docker_engine():
        return None
    from testcontainers.community.postgres import PostgresContainer
    from testcontainers.core.image import DockerImage

    image = DockerImage(path=ROOT / "docker", dockerfile_path="postgres.Dockerfile", tag="tortus-pg-postgres:test",
                        clean_up=False).build()
    # The image's init scripts create the owner role (with this password) and database tortus.
    container = PostgresContainer(str(image), username="postgres", password="postgres", dbname="postgres",
                                  driver=None).with_env("TORTUS_OWNER_PASSWORD", "tortus-test").start()
    admin = _template(container.get_connection_url())
    owner = admin.replace("postgres:postgres@", "tortus_owner:tortus-test@", 1)
    return Server(admin, owner, "tortus_owner"), container


@pytest.fixture(scope="session")
def pg_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    external = os.environ.get("TORTUS_TEST_DATABASE_URL")
    container = None
    try:
        if external:
            template = _template(external)
            with psycopg.connect(external) as conn:
                role = conn.info.user
            server = Server(template, template, role)
        elif (found := _docker_server()) is not None:
            server, container = found
        else:
            pgdata = tmp_path_factory.mktemp("pg") / "pgdata"
            owner = embedded.bootstrap(pgdata, database="postgres")
            socket_dir = owner.split("host=", 1)[1]
            server = Server(
                f"postgresql://{embedded.SUPERUSER}@/{{db}}?host={socket_dir}",
                f"postgresql://{embedded.OWNER_ROLE}@/{{db}}?host={socket_dir}",
                embedded.OWNER_ROLE,
            )
    except Exception as exc:  # noqa: BLE001 - one clear abort instead of every test failing
        pytest.exit(f"cannot start or reach the test PostgreSQL: {exc}", returncode=3)
    yield server
    if container is not None:
        container.stop()  # type: ignore[attr-defined]
    elif not external:
        embedded.stop(pgdata)


@pytest.fixture(scope="session")
def db_url(pg_server: Server) -> Iterator[str]:
    """Owner URL of the session's migrated database."""
    url = pg_server.create_database(MAIN_DB)
    migrate.upgrade(url)
    yield url
    pg_server.drop_database(MAIN_DB)


@pytest.fixture(scope="session")
def session_conn(db_url: str) -> Iterator[psycopg.Connection]:
    """A long-lived autocommit connection for read-only checks (hypothesis tests)."""
    with connect(db_url, autocommit=True) as conn:
        yield conn


@pytest.fixture
def conn(db_url: str) -> Iterator[psycopg.Connection]:
    """A connection whose work is rolled back after the test; committing inside raises."""
    with connect(db_url) as conn, conn.transaction(force_rollback=True):
        yield conn


@pytest.fixture
def fresh_db(pg_server: Server) -> Iterator[Callable[..., str]]:
    """Factory for databases of the test's own (dropped afterwards); returns the owner URL."""
    made: list[str] = []

    def make(*, with_vector: bool = True) -> str:
        name = f"tortus_t_{uuid.uuid4().hex[:10]}"
        made.append(name)
        return pg_server.create_database(name, with_vector=with_vector)

    yield make
    for name in made:
        pg_server.drop_database(name)


@pytest.fixture
def corpus(
    request: pytest.FixtureRequest, fresh_db: Callable[..., str], tmp_path: Path
) -> Iterator[psycopg.Connection]:
    """A database of the test's own holding tenant "t" with the files `request.param` (name ->
    text, given by indirect parametrization) ingested with the hash embedder; the connection is
    scoped to that tenant."""
    url = fresh_db()
    migrate.upgrade(url)
    for name, text in request.param.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    with connect(url) as conn:
        tenants.create_tenant(conn, "t")
        conn.commit()
        pipeline.ingest(conn, "t", sources.resolve([str(tmp_path)], None), HashEmbedder(384), IngestOptions())
        with tenant_scope(conn, "t"):
            yield conn


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


@pytest.fixture(scope="session")
def demo(pg_server: Server, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A workspace whose database holds the demo corpus (hash embedder); returns (workspace, env)."""
    from tortus_pg.cli.main import app
    from typer.testing import CliRunner

    url = pg_server.create_database("tortus_demo")
    migrate.upgrade(url)
    ws = tmp_path_factory.mktemp("demo")
    env = {"TORTUS_DATABASE_URL": url, "TORTUS_EMBEDDER": "hash"}
    runner = CliRunner()
    assert runner.invoke(app, ["--workspace", str(ws), "init"], env=env).exit_code == 0
    result = runner.invoke(app, ["--workspace", str(ws), "ingest", "--demo"], env=env)
    assert result.exit_code == 0 and "21 ingested" in result.output and "0 failed" in result.output, result.output
    return ws, env
