"""Tenants and API keys (administrative: runs as the owner role, across tenants)."""

from __future__ import annotations

import hashlib
import logging
import secrets
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import psycopg
from psycopg import sql
from psycopg.rows import class_row

from tortus_pg.db import ANALYST_ROLE, APP_ROLE, check_groups, check_tenant_id
from tortus_pg.errors import DatabaseBusy, InvalidInput, TenantNotFound
from tortus_pg.policy import make_policy

log = logging.getLogger(__name__)

KEY_PREFIX = "tpg_"
SCOPES = frozenset({"query", "ingest", "admin"})


@dataclass(frozen=True)
class Tenant:
    tenant_id: str
    name: str
    created_at: datetime
    sources: int
    nodes: int
    min_support: float | None  # the support its answers need, when it has its own (`set_min_support`)


@dataclass(frozen=True)
class NewKey:
    tenant_id: str
    key_id: int
    key: str
    scopes: list[str]


def create_tenant(conn: psycopg.Connection, tenant_id: str, name: str | None = None) -> bool:
    """Create a tenant; return False if it already existed."""
    check_tenant_id(tenant_id)
    row = _changing_partitions(
        conn, "insert into tortus.tenant (tenant_id, name) values (%s, %s) "
        "on conflict (tenant_id) do nothing returning tenant_id", [tenant_id, name or tenant_id], tenant_id)
    return row is not None


# Dropping a tenant's partitions (the trigger on tortus.tenant) locks every tenant table
# exclusively, one after another; attaching a new tenant's waits for writes in progress on the
# tables their foreign keys join. A query holding one of them that then asks for another
# deadlocks with the drop, and PostgreSQL may cancel the query. Waiting at most PARTITION_LOCK_MS
# for each lock makes the tenant's change the side that gives way: it is undone (a savepoint)
# and tried again after a pause, so queries running meanwhile are never cancelled for it.
PARTITION_LOCK_MS = 200
PARTITION_TRIES = 12  # with the pauses, about 8 s of trying


def _changing_partitions(
    conn: psycopg.Connection, statement: str, params: list[str], tenant_id: str,
) -> tuple[Any, ...] | None:
    """The row `statement` returns, run while it may wait at most PARTITION_LOCK_MS for each
    lock, tried again while other sessions hold the tenant tables; the caller's lock timeout is
    put back afterwards."""
    for attempt in range(PARTITION_TRIES):
        try:
            with conn.transaction():
                before = conn.execute("select current_setting('lock_timeout')").fetchone()
                conn.execute("select set_config('lock_timeout', %s, true)", [f"{PARTITION_LOCK_MS}ms"])
                row = conn.execute(statement, params).fetchone()
                conn.execute("select set_config('lock_timeout', %s, true)", [before[0] if before else "0"])
                return row
        except psycopg.errors.LockNotAvailable:
            if attempt + 1 == PARTITION_TRIES:
                break
            delay = min(0.05 * 2**attempt, 1.0)
            log.info("tenant %s: other sessions hold its tables; try %d of %d in %.2fs", tenant_id, attempt + 2,
                     PARTITION_TRIES, delay)
            time.sleep(delay)
    raise DatabaseBusy(f"tenant {tenant_id!r} was not changed: other sessions kept its tables locked; "
                       "try again when fewer queries or ingests run")


def list_tenants(conn: psycopg.Connection) -> list[Tenant]:
    """All tenants with their source and node counts."""
    with conn.cursor(row_factory=class_row(Tenant)) as cur:
        return cur.execute(
            """
            select t.tenant_id, t.name, t.created_at,
                   (select count(*) from tortus.source s where s.tenant_id = t.tenant_id) as sources,
                   (select count(*) from tortus.node n where n.tenant_id = t.tenant_id) as nodes,
                   (t.settings->>'min_support')::float8 as min_support
            from tortus.tenant t order by t.tenant_id
            """
        ).fetchall()


def delete_tenant(conn: psycopg.Connection, tenant_id: str) -> None:
    """Delete a tenant and, by cascade, every row it owns, and its Apache AGE mirror if any."""
    check_tenant_id(tenant_id)
    if _changing_partitions(conn, "delete from tortus.tenant where tenant_id = %s returning 1", [tenant_id],
                            tenant_id) is None:
        raise TenantNotFound(f"no tenant {tenant_id!r}")
    with conn.transaction():
        conn.execute("select tortus.age_drop(%s)", [tenant_id])


