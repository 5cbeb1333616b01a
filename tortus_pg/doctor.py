"""Health checks for a tortus-pg database: versions, extensions, migrations, roles, RLS, indexes."""

from __future__ import annotations

from dataclasses import dataclass

import psycopg

from tortus_pg.db import ADMIN_ROLE, ANALYST_ROLE, APP_ROLE
from tortus_pg.migrate import current_revision, head_revision
from tortus_pg.schema import SCHEMA, TENANT_TABLES

MIN_SERVER = 150000
MIN_PGVECTOR = (0, 8)


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    required: bool = True


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".") if p.isdigit())


def _server(conn: psycopg.Connection) -> Check:
    num = conn.info.server_version
    version = conn.execute("show server_version").fetchone()[0]  # type: ignore[index]
    return Check("postgresql", num >= MIN_SERVER, version, "" if num >= MIN_SERVER else "use PostgreSQL 15 or newer")


def _pgvector(conn: psycopg.Connection) -> Check:
    row = conn.execute("select extversion from pg_extension where extname = 'vector'").fetchone()
    if row is None:
        return Check(
            "pgvector",
            False,
            "not installed in this database",
            "run `tortus-pg db upgrade` (an administrator may need to run `CREATE EXTENSION vector`)",
        )
    ok = _version_tuple(row[0])[:2] >= MIN_PGVECTOR
    return Check("pgvector", ok, row[0], "" if ok else "upgrade pgvector to 0.8 or newer (iterative index scans)")


def _age(conn: psycopg.Connection) -> Check:
    """The traversal engines this database offers: the SQL walk always, AGE's when installed."""
    row = conn.execute(
        "select a.default_version, e.extversion from pg_available_extensions a "
        "left join pg_extension e on e.extname = a.name where a.name = 'age'").fetchone()
    if row is None:
        detail = "traversal engines: sql (Apache AGE is not on this server)"
    elif row[1] is None:
        detail = (f"traversal engines: sql; Apache AGE {row[0]} is on the server but not installed here "
                  "(a superuser runs CREATE EXTENSION age, then `tortus-pg graph sync-age`)")
    else:
        detail = f"traversal engines: sql, age (Apache AGE {row[1]}; `tortus-pg graph sync-age` mirrors a tenant)"
    return Check("apache age", True, detail, required=False)


def _migrations(conn: psycopg.Connection) -> Check:
    current, head = current_revision(conn), head_revision()
    if current == head:
        return Check("migrations", True, f"at head ({head})")
    where = "not migrated" if current is None else f"at {current}"
    return Check("migrations", False, f"{where}, head is {head}", "run `tortus-pg db upgrade`")


def _roles(conn: psycopg.Connection) -> Check:
    rows = conn.execute(
        "select rolname, rolbypassrls or rolsuper from pg_roles where rolname = any(%s)",
        [[APP_ROLE, ANALYST_ROLE, ADMIN_ROLE]],
    ).fetchall()
    found = {name: bypass for name, bypass in rows}
    missing = sorted({APP_ROLE, ANALYST_ROLE, ADMIN_ROLE} - found.keys())
    bypassing = sorted(name for name, bypass in found.items() if bypass)
    if missing:
        return Check(
            "roles", False, f"missing: {', '.join(missing)}", "run `tortus-pg db upgrade` as a role with CREATEROLE"
        )
    if bypassing:
        return Check(
            "roles",
            False,
            f"bypass row-level security: {', '.join(bypassing)}",
            f"ALTER ROLE ... NOBYPASSRLS NOSUPERUSER for {', '.join(bypassing)}",
        )
    return Check("roles", True, f"{APP_ROLE}, {ANALYST_ROLE}, {ADMIN_ROLE} (none bypasses RLS)")


def _connecting_role(conn: psycopg.Connection) -> Check:
    row = conn.execute("select rolsuper, rolbypassrls from pg_roles where rolname = current_user").fetchone()
    user = conn.info.user
    if row and (row[0] or row[1]):
        return Check(
            "connecting role",
            False,
            f"{user} is a superuser or bypasses RLS",
            "migrate and administer as a non-superuser owner role, as on managed services",
            required=False,
        )
    return Check("connecting role", True, f"{user} (no superuser, no BYPASSRLS)", required=False)


def _rls(conn: psycopg.Connection) -> Check:
    rows = conn.execute(
        """
        select c.relname, c.relrowsecurity and c.relforcerowsecurity
               and exists (select 1 from pg_policy p where p.polrelid = c.oid and p.polname = 'tenant_isolation')
        from pg_class c join pg_namespace n on n.oid = c.relnamespace
        where n.nspname = %s and c.relkind in ('r', 'p')
        """,
        [SCHEMA],
    ).fetchall()
    state: dict[str, bool] = dict(rows)
    bad = sorted(t for t in TENANT_TABLES if not state.get(t, False))
    if bad:
        return Check(
            "row-level security",
            False,
            f"not enabled and forced on: {', '.join(bad)}",
            "re-create the policies: `tortus-pg db downgrade 0001 && tortus-pg db upgrade` (keeps data)",
        )
    return Check("row-level security", True, f"enabled and forced on {len(TENANT_TABLES)} tables")


def _indexes(conn: psycopg.Connection, embedding_dim: int) -> Check:
    invalid = conn.execute(
        """
        select c.relname from pg_index i
        join pg_class c on c.oid = i.indexrelid join pg_namespace n on n.oid = c.relnamespace
        where n.nspname = %s and not (i.indisvalid and i.indisready)
        """,
        [SCHEMA],
    ).fetchall()
    if invalid:
        names = ", ".join(r[0] for r in invalid)
        return Check("indexes", False, f"invalid: {names}", f"REINDEX INDEX CONCURRENTLY for {names}")
    hnsw = f"node_embedding_{embedding_dim}_hnsw"
    if conn.execute("select to_regclass(%s)", [f"{SCHEMA}.{hnsw}"]).fetchone() == (None,):
        return Check(
            "indexes",
            False,
            f"no HNSW index for {embedding_dim}-dimensional embeddings",
            f"run `select tortus.ensure_vector_index({embedding_dim})`",
        )
    count = conn.execute("select count(*) from pg_indexes where schemaname = %s", [SCHEMA]).fetchone()[0]  # type: ignore[index]
    return Check("indexes", True, f"{count} valid, HNSW for dimension {embedding_dim}")


def run_checks(conn: psycopg.Connection, embedding_dim: int = 384) -> list[Check]:
    """Every check, in order; later checks are skipped when the schema is missing."""
    checks = [_server(conn), _pgvector(conn), _age(conn), _migrations(conn)]
    if current_revision(conn) is None:
        return checks
    return checks + [_roles(conn), _connecting_role(conn), _rls(conn), _indexes(conn, embedding_dim)]
