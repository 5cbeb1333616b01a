"""The `tortus-pg` command: thin wrappers over the tortus_pg library."""

from __future__ import annotations

from pathlib import Path

import psycopg
import typer
from rich.text import Text

from tortus_pg import __version__, logs, migrate, telemetry, tenants
from tortus_pg.config import CONFIG_FILE, DEFAULT_TOML, Settings, exposure, write_private
from tortus_pg.db import connect, database_url, redact
from tortus_pg.doctor import run_checks
from tortus_pg.errors import TortusError

from . import bench as bench_cli
from . import db
from . import eval as eval_cli
from . import golden as golden_cli
from . import graph as graph_cli
from . import ingest as ingest_cli
from . import query as query_cli
from . import serve as serve_cli
from . import tenants as tenant_cli
from .context import build_settings, console, err_console, settings

app = typer.Typer(
    help="tortus-pg: Postgres-native retrieval for explainable multi-hop RAG.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(db.app, name="db")
app.add_typer(tenant_cli.tenant_app, name="tenant")
app.add_typer(tenant_cli.key_app, name="key")
app.add_typer(ingest_cli.sources_app, name="sources")
app.add_typer(graph_cli.graph_app, name="graph")
app.command("ingest")(ingest_cli.ingest)
app.command("index")(ingest_cli.index)
app.command("query")(query_cli.query)
app.command("serve")(serve_cli.serve)
app.command("eval")(eval_cli.eval_)
app.command("report")(eval_cli.report)
app.command("bench")(bench_cli.bench)
app.command("golden-set")(golden_cli.golden_set)
app.add_typer(golden_cli.audit_app, name="audit")


def _print_version(value: bool) -> None:
    if value:
        console.print(f"tortus-pg {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    workspace: Path = typer.Option(
        None, "--workspace", "-w", help="Workspace directory (env TORTUS_HOME; default: the current directory)."
    ),
    database_url_: str = typer.Option(
        None, "--database-url", help="PostgreSQL URL (env TORTUS_DATABASE_URL; default: the embedded server)."
    ),
    tenant: str = typer.Option(None, "--tenant", "-t", help="Tenant id (env TORTUS_TENANT; default: default)."),
    log_level: str = typer.Option(
        "warning", "--log-level", envvar="TORTUS_LOG_LEVEL",
        help=f"Log records shown on stderr from this level up: {', '.join(logs.LEVELS)}.",
    ),
    verbose: int = typer.Option(
        0, "--verbose", "-v", count=True, help="-v logs at info (retries, back-off), -vv at debug."
    ),
    version: bool = typer.Option(
        False, "--version", is_eager=True, callback=_print_version, help="Print the version and exit."
    ),
) -> None:
    """Postgres-native retrieval for explainable multi-hop RAG."""
    level = ("info", "debug")[min(verbose, 2) - 1] if verbose else log_level
    try:
        logs.configure(level)
    except TortusError as exc:
        raise typer.BadParameter(str(exc), param_hint="--log-level") from None
    ctx.meta["log_level"] = level
    telemetry.configure()  # spans over OTLP when the OTEL_* variables ask for them (the otel extra)
    ctx.obj = build_settings(workspace, database_url_, tenant)
    if warning := exposure(ctx.obj.workspace / CONFIG_FILE):
        err_console.print(Text.assemble(("warning:", "yellow"), f" {warning}"))


@app.command()
def init(ctx: typer.Context) -> None:
    """Create the workspace (tortus.toml), the database and the default tenant; safe to re-run."""
    s: Settings = settings(ctx)
    s.workspace.mkdir(parents=True, exist_ok=True)
    toml = s.workspace / CONFIG_FILE
    if not toml.exists():
        write_private(toml, DEFAULT_TOML)
        console.print(f"wrote {toml}")
    url = database_url(s)
    reached = migrate.upgrade(url)
    with connect(url, prepared=not s.transaction_pooler) as conn:
        created = tenants.create_tenant(conn, s.tenant)
        conn.commit()
    console.print(f"database {redact(url)} at revision {reached}")
    console.print(f"tenant {s.tenant} {'created' if created else 'ready'}")
    console.print("next: `tortus-pg doctor`")


@app.command()
def doctor(ctx: typer.Context) -> None:
    """Check versions, extensions, migrations, roles, row-level security and indexes."""
    s = settings(ctx)
    with connect(database_url(s), prepared=not s.transaction_pooler) as conn:
        checks = run_checks(conn, s.embedding_dim)
    failed = False
    for check in checks:
        mark = ("ok", "green") if check.ok else (("FAIL", "red") if check.required else ("warn", "yellow"))
        console.print(Text.assemble((f"{mark[0]:>6}", mark[1]), f"  {check.name:<20} {check.detail}"))
        if not check.ok:
            console.print(f"{'':>6}fix: {check.fix}")
            failed = failed or check.required
    if failed:
        raise typer.Exit(1)


def main() -> None:
    """Console entry point: library errors become one clean line and exit code 1."""
    try:
        app()
    except TortusError as exc:
        err_console.print(Text.assemble(("error:", "red"), f" {exc}"))
        raise SystemExit(1) from None
    except psycopg.errors.LockNotAvailable:
        err_console.print(Text.assemble(("error:", "red"), " another session holds a lock this command needs; "
                                        "try again when it has finished (its query is in pg_stat_activity), or "
                                        "raise lock_timeout_ms"))
        raise SystemExit(1) from None
    except psycopg.Error as exc:
        err_console.print(Text.assemble(("error:", "red"), f" the database refused: {str(exc).strip()}"))
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
