"""The Apache AGE mirror of a tenant's graph (SQL in sql/12_age.sql): created or brought up to
date by `sync`, kept in step after ingest, update, removal and indexing by `follow`, and read by
the walk when the policy asks for traversal "age"."""

from __future__ import annotations

from dataclasses import dataclass

import psycopg

from tortus_pg.errors import InvalidInput, TortusError


class AgeUnavailable(TortusError):
    """Apache AGE is not installed in the database."""


@dataclass(frozen=True)
class MirrorSync:
    """A tenant's graph size, and what one sync changed in its mirror."""

    nodes: int
    edges: int
    added: int
    removed: int
    changed: int


def available(conn: psycopg.Connection) -> bool:
    """Whether the AGE extension is installed in this database."""
    row = conn.execute("select tortus.age_available()").fetchone()
    return bool(row and row[0])


def mirrored(conn: psycopg.Connection, tenant: str) -> bool:
    """Whether the tenant has a mirror."""
    row = conn.execute("select tortus.age_mirrored(%s)", [tenant]).fetchone()
    return bool(row and row[0])


def sync(conn: psycopg.Connection, tenant: str) -> MirrorSync:
    """Create or update the tenant's mirror, in one transaction (owner connection)."""
    if not available(conn):
        raise AgeUnavailable(
            "Apache AGE is not installed in this database: a superuser runs `CREATE EXTENSION age` "
            "once (docs/deploy.md); traversal then can use it"
        )
    with conn.transaction():
        row = conn.execute("select * from tortus.age_sync(%s)", [tenant]).fetchone()
    assert row is not None
    return MirrorSync(*map(int, row))


def follow(conn: psycopg.Connection, tenant: str) -> MirrorSync | None:
    """Bring the tenant's mirror up to date if it has one (after its graph changed)."""
    with conn.transaction():
        has_mirror = mirrored(conn, tenant)
    return sync(conn, tenant) if has_mirror else None


def require_mirror(conn: psycopg.Connection) -> None:
    """Raise InvalidInput unless the current tenant has a mirror (for traversal "age")."""
    row = conn.execute("select tortus.age_mirrored(tortus.current_tenant())").fetchone()
    if not (row and row[0]):
        raise InvalidInput("traversal 'age' walks the tenant's Apache AGE mirror, and it has none: "
                           "run `tortus-pg graph sync-age` (with AGE installed in the database) first")
