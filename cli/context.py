"""Shared CLI plumbing: settings from the global options, connections, clean errors."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import typer
from rich.console import Console

from tortus_pg.config import Settings, load_settings
from tortus_pg.db import connect, database_url
from tortus_pg.migrate import require_current

# Markup off: paths, URLs, questions and messages are printed as they are ("[/b]" in a file name,
# "http://[fe80::1]/"); styled output is built as rich Text.
console = Console(highlight=False, soft_wrap=True, markup=False)
err_console = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)


def settings(ctx: typer.Context) -> Settings:
    """Settings built once by the root callback."""
    value = ctx.find_root().obj
    assert isinstance(value, Settings)
    return value


def build_settings(workspace: Path | None, database_url_: str | None, tenant: str | None) -> Settings:
    return load_settings(workspace, {"database_url": database_url_, "tenant": tenant})


@contextmanager
def owner_connection(ctx: typer.Context, *, migrated: bool = True) -> Iterator[psycopg.Connection]:
    """An idle connection as the owner role (commands commit their own transactions)."""
    s = settings(ctx)
    with connect(database_url(s), lock_timeout_ms=s.lock_timeout_ms, prepared=not s.transaction_pooler) as conn:
        if migrated:
            require_current(conn)
            conn.rollback()  # end the check's implicit transaction so later work commits on its own
        yield conn
