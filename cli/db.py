"""`tortus-pg db …`: the server, its URL and migrations."""

from __future__ import annotations

import sys

import typer

from tortus_pg import embedded, migrate
from tortus_pg.db import database_url, redact
from tortus_pg.errors import ConfigError

from .context import console, settings

app = typer.Typer(help="Start, stop and migrate the database.", no_args_is_help=True)


def _embedded_only(ctx: typer.Context, what: str) -> None:
    if not settings(ctx).embedded:
        raise ConfigError(f"`db {what}` manages the embedded server; TORTUS_DATABASE_URL points elsewhere")


@app.command()
def start(
    ctx: typer.Context,
    port: int = typer.Option(
        None, "--port", min=1024, max=65535,
        help="Also listen on 127.0.0.1 at this port, for JDBC and BI tools (DBeaver, Metabase): password logins "
        "only. Without it, the Unix socket alone.",
    ),
) -> None:
    """Start the embedded PostgreSQL server (no-op if it runs as asked)."""
    _embedded_only(ctx, "start")
    url = embedded.bootstrap(settings(ctx).pgdata, tcp_port=port)
    console.print(f"embedded PostgreSQL running: {url}")
    if port is not None:
        console.print(f"also on {embedded.TCP_HOST}:{port}, password logins only: give a login a password "
                      "(`psql \"$(tortus-pg db url)\" -c \"create role bi login password '…'\"`) and bind it "
                      "to a tenant (`tortus-pg tenant grant-login bi TENANT`); see docs/operations.md")


@app.command()
def stop(ctx: typer.Context) -> None:
    """Stop the embedded PostgreSQL server."""
    _embedded_only(ctx, "stop")
    stopped = embedded.stop(settings(ctx).pgdata)
    console.print("stopped" if stopped else "not running")


@app.command()
def status(ctx: typer.Context) -> None:
    """Say whether the embedded server runs (exit 1 if not)."""
    _embedded_only(ctx, "status")
    state = embedded.status(settings(ctx).pgdata)
    if not state.running:
        console.print(f"not running (data directory {settings(ctx).pgdata})")
        raise typer.Exit(1)
    tcp = f", and {embedded.TCP_HOST}:{state.port} (password logins)" if state.tcp else ""
    console.print(f"running, pid {state.pid}, socket {state.socket_dir}{tcp}")


@app.command()
def url(ctx: typer.Context) -> None:
    """Print a connection URL for psql and BI tools (starts the embedded server if needed)."""
    print(database_url(settings(ctx)))


@app.command()
def upgrade(
    ctx: typer.Context,
    revision: str = typer.Argument("head", help="Target revision."),
    sql: bool = typer.Option(False, "--sql", help="Print the migration SQL instead of running it (for a DBA)."),
) -> None:
    """Migrate the schema to REVISION (default: head), then re-apply the SQL functions."""
    if sql:
        migrate.upgrade("", revision, sql_only=True, out=sys.stdout)  # type: ignore[arg-type]
        return
    target = database_url(settings(ctx))
    reached = migrate.upgrade(target, revision)
    console.print(f"{redact(target)} is at revision {reached}")


@app.command()
def downgrade(ctx: typer.Context, revision: str = typer.Argument(..., help="Target revision, e.g. base.")) -> None:
    """Migrate the schema down to REVISION (`base` removes schema tortus and all its data)."""
    reached = migrate.downgrade(database_url(settings(ctx)), revision)
    console.print(f"at revision {reached}")
