"""The embedded server on 127.0.0.1 for JDBC and BI tools: a login with a password connects over
TCP and calls the analysts' SQL functions in its tenant; without a password nothing connects."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from ports import free_port
from tortus_pg.cli.main import app
from typer.testing import CliRunner

from tortus_pg import embedded, migrate, tenants
from tortus_pg.db import connect
from tortus_pg.embed import HashEmbedder
from tortus_pg.indexing import build_index
from tortus_pg.ingest import pipeline, sources


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path
    embedded.stop(tmp_path / ".tortus" / "pgdata")


@pytest.mark.slow
def test_a_login_with_a_password_reaches_its_tenant_over_tcp_and_nothing_else_does(workspace: Path) -> None:
    port = free_port()
    started = CliRunner().invoke(app, ["--workspace", str(workspace), "db", "start", "--port", str(port)],
                                 env={"TORTUS_DATABASE_URL": ""})
    assert started.exit_code == 0, started.output
    assert f"127.0.0.1:{port}, password logins only" in started.output
    pgdata = workspace / ".tortus" / "pgdata"
    state = embedded.status(pgdata)
    assert state.tcp and state.port == port
    owner = embedded.bootstrap(pgdata)  # the running server, reused over its socket
    assert f"port={port}" in owner
    migrate.upgrade(owner)
    docs = workspace / "docs"
    docs.mkdir()
    (docs / "billing.md").write_text("# Billing Service\n\nThe Billing Service retries a failed charge 4 times.\n",
                                     encoding="utf-8")
    with connect(owner) as conn:
        tenants.create_tenant(conn, "acme")
        conn.commit()
        assert pipeline.ingest(conn, "acme", sources.from_directory(docs, ()), HashEmbedder(384)).count("ingested")
        build_index(conn, "acme")
        conn.execute("create role acme_bi login password 'bi-secret-1'")
        tenants.grant_login(conn, "acme_bi", "acme")
        conn.commit()
    tcp = f"postgresql://acme_bi:bi-secret-1@127.0.0.1:{port}/tortus"
    with psycopg.connect(tcp, autocommit=True) as bi:
        bi.execute("set tortus.tenant = 'acme'")
        hits = bi.execute("select node_id, score from tortus.bm25_search('billing retries', 3)").fetchall()
        assert hits and bi.execute("select current_user").fetchone() == ("acme_bi",)
    for refused in (f"postgresql://acme_bi:wrong@127.0.0.1:{port}/tortus",  # a wrong password
                    f"postgresql://tortus_owner@127.0.0.1:{port}/tortus",  # trusted on the socket, not here
                    f"postgresql://postgres@127.0.0.1:{port}/tortus"):
        with pytest.raises(psycopg.OperationalError, match="password"):
            psycopg.connect(refused, connect_timeout=5).close()
    # Started again without a port, it keeps serving as it is; the socket URL still works.
    assert CliRunner().invoke(app, ["--workspace", str(workspace), "db", "start"],
                              env={"TORTUS_DATABASE_URL": ""}).exit_code == 0
    assert embedded.status(pgdata).tcp
    with connect(owner) as conn:
        assert conn.execute("select count(*) from tortus.tenant").fetchone() == (1,)
