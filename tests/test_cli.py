"""The admin CLI, through typer's runner and as a real subprocess."""

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import typer
from tortus_pg.cli.main import app
from typer.testing import CliRunner, Result

from tortus_pg import migrate

runner = CliRunner()


def commands(group: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    for name, cmd in group.commands.items():
        yield f"{prefix}{name}", cmd
        if hasattr(cmd, "commands"):
            yield from commands(cmd, f"{prefix}{name} ")


def test_every_command_has_help() -> None:
    root = typer.main.get_command(app)
    found = dict(commands(root))
    assert {"init", "doctor", "db upgrade", "tenant create", "key revoke"} <= found.keys()
    for name, cmd in found.items():
        assert (cmd.help or "").strip(), f"`tortus-pg {name}` has no help text"
        result = runner.invoke(app, [*name.split(), "--help"])
        assert result.exit_code == 0 and "Usage" in result.output, name


def cli(ws: Path, url: str, *args: str) -> Result:
    return runner.invoke(app, ["--workspace", str(ws), "--database-url", url, *args], env={"TORTUS_DATABASE_URL": ""})


def test_init_then_doctor_on_a_url(workspace: Path, fresh_db: Callable[..., str]) -> None:
    url = fresh_db()
    first = cli(workspace, url, "init")
    assert first.exit_code == 0, first.output
    assert (workspace / "tortus.toml").exists() and "tenant default created" in first.output
    again = cli(workspace, url, "init")
    assert again.exit_code == 0 and "tenant default ready" in again.output
    doctor = cli(workspace, url, "doctor")
    assert doctor.exit_code == 0, doctor.output
    assert "FAIL" not in doctor.output and "row-level security" in doctor.output


def test_the_settings_file_is_private_and_a_wider_one_is_warned_about(workspace: Path,
                                                                      fresh_db: Callable[..., str]) -> None:
    url = fresh_db()
    assert cli(workspace, url, "init").exit_code == 0
    toml = workspace / "tortus.toml"
    assert toml.stat().st_mode & 0o777 == 0o600
    assert "chmod" not in cli(workspace, url, "tenant", "list").output
    toml.chmod(0o644)
    warned = cli(workspace, url, "tenant", "list")
    assert warned.exit_code == 0 and f"chmod 600 {toml}" in warned.output.replace("\n", "")


def test_doctor_fails_on_an_old_revision_and_names_the_fix(workspace: Path, fresh_db: Callable[..., str]) -> None:
    url = fresh_db()
    migrate.upgrade(url, "0001")
    result = cli(workspace, url, "doctor")
    assert result.exit_code == 1
    assert "at 0001" in result.output and "tortus-pg db upgrade" in result.output


def test_tenants_and_keys(workspace: Path, fresh_db: Callable[..., str]) -> None:
    url = fresh_db()
    assert cli(workspace, url, "init").exit_code == 0
    assert cli(workspace, url, "tenant", "create", "acme", "--name", "Acme Corp").exit_code == 0
    listing = cli(workspace, url, "tenant", "list")
    assert "acme" in listing.output and "Acme Corp" in listing.output
    created = cli(workspace, url, "key", "create", "acme", "--scope", "query", "--scope", "ingest")
    assert created.exit_code == 0, created.output
    key = created.output.strip().splitlines()[-1]
    assert key.startswith("tpg_") and len(key) > 40
    revoked = cli(workspace, url, "key", "revoke", "acme", "1")
    assert revoked.exit_code == 0, revoked.output
    assert cli(workspace, url, "tenant", "delete", "acme", "--yes").exit_code == 0
    assert "acme" not in cli(workspace, url, "tenant", "list").output


def run(ws: Path, *args: str, url: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORTUS_")}
    if url:
        env["TORTUS_DATABASE_URL"] = url
    return subprocess.run(
        [sys.executable, "-m", "tortus_pg.cli.main", "--workspace", str(ws), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def test_wrong_url_is_one_clear_error(workspace: Path) -> None:
    result = run(workspace, "doctor", url="postgresql://nobody:secret@127.0.0.1:1/nowhere")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "cannot connect to postgresql://nobody:***@127.0.0.1:1/nowhere" in result.stderr
    assert "secret" not in result.stderr and "TORTUS_DATABASE_URL" in result.stderr


def test_library_error_is_one_line_without_traceback(workspace: Path, db_url: str) -> None:
    result = run(workspace, "tenant", "create", "Not A Slug", url=db_url)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr and "invalid tenant id 'Not A Slug'" in result.stderr


@pytest.mark.slow
def test_embedded_server_lifecycle(workspace: Path) -> None:
    assert run(workspace, "init").returncode == 0
    try:
        status = run(workspace, "db", "status")
        assert status.returncode == 0 and "running" in status.stdout
        url = run(workspace, "db", "url").stdout.strip()
        assert url.startswith("postgresql://tortus_owner@/tortus?host=")
        import psycopg

        with psycopg.connect(url) as conn:
            assert conn.execute("select count(*) from tortus.tenant").fetchone() == (1,)
        doctor = run(workspace, "doctor")
        assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    finally:
        stop = run(workspace, "db", "stop")
    assert stop.returncode == 0 and "stopped" in stop.stdout
    after = run(workspace, "db", "status")
    assert after.returncode == 1 and "not running" in after.stdout


def test_paths_and_urls_are_printed_as_they_are(workspace: Path, fresh_db: Callable[..., str]) -> None:
    # Square brackets are rich markup: "[/b]" once crashed every command listing the source.
    url = fresh_db()
    env = {"TORTUS_DATABASE_URL": "", "TORTUS_EMBEDDER": "hash"}
    base = ["--workspace", str(workspace), "--database-url", url]
    assert runner.invoke(app, [*base, "init"], env=env).exit_code == 0
    docs = workspace / "docs"
    (docs / "[").mkdir(parents=True)
    (docs / "[" / "b]odd.md").write_text("# Odd\n\nThe odd page names the [red]Night Desk[/red] rota.\n")
    ingested = runner.invoke(app, [*base, "ingest", str(docs), "http://[fe80::1]/"], env=env)
    assert ingested.exit_code == 1, ingested.output  # one source failed: the refused URL, named as given
    assert "failed http://[fe80::1]/: refused http://[fe80::1]/" in ingested.output
    assert "1 ingested" in ingested.output
    listed = runner.invoke(app, [*base, "sources", "list"], env=env)
    assert listed.exit_code == 0, listed.output  # it once crashed on the name
    odd = str((docs / "[" / "b]odd.md").resolve())
    shown = runner.invoke(app, [*base, "sources", "show", odd], env=env)
    assert shown.exit_code == 0 and f"uri: {odd}" in shown.output
    asked = runner.invoke(app, [*base, "query", "Which rota does the odd page name?", "--explain"], env=env)
    assert asked.exit_code == 0 and "[red]Night Desk[/red]" in asked.output


def test_an_interrupted_index_step_is_redone_by_the_next_ingest(workspace: Path, fresh_db: Callable[..., str]) -> None:
    url = fresh_db()
    env = {"TORTUS_DATABASE_URL": "", "TORTUS_EMBEDDER": "hash"}
    base = ["--workspace", str(workspace), "--database-url", url]
    assert runner.invoke(app, [*base, "init"], env=env).exit_code == 0
    (workspace / "vault.md").write_text("# Key Vault\n\nKey Vault is owned by the Platform Team.\n")
    first = runner.invoke(app, [*base, "ingest", str(workspace / "vault.md")], env=env)
    assert first.exit_code == 0 and "index:" in first.output
    with psycopg.connect(url) as conn:
        analyzed = conn.execute("select analyze_count from pg_stat_user_tables where relid = 'tortus.node'::regclass"
                                ).fetchone()
        assert analyzed is not None and analyzed[0] >= 1  # statistics are fresh before the layout
        conn.execute("update tortus.node set theta = null, phi = null where kind = 'chunk'")  # as a kill leaves it
    again = runner.invoke(app, [*base, "ingest", str(workspace / "vault.md")], env=env)
    assert again.exit_code == 0 and "1 unchanged" in again.output and "index:" in again.output
    with psycopg.connect(url) as conn:
        assert conn.execute("select count(*) from tortus.node where kind = 'chunk' and theta is null"
                            ).fetchone() == (0,)
        # The index step also counts the placed chunks on the torus grid the density reads.
        assert conn.execute("select g.chunks = (select count(*) from tortus.node where kind = 'chunk') "
                            "from tortus.torus_grid g where g.layout = ''").fetchone() == (True,)
    quiet = runner.invoke(app, [*base, "ingest", str(workspace / "vault.md")], env=env)
    assert quiet.exit_code == 0 and "index:" not in quiet.output  # nothing to redo: no index step
