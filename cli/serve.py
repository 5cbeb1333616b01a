"""`tortus-pg serve`: the HTTP API (REST, GraphQL) and the dashboard."""

from __future__ import annotations

import os

import typer

from tortus_pg import logs
from tortus_pg.logs import LogFormat

from .context import console, settings


def serve(
    ctx: typer.Context,
    host: str = typer.Option("127.0.0.1", "--host", help="Interface to listen on (0.0.0.0 for every one)."),
    port: int = typer.Option(8000, "--port", min=1, max=65535, help="TCP port."),
    workers: int = typer.Option(1, "--workers", min=1, max=64, help="Worker processes, each with its own pool."),
    pool_size: int = typer.Option(4, "--pool-size", min=1, max=100, help="Database connections per worker."),
    log_format: LogFormat = typer.Option(
        LogFormat.JSON, "--log-format", help="Logs on stderr as JSON lines (for a collector) or as text."
    ),
) -> None:
    """Serve the API and the dashboard: `POST /api/query`, `/graphql`, `/` (open it in a browser).
    Callers send `Authorization: Bearer <key>` with a key from `tortus-pg key create TENANT`."""
    # Imported here: the web stack is not loaded by every other command.
    import uvicorn
    from tortus_pg.api.app import create_app
    from tortus_pg.api.server import run_workers

    s = settings(ctx)
    level = ctx.find_root().meta.get("log_level", "warning")
    logs.configure(level, log_format)
    log_config = logs.server_config(level, log_format)
    console.print(f"serving tortus-pg on http://{host}:{port}/ (docs at /docs); Ctrl-C stops it")
    if workers == 1:
        uvicorn.run(create_app(s, pool_size=pool_size), host=host, port=port, log_level="info",
                    **({"log_config": log_config} if log_config else {}))
        return
    # Each worker process builds its own app from the same workspace and settings.
    os.environ["TORTUS_HOME"] = str(s.workspace)
    os.environ["TORTUS_API_POOL_SIZE"] = str(pool_size)
    for name, value in (("database_url", s.database_url), ("tenant", s.tenant)):
        if value:
            os.environ[f"TORTUS_{name.upper()}"] = value
    run_workers(host, port, workers, log_config)

