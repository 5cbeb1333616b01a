"""Schema migrations (Alembic) and the SQL function files in sql/, applied after each upgrade."""

from __future__ import annotations

import io
from importlib.resources import files
from pathlib import Path
from typing import TextIO, cast

import psycopg
from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from alembic.util.exc import CommandError

from tortus_pg.db import connect
from tortus_pg.errors import ExtensionMissing, PermissionProblem, SchemaOutdated, TortusError
from tortus_pg.schema import VERSION_SCHEMA


def migrations_dir() -> Path:
    return Path(str(files("tortus_pg.migrations")))


def sql_files() -> list[Path]:
    """The SQL function files, in the order they are applied."""
    return sorted(Path(str(files("tortus_pg.sql"))).glob("*.sql"))


def alembic_config(url: str, stdout: io.TextIOBase | None = None) -> Config:
    if stdout is None:
        cfg = Config()
    else:
        # Alembic annotates these as TextIO but only calls .write() on them, which TextIOBase provides.
        stream = cast(TextIO, stdout)
        cfg = Config(stdout=stream, output_buffer=stream)
    cfg.set_main_option("script_location", str(migrations_dir()))
    cfg.attributes["url"] = url
    return cfg


def head_revision() -> str:
    head = ScriptDirectory(str(migrations_dir())).get_current_head()
    assert head is not None
    return head


def current_revision(conn: psycopg.Connection) -> str | None:
    """The applied revision, or None for a database tortus-pg has never migrated."""
    exists = conn.execute("select to_regclass(%s) is not null", [f"{VERSION_SCHEMA}.alembic_version"]).fetchone()
    if not exists or not exists[0]:
        return None
    row = conn.execute(f"select version_num from {VERSION_SCHEMA}.alembic_version").fetchone()
    return row[0] if row else None


def ensure_pgvector(conn: psycopg.Connection) -> None:
    """Create pgvector if it is missing; explain what an administrator must do if we cannot."""
    if conn.execute("select 1 from pg_extension where extname = 'vector'").fetchone():
        return
    if not conn.execute("select 1 from pg_available_extensions where name = 'vector'").fetchone():
        raise ExtensionMissing(
            "pgvector is not installed on this PostgreSQL server. Install pgvector 0.8 or newer "
            "on the server (or use a managed service that offers it), then run `tortus-pg db upgrade`."
        )
    db = conn.info.dbname
    try:
        with conn.transaction():
            conn.execute("create extension vector")
    except psycopg.errors.InsufficientPrivilege:
        raise ExtensionMissing(
            f"role {conn.info.user!r} may not create the pgvector extension. Ask an administrator "
            f"to run `CREATE EXTENSION vector;` in database {db!r} once, then run "
            "`tortus-pg db upgrade` again."
        ) from None


def apply_sql(conn: psycopg.Connection) -> list[str]:
    """(Re)apply every sql/ file in one transaction; return the file names."""
    names = []
    with conn.transaction():
        for path in sql_files():
            try:
                conn.execute(path.read_text(encoding="utf-8"))
            except psycopg.Error as exc:
                raise TortusError(f"{path.name}: {exc}") from None
            names.append(path.name)
    return names


def upgrade(url: str, revision: str = "head", *, sql_only: bool = False, out: io.TextIOBase | None = None) -> str:
    """Migrate to `revision` and re-apply sql/; return the revision reached.

    With `sql_only`, write the whole script (migrations, then sql/) to `out` for a DBA to
    review and run; nothing connects, and `url` may be empty.
    """
    cfg = alembic_config(url, out)
    if sql_only:
        command.upgrade(cfg, revision, sql=True)
        if out is not None:
            for path in sql_files():
                out.write(f"\n-- {path.name}\n{path.read_text(encoding='utf-8')}")
        return revision
    with connect(url, autocommit=True) as conn:
        ensure_pgvector(conn)
    try:
        command.upgrade(cfg, revision)
    except CommandError as exc:
        raise TortusError(f"migration failed: {exc}") from None
    except Exception as exc:
        _translate(exc)
        raise
    with connect(url) as conn:
        apply_sql(conn)
        conn.commit()
        reached = current_revision(conn)
    return reached or "base"


def downgrade(url: str, revision: str) -> str:
    """Migrate down to `revision` (e.g. 'base' or '0001'); re-apply sql/ unless at base."""
    try:
        command.downgrade(alembic_config(url), revision)
    except CommandError as exc:
        raise TortusError(f"migration failed: {exc}") from None
    with connect(url) as conn:
        reached = current_revision(conn)
        if reached is not None:
            apply_sql(conn)
            conn.commit()
    return reached or "base"


def _translate(exc: Exception) -> None:
    orig = getattr(exc, "orig", exc)
    if isinstance(orig, psycopg.errors.InsufficientPrivilege):
        raise PermissionProblem(
            f"the migrating role lacks a privilege: {orig}. It must own the database "
            "(or have CREATE on it) and have CREATEROLE to create the tortus_app, "
            "tortus_analyst and tortus_admin roles."
        ) from None


def require_current(conn: psycopg.Connection) -> None:
    """Raise a clear error unless pgvector is present and the schema is at head."""
    if not conn.execute("select 1 from pg_extension where extname = 'vector'").fetchone():
        raise ExtensionMissing("pgvector is not installed in this database; run `tortus-pg db upgrade`")
    current, head = current_revision(conn), head_revision()
    if current != head:
        where = "not migrated" if current is None else f"at revision {current}"
        raise SchemaOutdated(f"the database is {where}, the code needs {head}; run `tortus-pg db upgrade`")
