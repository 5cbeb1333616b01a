"""Through PgBouncer in transaction mode: consecutive transactions of one client may run on
different server connections, and one server connection serves many clients. With the
`transaction_pooler` setting nothing is prepared on the server, and every tenant's answers come
back as they do over a direct connection. Skipped where PgBouncer is not installed."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from ports import free_port

from tortus_pg import migrate
from tortus_pg.config import ConfigError, load_settings
from tortus_pg.db import connect, tenant_scope
from tortus_pg.embed import HashEmbedder
from tortus_pg.engine import answer
from tortus_pg.indexing import build_index
from tortus_pg.ingest import pipeline, sources
from tortus_pg.tenants import create_tenant

PGBOUNCER = shutil.which("pgbouncer") or ("/usr/sbin/pgbouncer" if Path("/usr/sbin/pgbouncer").exists() else None)
pytestmark = pytest.mark.skipif(PGBOUNCER is None, reason="PgBouncer is not installed (apt-get install pgbouncer)")

EMBEDDER = HashEmbedder(dim=384)
CORPORA = {
    "north": {"billing.md": "# Billing Service\n\nThe Billing Service retries a failed charge 4 times.\n",
              "ledger.md": "# Ledger Team\n\nThe Ledger Team is led by Ines Duarte.\n"},
    "south": {"billing.md": "# Billing Service\n\nThe Billing Service retries a failed charge 9 times.\n",
              "ledger.md": "# Ledger Team\n\nThe Ledger Team is led by Tomas Berg.\n"},
}
QUESTIONS = ["How many times does the Billing Service retry a failed charge?", "Who leads the Ledger Team?"]



def _bouncer(tmp: Path, socket_dir: str, database: str, role: str) -> tuple[subprocess.Popen[bytes], int]:
    """PgBouncer on 127.0.0.1 in transaction mode with one server connection for every client,
    in front of the test server's Unix socket; its files in `tmp`, which its user may write."""
    port = free_port()
    if os.geteuid() == 0:
        shutil.chown(tmp, "embedded_postgres")
    (tmp / "users.txt").write_text(f'"{role}" ""\n', encoding="utf-8")
    (tmp / "pgbouncer.ini").write_text(
        f"[databases]\n{database} = host={socket_dir} dbname={database}\n"
        f"[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        f"auth_type = trust\nauth_file = {tmp / 'users.txt'}\npool_mode = transaction\n"
        "default_pool_size = 1\nmax_client_conn = 20\n"
        f"logfile = {tmp / 'pgbouncer.log'}\npidfile = {tmp / 'pgbouncer.pid'}\n", encoding="utf-8")
    user = ["-u", "embedded_postgres"] if os.geteuid() == 0 else []  # it refuses to run as root
    process = subprocess.Popen([str(PGBOUNCER), *user, str(tmp / "pgbouncer.ini")], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process, port
        except OSError:
            assert process.poll() is None and time.monotonic() < deadline, process.stderr and process.stderr.read()
            time.sleep(0.1)


@pytest.fixture
def pooled(fresh_db: Callable[..., str], pg_server: Any, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(direct URL, URL through PgBouncer) of a database with two tenants' corpora."""
    if "host=/" not in pg_server.owner_url("x"):
        pytest.skip("the test server is not reached over a Unix socket")
    url = fresh_db()
    migrate.upgrade(url)
    with connect(url) as conn:
        for tenant, docs in CORPORA.items():
            root = tmp_path / tenant
            root.mkdir()
            for name, text in docs.items():
                (root / name).write_text(text, encoding="utf-8")
            create_tenant(conn, tenant)
            conn.commit()
            assert pipeline.ingest(conn, tenant, sources.from_directory(root, ()), EMBEDDER).count("ingested") == 2
            build_index(conn, tenant)
            conn.commit()
    database = url.split("?")[0].rsplit("/", 1)[1]
    socket_dir = url.split("host=", 1)[1]
    files = Path(tempfile.mkdtemp(prefix="tortus-bouncer-"))  # outside pytest's root-only tree
    process, port = _bouncer(files, socket_dir, database, pg_server.owner_role)
    try:
        yield url, f"postgresql://{pg_server.owner_role}@127.0.0.1:{port}/{database}"
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stderr is not None:
            process.stderr.close()
        shutil.rmtree(files, ignore_errors=True)


def _answers(conn: psycopg.Connection, tenant: str) -> list[tuple[str | None, bool]]:
    with tenant_scope(conn, tenant) as scoped:
        out = [answer(scoped, q, embedder=EMBEDDER, store=False) for q in QUESTIONS]
    conn.commit()
    return [(a.answer, a.withheld) for a in out]


def test_tenants_interleaved_through_one_pooled_server_connection_get_their_own_answers(
    pooled: tuple[str, str],
) -> None:
    direct, bounced = pooled
    with connect(direct) as conn:
        expected = {tenant: _answers(conn, tenant) for tenant in CORPORA}
    assert expected["north"] != expected["south"]
    with connect(bounced, prepared=False) as north, connect(bounced, prepared=False) as south:
        for _ in range(4):  # past psycopg's threshold (5 runs) for preparing a statement
            assert _answers(north, "north") == expected["north"]
            assert _answers(south, "south") == expected["south"]


def test_without_the_setting_prepared_statements_collide_on_the_shared_server_connection(
    pooled: tuple[str, str],
) -> None:
    """Why the setting exists: each client prepares its statements under the same names on the
    one server connection they share."""
    _, bounced = pooled
    with connect(bounced) as north, connect(bounced) as south, \
            pytest.raises(psycopg.errors.DuplicatePreparedStatement):
        for _ in range(4):
            _answers(north, "north")
            _answers(south, "south")


def test_the_setting_is_read_from_the_environment(tmp_path: Path) -> None:
    assert load_settings(tmp_path, {}, environ={"TORTUS_TRANSACTION_POOLER": "true"}).transaction_pooler
    assert not load_settings(tmp_path, {}, environ={"TORTUS_TRANSACTION_POOLER": "0"}).transaction_pooler
    with pytest.raises(ConfigError, match="TORTUS_TRANSACTION_POOLER: transaction_pooler should be a valid boolean"):
        load_settings(tmp_path, {}, environ={"TORTUS_TRANSACTION_POOLER": "sometimes"})
