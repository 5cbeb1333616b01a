"""What every request shares: the connection pool, the embedder (loaded once per process), the
settings and the server's limits; and the one way a request reaches the database."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import psycopg
from pgvector.psycopg import register_vector
from psycopg_pool import ConnectionPool

from tortus_pg.config import Settings, reveal
from tortus_pg.db import APP_ROLE, session_timeouts
from tortus_pg.embed import Embedder, make_embedder
from tortus_pg.policy import Limits

from .errors import ApiError

if TYPE_CHECKING:
    from .auth import Principal


@dataclass(frozen=True)
class ApiLimits:
    """Caps on what one request may send or ask for, checked before any work is done."""

    max_body_bytes: int = 1_000_000  # JSON bodies; uploads have the ingest limits
    max_upload_bytes: int = 20_000_000
    graphql_depth: int = 6
    graphql_aliases: int = 15
    graphql_tokens: int = 1_000
    max_k: int = 50
    introspection: bool = True
    policy: Limits = field(default_factory=Limits)


class KeyCache:
    """The tenant and scopes of keys checked in the last `ttl_s` seconds, by their SHA-256 (never
    the key itself): most requests skip that lookup. Entering the tenant checks the key again."""

    def __init__(self, ttl_s: float = 5.0, size: int = 10_000) -> None:
        self.ttl_s, self.size = ttl_s, size
        self._known: OrderedDict[str, tuple[float, Principal]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, digest: str) -> Principal | None:
        with self._lock:
            hit = self._known.get(digest)
            if hit is None or hit[0] < time.monotonic():
                return None
            return hit[1]

    def put(self, digest: str, caller: Principal) -> None:
        with self._lock:
            self._known[digest] = (time.monotonic() + self.ttl_s, caller)
            self._known.move_to_end(digest)
            while len(self._known) > self.size:
                self._known.popitem(last=False)


@dataclass
class Service:
    settings: Settings
    pool: ConnectionPool
    embedder: Embedder | None
    limits: ApiLimits
    keys: KeyCache = field(default_factory=KeyCache)

    @contextmanager
    def scoped(self, caller: Principal) -> Iterator[psycopg.Connection]:
        """One transaction as the application role in the caller's tenant, entered with its key
        (`tortus.enter_tenant`): a service login bound to no tenant reaches a tenant only so,
        and a key revoked since it was checked finds none. Row-level security is the last line
        of defence whatever the handler does."""
        with self.pool.connection() as conn, conn.transaction():
            with conn.pipeline():  # both statements in one round trip
                conn.execute(f"set local role {APP_ROLE}")
                entered = conn.execute("select tortus.enter_tenant(%s)", [caller.key_hash])
            row = entered.fetchone()
            if row is None or row[0] != caller.tenant:
                raise ApiError(401, "unauthorized", "the API key is unknown or revoked")
            yield conn


def _configure(conn: psycopg.Connection) -> None:
    if conn.execute("select 1 from pg_type where typname = 'vector'").fetchone():
        register_vector(conn)
    session_timeouts(conn)
    conn.commit()


def open_service(settings: Settings, url: str, limits: ApiLimits, pool_size: int = 4) -> Service:
    """The pool (opened, waiting for its first connection) and the embedder."""
    # Through a pooler in transaction mode, no statement is prepared on the server: the next
    # transaction may run on another server connection.
    unprepared = {"prepare_threshold": None} if settings.transaction_pooler else {}
    pool = ConnectionPool(url, min_size=1, max_size=pool_size, configure=_configure, open=False,
                          kwargs={"connect_timeout": 10, **unprepared}, name="tortus-api")
    pool.open(wait=True, timeout=30)
    embedder = make_embedder(settings.embedder, dim=settings.embedding_dim, base_url=settings.embed_base_url,
                             api_key=reveal(settings.embed_api_key), model=settings.embed_model)
    return Service(settings, pool, embedder, limits)
