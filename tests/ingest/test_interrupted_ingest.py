"""An ingest interrupted mid-batch (its process killed, its server backend terminated, or its
server stopped at once while it commits) leaves every source fully old or fully new; re-running
completes."""

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tortus_pg import embedded, migrate, tenants
from tortus_pg.db import connect, tenant_scope

N_FILES = 60


def write_corpus(root: Path) -> None:
    for i in range(N_FILES):
        paragraphs = "\n\n".join(
            f"The Service {i} depends on Component {(i + j) % 17}. It was owned by Team {j} in {2000 + i + j}. " * 6
            for j in range(5)
        )
        (root / f"doc{i:02d}.md").write_text(f"# Service {i}\n\n{paragraphs}\n")


def per_source(conn: psycopg.Connection, tenant: str) -> dict[str, tuple[int, int, int]]:
    """uri -> (chunks, spans, mention edges)."""
    with tenant_scope(conn, tenant):
        rows = conn.execute(
            """select s.uri,
                      (select count(*) from tortus.node n where n.source_id = s.source_id),
                      (select count(*) from tortus.evidence_span e where e.source_id = s.source_id),
                      (select count(*) from tortus.edge e where e.source_id = s.source_id and e.type = 'mentions')
               from tortus.source s"""
        ).fetchall()
    return {Path(uri).name: (c, s, m) for uri, c, s, m in rows}


def ingest_cmd(ws: Path, url: str, tenant: str, corpus: Path) -> list[str]:
    return [sys.executable, "-m", "tortus_pg.cli.main", "--workspace", str(ws), "--database-url", url,
            "--tenant", tenant, "ingest", str(corpus), "--no-index"]


_BACKEND = ("select pid from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid() "
            "and backend_type = 'client backend'")


_COMMITTING = _BACKEND + " and state = 'active' and query ilike 'commit%'"


def _interrupt(proc: subprocess.Popen[bytes], watcher: psycopg.Connection, how: str, pgdata: Path | None) -> None:
    if how == "kill the process":
        proc.send_signal(signal.SIGKILL)
        return
    if how == "stop the server at once":
        assert pgdata is not None
        deadline = time.monotonic() + 3  # catch a COMMIT in flight if one shows within 3 s
        while time.monotonic() < deadline and watcher.execute(_COMMITTING).fetchone() is None:
            pass
        pid = embedded.status(pgdata).pid
        assert pid is not None
        os.kill(pid, signal.SIGQUIT)  # what `pg_ctl stop -m immediate` sends: no shutdown checkpoint
        deadline = time.monotonic() + 30
        while embedded.status(pgdata).running and time.monotonic() < deadline:
            time.sleep(0.05)
        return
    for (pid,) in watcher.execute(_BACKEND).fetchall():  # the ingest's connection, mid-transaction or between
        watcher.execute("select pg_terminate_backend(%s)", [pid])


@pytest.fixture
def private_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A server of the test's own, which it may stop at once: (owner URL, data directory)."""
    pgdata = tmp_path / "pgdata"
    url = embedded.bootstrap(pgdata)
    try:
        yield url, pgdata
    finally:
        embedded.stop(pgdata)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["kill the process", "terminate its backend"])
def test_interrupted_ingest_keeps_whole_sources_and_resumes(fresh_db, tmp_path: Path, how: str) -> None:  # type: ignore[no-untyped-def]
    _interrupted_ingest_keeps_whole_sources(fresh_db(), tmp_path, how, None)


@pytest.mark.slow
def test_a_server_stopped_at_once_mid_ingest_keeps_whole_sources(
        private_server: tuple[str, Path], tmp_path: Path) -> None:
    url, pgdata = private_server
    _interrupted_ingest_keeps_whole_sources(url, tmp_path, "stop the server at once", pgdata)


def _interrupted_ingest_keeps_whole_sources(url: str, tmp_path: Path, how: str, pgdata: Path | None) -> None:
    migrate.upgrade(url)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    write_corpus(corpus)
    with connect(url) as conn:
        tenants.create_tenant(conn, "killed")
        tenants.create_tenant(conn, "clean")
        conn.commit()
    env = {**os.environ, "TORTUS_EMBEDDER": "hash"}
    proc = subprocess.Popen(ingest_cmd(tmp_path, url, "killed", corpus), env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with connect(url, autocommit=True) as watcher:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                done = watcher.execute("select count(*) from tortus.source where tenant_id = 'killed'").fetchone()
                if done and done[0] >= 5:
                    break
                time.sleep(0.05)
            _interrupt(proc, watcher, how, pgdata)
    except psycopg.OperationalError:
        assert pgdata is not None, "only a stopped server drops the watcher"
    finally:
        proc.wait(timeout=30)
    if pgdata is not None:
        embedded.start(pgdata)  # crash recovery replays the WAL

    clean = subprocess.run(ingest_cmd(tmp_path, url, "clean", corpus), env=env, capture_output=True, text=True)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    with connect(url) as conn:
        expected = per_source(conn, "clean")
        partial = per_source(conn, "killed")
    assert len(expected) == N_FILES
    assert 5 <= len(partial) < N_FILES, "the kill should land mid-batch"
    for name, counts in partial.items():
        assert counts == expected[name], f"{name} is half-written"

    rerun = subprocess.run(ingest_cmd(tmp_path, url, "killed", corpus), env=env, capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr
    assert f"{len(partial)} unchanged" in rerun.stdout
    with connect(url) as conn:
        assert per_source(conn, "killed") == expected
