"""REST under /api: the same answers, searches and sources as the CLI, one tenant per key.

`POST /api/query` takes the policy fields of `tortus-pg query` and returns the JSON of
`tortus-pg query --json`. Every handler runs in one transaction as the application role with
the key's tenant set, so another tenant's ids are simply not found: the same 404 as an id that
never existed.
"""

from __future__ import annotations

import json
import re
import time
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.datastructures import UploadFile

from tortus_pg.engine import answer
from tortus_pg.ingest.pipeline import IngestOptions, ingest_bytes, ingest_one
from tortus_pg.ingest.sources import SourceSpec, is_url
from tortus_pg.ingest.store import remove_source, source_summary
from tortus_pg.policy import PortalPreference, make_policy
from tortus_pg.retrieve import MAX_QUERY_CHARS, search

from .auth import Principal, Scope, require, service
from .errors import ApiError
from .service import Service

router = APIRouter(prefix="/api", tags=["rest"])
_NAME = re.compile(r"^[\w.-]{1,120}\.(?:md|mdx|txt|html|htm|pdf)$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class QueryRequest(_Strict):
    question: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    k: int = Field(5, ge=1, le=50, description="evidence chunks to answer from")
    max_hops: int | None = None
    max_ms: int | None = None
    max_tokens: int | None = None
    semantic_group: str | None = Field(None, max_length=200)
    portal_preference: PortalPreference | None = None
    failover_level: int | None = None
    local_only: bool = False
    explain: bool = False
    no_personalization: bool = False


class SearchRequest(_Strict):
    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    mode: Literal["keyword", "vector", "hybrid"] = "hybrid"
    k: int = Field(10, ge=1, le=100)
    bm25_weight: float = Field(1.0, ge=0, le=100)
    vector_weight: float = Field(1.0, ge=0, le=100)
    rrf_k: int = Field(60, ge=1, le=10_000)


class SourceRequest(_Strict):
    url: str | None = Field(None, max_length=2_000)
    text: str | None = Field(None, max_length=5_000_000)
    name: str = Field("text.md", description="the text's file name: its extension gives its kind")
    subgraphs: list[Annotated[str, Field(min_length=1, max_length=100)]] = Field(default_factory=list, max_length=20)


def json_response(value: Any) -> Response:
    """JSON as the CLI prints it (dates and other values as strings)."""
    return Response(json.dumps(value, default=str), media_type="application/json")


@router.post("/query", summary="Answer a question with its path and evidence")
def query(body: QueryRequest, caller: Principal = Depends(require(Scope.QUERY)),
          svc: Service = Depends(service)) -> Response:
    policy, warnings = make_policy(body.model_dump(exclude={"question", "k"}), svc.limits.policy)
    with svc.scoped(caller.tenant) as conn:
        began = time.perf_counter()
        result = answer(conn, body.question, embedder=svc.embedder, policy=policy, k=body.k,
                        ts_config=svc.settings.text_search_config, warnings=warnings)
        engine_ms = (time.perf_counter() - began) * 1000
    response = json_response(result.to_json())
    # The engine's own time (embedding, stages, the stored trace): what is left of a request's
    # latency is the API's overhead (benchmarks/api_overhead.py).
    response.headers["Server-Timing"] = f"engine;dur={engine_ms:.2f}"
    return response


@router.post("/search", summary="Search chunks (exact BM25, vector or hybrid)")
def search_chunks(body: SearchRequest, caller: Principal = Depends(require(Scope.QUERY)),
                  svc: Service = Depends(service)) -> Response:
    embedder = None if body.mode == "keyword" else svc.embedder
    with svc.scoped(caller.tenant) as conn:
        hits = search(conn, body.query, mode=body.mode, k=body.k, embedder=embedder, bm25_weight=body.bm25_weight,
                      vector_weight=body.vector_weight, rrf_k=body.rrf_k, ts_config=svc.settings.text_search_config)
    return json_response([hit.__dict__ for hit in hits])


@router.get("/sources", summary="The tenant's sources with their counts")
def sources(caller: Principal = Depends(require(Scope.QUERY)), svc: Service = Depends(service)) -> Response:
    with svc.scoped(caller.tenant) as conn:
        return json_response(source_summary(conn))


@router.post("/sources", summary="Ingest a URL or a text (JSON), or an uploaded file (multipart)")
async def add_source(request: Request, caller: Principal = Depends(require(Scope.INGEST)),
                     svc: Service = Depends(service)) -> Response:
    if request.headers.get("content-type", "").startswith("multipart/form-data"):
        async with request.form(max_files=1, max_fields=5) as form:
            upload = form.get("file")
            if not isinstance(upload, UploadFile) or not upload.filename:
                raise ApiError(422, "invalid_request", "send the document as the multipart field 'file'")
            name, data = upload.filename, await upload.read(svc.limits.max_upload_bytes + 1)
        return _ingest_bytes(svc, caller, name, data, ())
    try:
        body = SourceRequest.model_validate_json(await request.body())
    except ValueError as exc:
        raise ApiError(422, "invalid_request", _first_error(exc)) from None
    if (body.url is None) == (body.text is None):
        raise ApiError(422, "invalid_request", "send exactly one of 'url' or 'text'")
    if body.text is not None:
        return _ingest_bytes(svc, caller, body.name, body.text.encode(), tuple(body.subgraphs))
    if not is_url(body.url or ""):
        raise ApiError(422, "invalid_request", "url must start with http:// or https://")
    spec = SourceSpec(body.url or "", is_url=True, uri=body.url or "", subgraphs=tuple(body.subgraphs))
    with svc.pool.connection() as conn, conn.transaction():
        result = ingest_one(conn, caller.tenant, spec, svc.embedder, _options(svc))  # type: ignore[arg-type]
    return json_response(result.__dict__)


@router.delete("/sources/{source_id}", summary="Remove a source and what only it supported")
def delete_source(source_id: int, caller: Principal = Depends(require(Scope.INGEST)),
                  svc: Service = Depends(service)) -> Response:
    with svc.scoped(caller.tenant) as conn:
        row = conn.execute("select uri from tortus.source where source_id = %s", [source_id]).fetchone()
        if row is None or not remove_source(conn, row[0]):
            raise ApiError(404, "not_found", f"no source {source_id}")
    return json_response({"removed": source_id, "uri": row[0]})


@router.get("/traces/{trace_id}", summary="The stored trace of an answer")
def trace(trace_id: int, caller: Principal = Depends(require(Scope.QUERY)),
          svc: Service = Depends(service)) -> Response:
    with svc.scoped(caller.tenant) as conn:
        cur = conn.execute("select * from tortus.query_trace where trace_id = %s", [trace_id])
        row = cur.fetchone()
        if row is None:
            raise ApiError(404, "not_found", f"no trace {trace_id}")
        names = [c.name for c in cur.description or ()]
    return json_response({n: v for n, v in zip(names, row, strict=True) if n != "tenant_id"})


def _options(svc: Service) -> IngestOptions:
    return IngestOptions(ts_config=svc.settings.text_search_config)


def _ingest_bytes(svc: Service, caller: Principal, name: str, data: bytes, subgraphs: tuple[str, ...]) -> Response:
    if not _NAME.match(name):
        raise ApiError(422, "invalid_request",
                       f"name {name[:120]!r}: use letters, digits, '.', '-' or '_' and end in .md, .txt, .html or .pdf")
    if len(data) > svc.limits.max_upload_bytes:
        raise ApiError(413, "too_large", f"the document is over the {svc.limits.max_upload_bytes:,}-byte limit")
    with svc.pool.connection() as conn, conn.transaction():
        result = ingest_bytes(conn, caller.tenant, name, data, svc.embedder, _options(svc),  # type: ignore[arg-type]
                              uri=f"upload/{name}", subgraphs=subgraphs)
    return json_response(result.__dict__)


def _first_error(exc: ValueError) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        err = errors()[0]
        where = ".".join(str(p) for p in err.get("loc", ())) or "body"
        return f"{where}: {err.get('msg', 'invalid')}"
    return "the body is not valid JSON"
