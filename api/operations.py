"""What REST and GraphQL both do, on a connection already scoped to the caller's tenant: ask,
search, list, ingest and remove sources, read a trace. Row-level security decides what exists:
another tenant's ids are simply not found."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import psycopg

from tortus_pg.db import check_groups
from tortus_pg.engine import Answer, answer
from tortus_pg.ingest.pipeline import IngestOptions, ingest_bytes, ingest_one
from tortus_pg.ingest.sources import SourceSpec, is_url
from tortus_pg.ingest.store import StoreResult, remove_source, source_summary
from tortus_pg.policy import make_policy
from tortus_pg.retrieve import Hit, Mode, search

from .errors import ApiError
from .service import Service

_NAME = re.compile(r"^[\w.-]{1,120}\.(?:md|mdx|txt|html|htm|pdf)$")


def ask(svc: Service, conn: psycopg.Connection, question: str, k: int, policy: Mapping[str, Any]) -> Answer:
    """The engine's answer under the policy fields given (validated, and clamped to the server's
    limits with a warning)."""
    if not 1 <= k <= svc.limits.max_k:
        raise ApiError(422, "invalid_request", f"k must be between 1 and {svc.limits.max_k}")
    chosen, warnings = make_policy(dict(policy), svc.limits.policy)
    return answer(conn, question, embedder=svc.embedder, policy=chosen, k=k,
                  ts_config=svc.settings.text_search_config, warnings=warnings)


def find(svc: Service, conn: psycopg.Connection, tenant: str, query: str, mode: Mode, k: int,
         bm25_weight: float = 1.0, vector_weight: float = 1.0, rrf_k: int = 60) -> list[Hit]:
    embedder = None if mode == "keyword" else svc.embedder
    return search(conn, query, mode=mode, k=k, embedder=embedder, bm25_weight=bm25_weight,
                  vector_weight=vector_weight, rrf_k=rrf_k, ts_config=svc.settings.text_search_config, tenant=tenant)


def sources(conn: psycopg.Connection) -> list[dict[str, Any]]:
    return source_summary(conn)


def add_text(svc: Service, conn: psycopg.Connection, tenant: str, name: str, data: bytes,
             subgraphs: tuple[str, ...] = (), readers: tuple[str, ...] | None = None) -> StoreResult:
    """Ingest a text or an uploaded file, stored as `upload/<name>`."""
    if not _NAME.match(name):
        raise ApiError(422, "invalid_request",
                       f"name {name[:120]!r}: use letters, digits, '.', '-' or '_' and end in .md, .txt, .html or .pdf")
    if len(data) > svc.limits.max_upload_bytes:
        raise ApiError(413, "too_large", f"the document is over the {svc.limits.max_upload_bytes:,}-byte limit")
    return ingest_bytes(conn, tenant, name, data, _embedder(svc), _options(svc), uri=f"upload/{name}",
                        subgraphs=subgraphs, readers=check_groups(readers))


def add_url(svc: Service, conn: psycopg.Connection, tenant: str, url: str,
            subgraphs: tuple[str, ...] = (), readers: tuple[str, ...] | None = None) -> StoreResult:
    """Fetch and ingest a URL, with the CLI's guards (no private addresses, size caps)."""
    if not is_url(url):
        raise ApiError(422, "invalid_request", "url must start with http:// or https://")
    spec = SourceSpec(url, is_url=True, uri=url, subgraphs=subgraphs, readers=check_groups(readers))
    return ingest_one(conn, tenant, spec, _embedder(svc), _options(svc))


def remove(conn: psycopg.Connection, source_id: int) -> str:
    """Remove a source of the tenant by id; its URI."""
    row = conn.execute("select uri from tortus.source where source_id = %s", [source_id]).fetchone()
    if row is None or not remove_source(conn, row[0]):
        raise ApiError(404, "not_found", f"no source {source_id}")
    return str(row[0])


def trace(conn: psycopg.Connection, trace_id: int) -> dict[str, Any]:
    """A stored trace of the tenant, without its tenant column."""
    cur = conn.execute("select * from tortus.query_trace where trace_id = %s", [trace_id])
    row = cur.fetchone()
    if row is None:
        raise ApiError(404, "not_found", f"no trace {trace_id}")
    names = [c.name for c in cur.description or ()]
    return {n: v for n, v in zip(names, row, strict=True) if n != "tenant_id"}


def json_ready(value: dict[str, Any]) -> dict[str, Any]:
    """A row with its dates and other values as JSON gives them (strings)."""
    return json.loads(json.dumps(value, default=str))  # type: ignore[no-any-return]


def _options(svc: Service) -> IngestOptions:
    return IngestOptions(ts_config=svc.settings.text_search_config)


def _embedder(svc: Service) -> Any:
    if svc.embedder is None:
        raise ApiError(503, "unavailable", "the server has no embedder configured, so it cannot ingest")
    return svc.embedder
