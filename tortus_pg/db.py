"""Connections, the database URL, and the one helper that sets tenant context."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Literal

import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql

from tortus_pg import embedded
from tortus_pg.config import Settings
from tortus_pg.errors import DatabaseUnavailable, InvalidInput, TenantNotFound, TortusError

APP_ROLE = "tortus_app"
ANALYST_ROLE = "tortus_analyst"
ADMIN_ROLE = "tortus_admin"
TENANT_SETTING = "tortus.tenant"
TENANT_ID = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")

Role = Literal["app", "analyst"]
_ROLE_SQL = {"app": f"set local role {APP_ROLE}", "analyst": f"set local role {ANALYST_ROLE}"}


def database_url(settings: Settings) -> str:
    """The configured URL, or the embedded server's (bootstrapped on first use)."""
    if settings.database_url:
        return settings.database_url
    return embedded.bootstrap(settings.pgdata)


# A URL's user information runs to the last "@" before the host, so a password may hold "@";
# key/value connection strings and query parameters name it `password` (or `sslpassword`).
_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^:/?#@\s]*):[^/?#\s]*@")
_KEY_PASSWORD = re.compile(r"(?P<head>\b(?:ssl)?password\s*=\s*)(?:'(?:[^'\\]|\\.)*'?|[^\s&'\"]*)", re.I)


def redact(text: str, secrets: Sequence[str] = ()) -> str:
    """`text` (a URL, a connection string, a driver's message quoting either) with every
    password replaced by ***, for messages and logs; `secrets` are masked wherever they stand."""
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, "***")
    text = _URL_PASSWORD.sub(r"\g<head>:***@", text)
    return _KEY_PASSWORD.sub(r"\g<head>***", text)


def _passwords(url: str) -> list[str]:
    """The password a connection string carries, and its parts between '@'s: a driver that splits
    the URL at its first '@' echoes the rest of the password as a host name."""
    found = [m.group(0)[len(m.group("head")) + 1:-1] for m in _URL_PASSWORD.finditer(url)]
    found += [m.group(0)[len(m.group("head")):].strip("'") for m in _KEY_PASSWORD.finditer(url)]
    return [part for secret in found for part in (secret, *secret.split("@")) if len(part) >= 3]


# A lock held by another session fails a command after this long instead of stalling it; a
# transaction left idle (a client stopped mid-way) ends after IDLE_IN_TRANSACTION_MS; the server
# checks every CLIENT_CHECK_MS that the client of a running statement is still there.
LOCK_TIMEOUT_MS = 30_000
IDLE_IN_TRANSACTION_MS = 600_000
CLIENT_CHECK_MS = 5_000
_SESSION = ("select set_config('lock_timeout', %s, false), "
            "set_config('idle_in_transaction_session_timeout', %s, false), "
            "set_config('client_connection_check_interval', %s, false)")


def session_timeouts(conn: psycopg.Connection, lock_timeout_ms: int = LOCK_TIMEOUT_MS) -> None:
    """Set the session's lock, idle-transaction and dead-client timeouts (commit to keep them)."""
    conn.execute(_SESSION, [f"{lock_timeout_ms}ms", f"{IDLE_IN_TRANSACTION_MS}ms", f"{CLIENT_CHECK_MS}ms"])


def connect(url: str, *, autocommit: bool = False, lock_timeout_ms: int = LOCK_TIMEOUT_MS,
            prepared: bool = True) -> psycopg.Connection:
    """Open a connection with the session timeouts set; pgvector types are registered when the
    extension exists. Without `prepared` (through a pooler in transaction mode, where the next
    transaction may run on another server connection) no statement is prepared on the server."""
    try:
        conn = psycopg.connect(url, autocommit=autocommit, connect_timeout=10,
                               **({} if prepared else {"prepare_threshold": None}))
    except psycopg.OperationalError as exc:
        reason = redact(str(exc).strip().splitlines()[-1], _passwords(url)) if str(exc).strip() else "no reason given"
        raise DatabaseUnavailable(
            f"cannot connect to {redact(url)}: {reason}\n"
            "Check TORTUS_DATABASE_URL (or database_url in tortus.toml), "
            "or unset it to use the embedded server."
        ) from None
    except psycopg.ProgrammingError as exc:
        raise DatabaseUnavailable(f"invalid database URL {redact(url)}: {redact(str(exc), _passwords(url))}") from None
    if conn.execute("select 1 from pg_type where typname = 'vector'").fetchone():
        register_vector(conn)
    session_timeouts(conn, lock_timeout_ms)
    if not autocommit:
        conn.commit()
    return conn


