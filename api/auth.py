"""API keys: `Authorization: Bearer <key>` names a tenant and the scopes the key was given.

No key, a malformed one, an unknown or a revoked key get 401; a key without the scope an
endpoint needs gets 403. A key's tenant and scopes are looked up by its hash
(`tortus.authenticate_hash`) and remembered for a few seconds (`service.KeyCache`); every request
still enters its tenant with the key (`Service.scoped`), so a revoked key stops at once.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from fastapi import Depends, Request

from tortus_pg.db import APP_ROLE
from tortus_pg.tenants import authenticate, key_hash

from .errors import ApiError
from .service import Service

_BEARER = re.compile(r"Bearer[ \t]+([A-Za-z0-9_\-]{8,200})", re.I)


class Scope(StrEnum):
    QUERY = "query"
    INGEST = "ingest"
    ADMIN = "admin"


@dataclass(frozen=True)
class Principal:
    """Who is calling: the key's tenant and scopes, and the key's hash, with which each request
    enters the tenant (`Service.scoped`)."""

    tenant: str
    scopes: frozenset[str]
    key_hash: str = ""

    def allows(self, scope: Scope) -> bool:
        return scope.value in self.scopes or Scope.ADMIN.value in self.scopes


def service(request: Request) -> Service:
    value = request.app.state.service
    assert isinstance(value, Service)
    return value


def principal(request: Request, svc: Service = Depends(service)) -> Principal:
    """The caller named by the request's bearer key (401 when there is none valid)."""
    header = request.headers.get("authorization", "")
    match = _BEARER.fullmatch(header.strip())
    if match is None:
        raise ApiError(401, "unauthorized", "send an API key as 'Authorization: Bearer <key>' "
                       "(create one with `tortus-pg key create TENANT`)")
    digest = key_hash(match.group(1))
    if (known := svc.keys.get(digest)) is not None:
        return known
    with svc.pool.connection() as conn, conn.transaction():
        conn.execute(f"set local role {APP_ROLE}")
        found = authenticate(conn, match.group(1))
    if found is None:
        raise ApiError(401, "unauthorized", "the API key is unknown or revoked")
    tenant, scopes = found
    caller = Principal(tenant, frozenset(scopes), digest)
    svc.keys.put(digest, caller)
    return caller


def require(scope: Scope) -> Callable[[Principal], Principal]:
    """A dependency: the caller, when its key carries `scope` (admin carries every scope)."""

    def check(caller: Principal = Depends(principal)) -> Principal:
        if not caller.allows(scope):
            raise ApiError(403, "forbidden", f"this API key lacks the {scope.value!r} scope")
        return caller

    return check
