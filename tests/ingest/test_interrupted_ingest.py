"""An ingest interrupted mid-batch (its process killed, or its server backend terminated) leaves
every source fully old or fully new; re-running completes."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from tortus_pg import migrate, tenants
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


def _interrupt(proc: subprocess.Popen[bytes], watcher: psycopg.Connection, how: str) -> None:
    if how == "kill the process":
        proc.send_signal(signal.SIGKILL)
        return
    for (pid,) in watcher.execute(_BACKEND).fetchall():  # the ingest's connection, mid-transaction or between
        watcher.execute("select pg_terminate_backend(%s)", [pid])


@pytest.mark.slow
@pytest.mark.parametrize("how", ["kill the process", "terminate its backend"])
def test_interrupted_ingest_keeps_whole_sources_and_resumes(fresh_db, tmp_path: Path, how: str) -> None:  # type: ignore[no-untyped-def]
    url = fresh_db()
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
            _interrupt(proc, watcher, how)
    finally:
        proc.wait(timeout=30)

    subprocess.run(ingest_cmd(tmp_path, url, "clean", corpus), env=env, check=True, capture_output=True)
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