def require_idle(conn: psycopg.Connection, what: str) -> None:
    """Refuse a connection inside a transaction where `what` must commit its own work."""
    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        raise TortusError(f"{what} commits as it goes: pass a connection with no open transaction")


def check_tenant_id(tenant: str) -> str:
    """Validate a tenant id (lowercase slug), returning it."""
    if not TENANT_ID.match(tenant):
        raise InvalidInput(f"invalid tenant id {tenant!r}: use 1-63 lowercase letters, digits, '-' or '_'")
    return tenant


GROUP_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,62}")
MAX_GROUPS = 64


def check_groups(groups: Sequence[str] | None) -> tuple[str, ...] | None:
    """Validate the groups a key, a login or a source's readers name (None or none: every group)."""
    if groups is None:
        return None
    out = tuple(dict.fromkeys(groups))
    if len(out) > MAX_GROUPS:
        raise InvalidInput(f"name at most {MAX_GROUPS} groups, not {len(out)}")
    bad = [g for g in out if not isinstance(g, str) or not GROUP_NAME.fullmatch(g)]
    if bad:
        raise InvalidInput(f"group names are 1-63 letters, digits and _ . : - (starting with a letter or digit); "
                           f"not {str(bad[0])[:40]!r}")
    return out


@contextmanager
def tenant_scope(conn: psycopg.Connection, tenant: str, *, role: Role = "app") -> Iterator[psycopg.Connection]:
    """Run a transaction as the application (or analyst) role, scoped to one tenant.

    Both the role and the tenant are transaction-local (`SET LOCAL`), so nothing leaks to
    the next user of a pooled connection. Row-level security does the filtering. Inside an
    outer transaction the scope is a savepoint, and the previous role and tenant are put
    back on exit (releasing a savepoint would otherwise keep them until the outer commit).
    """
    check_tenant_id(tenant)
    nested = conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE
    with conn.transaction():
        previous = None
        if nested:
            previous = conn.execute(
                "select current_setting(%s, true), current_user::text, current_user = session_user",
                [TENANT_SETTING],
            ).fetchone()
        with conn.pipeline():  # the three statements in one round trip
            conn.execute(_ROLE_SQL[role])
            conn.execute("select set_config(%s, %s, true)", [TENANT_SETTING, tenant])
            known = conn.execute("select 1 from tortus.tenant")
        if known.fetchone() is None:
            raise TenantNotFound(f"no tenant {tenant!r}; create it with `tortus-pg tenant create {tenant}`")
        yield conn
        if previous is not None:
            prev_tenant, prev_role, was_session_user = previous
            conn.execute("set local role none")
            if not was_session_user:
                conn.execute(sql.SQL("set local role {}").format(sql.Identifier(prev_role)))
            conn.execute("select set_config(%s, %s, true)", [TENANT_SETTING, prev_tenant or ""])


def pinned(query: str, tenant: str | None) -> str:
    """`query` naming `tenant` as a literal where it says `tortus.current_tenant()`, so that its
    plan holds that tenant's partitions alone. Known only at run time, the tenant leaves the
    planner costing a lookup by key as a probe of every tenant's partition, and it joins a large
    tenant's spans or nodes by reading them all instead (at 100k nodes, 50-150 ms a statement
    instead of 1-5). Row-level security applies as ever; without a tenant the query is as written."""
    if tenant is None:
        return query
    return query.replace("tortus.current_tenant()", f"'{check_tenant_id(tenant)}'")


@contextmanager
def generic_plans(conn: psycopg.Connection) -> Iterator[None]:
    """Within the block (inside a transaction), cached plans are generic. Statements run many
    times over tables partitioned by tenant (foreign-key checks once per row, a trigger's
    statements, the engine's small lookups) were otherwise planned anew at each execution over
    every tenant's partitions: ingest ran at half speed once a database held a second tenant.
    The previous setting is put back after the block, or by the rollback of a failed transaction."""
    row = conn.execute("select current_setting('plan_cache_mode'), "
                       "set_config('plan_cache_mode', 'force_generic_plan', true)").fetchone()
    assert row is not None
    try:
        yield
    finally:
        if conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS:
            conn.execute("select set_config('plan_cache_mode', %s, true)", [row[0]])