def set_min_support(conn: psycopg.Connection, tenant_id: str, value: float | None) -> None:
    """Set the support the tenant's answers need when a question's policy sets none (chosen on
    its golden set's abstention curve, docs/evaluation.md); None: the engine's default again."""
    check_tenant_id(tenant_id)
    if value is not None:
        make_policy({"min_support": value})  # the same range a question's policy is held to
    row = conn.execute(
        "update tortus.tenant set settings = case when %(v)s::float8 is null then settings - 'min_support' "
        "else settings || jsonb_build_object('min_support', %(v)s::float8) end where tenant_id = %(t)s returning 1",
        {"v": value, "t": tenant_id}).fetchone()
    if row is None:
        raise TenantNotFound(f"no tenant {tenant_id!r}; create it with `tortus-pg tenant create {tenant_id}`")


LoginRole = Literal["analyst", "app"]
_LOGIN_ROLES: dict[str, str] = {"analyst": ANALYST_ROLE, "app": APP_ROLE}


def grant_login(conn: psycopg.Connection, login: str, tenant_id: str, role: LoginRole = "analyst",
                groups: list[str] | None = None) -> None:
    """Bind a database login to a tenant: it is granted the analyst (or application) role, and
    the tenant policies let it see that tenant, and no other, whatever it sets tortus.tenant to.
    With `groups`, it reads only the sources open to everyone or to one of them (and writes nothing
    of the graph); re-granting replaces its groups."""
    check_tenant_id(tenant_id)
    readable = check_groups(groups)
    if conn.execute("select 1 from pg_roles where rolname = %s and rolcanlogin", [login]).fetchone() is None:
        raise InvalidInput(f"no login role {login!r}; create it first (create role … login password …)")
    if conn.execute("select 1 from tortus.tenant where tenant_id = %s", [tenant_id]).fetchone() is None:
        raise TenantNotFound(f"no tenant {tenant_id!r}; create it with `tortus-pg tenant create {tenant_id}`")
    conn.execute(sql.SQL("grant {} to {}").format(sql.Identifier(_LOGIN_ROLES[role]), sql.Identifier(login)))
    conn.execute("insert into tortus.tenant_login (login, tenant_id, groups) values (%s, %s, %s) "
                 "on conflict (login, tenant_id) do update set groups = excluded.groups",
                 [login, tenant_id, list(readable) if readable else None])


def revoke_login(conn: psycopg.Connection, login: str, tenant_id: str) -> None:
    """Unbind a login from a tenant (its role memberships stay: other tenants may still use them)."""
    if conn.execute("delete from tortus.tenant_login where login = %s and tenant_id = %s returning 1",
                    [login, tenant_id]).fetchone() is None:
        raise InvalidInput(f"login {login!r} is not bound to tenant {tenant_id!r}")


def create_key(conn: psycopg.Connection, tenant_id: str, scopes: list[str], label: str = "",
               groups: list[str] | None = None) -> NewKey:
    """Create an API key; the plain key is returned once and only its hash is stored. A key with
    `groups` reads only the sources open to everyone or to one of them, so it may only query."""
    check_tenant_id(tenant_id)
    unknown = sorted(set(scopes) - SCOPES)
    if unknown or not scopes:
        raise InvalidInput(f"unknown scopes {unknown}; choose from {sorted(SCOPES)}")
    readable = check_groups(groups)
    if readable and set(scopes) != {"query"}:
        raise InvalidInput("a key limited to groups reads part of the tenant, so it may only query: "
                           "give it the query scope alone")
    if conn.execute("select 1 from tortus.tenant where tenant_id = %s", [tenant_id]).fetchone() is None:
        raise TenantNotFound(f"no tenant {tenant_id!r}; create it with `tortus-pg tenant create {tenant_id}`")
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    row = conn.execute(
        "insert into tortus.api_key (tenant_id, label, key_hash, scopes, groups) values (%s, %s, %s, %s, %s) "
        "returning key_id",
        [tenant_id, label, key_hash(key), sorted(set(scopes)), list(readable) if readable else None],
    ).fetchone()
    assert row is not None
    return NewKey(tenant_id, row[0], key, sorted(set(scopes)))


def revoke_key(conn: psycopg.Connection, tenant_id: str, key_id: int) -> None:
    """Revoke a key by id; revoked keys no longer authenticate."""
    row = conn.execute(
        "update tortus.api_key set revoked_at = now() "
        "where tenant_id = %s and key_id = %s and revoked_at is null returning 1",
        [tenant_id, key_id],
    ).fetchone()
    if row is None:
        raise InvalidInput(f"tenant {tenant_id!r} has no active key {key_id}")


def key_hash(key: str) -> str:
    """The SHA-256 (hex) a key is stored and checked by: the key itself is never sent to the
    server, whose statement log could hold it."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def authenticate(conn: psycopg.Connection, key: str) -> tuple[str, list[str]] | None:
    """The tenant and scopes of a valid key, or None."""
    row = conn.execute("select tenant_id, scopes from tortus.authenticate_hash(%s)", [key_hash(key)]).fetchone()
    return (row[0], list(row[1])) if row else None
