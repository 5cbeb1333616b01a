"""REST under /api: the same answers, searches and sources as the CLI, one tenant per key.

`POST /api/query` takes the policy fields of `tortus-pg query` and returns the JSON of
`tortus-pg query --json`. Every handler runs in one transaction as the application role with
the key's tenant set, so another tenant's ids are simply not found: the same 404 as an id that
never existed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Annotated, Any, Literal

import psycopg
from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.datastructures import UploadFile

from tortus_pg.ingest.store import StoreResult
from tortus_pg.policy import PortalPreference, Traversal
from tortus_pg.retrieve import MAX_QUERY_CHARS

from . import operations
from .auth import Principal, Scope, require, service
from .errors import ApiError
from .service import Service

router = APIRouter(prefix="/api", tags=["rest"])


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
    traversal: Traversal | None = None
    min_support: float | None = Field(
        None, ge=0, le=1,
        description="the support an answer read from the evidence needs (default: the tenant's, else 0.5)")


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
    readers: list[Annotated[str, Field(min_length=1, max_length=63)]] | None = Field(
        None, max_length=64, description="the groups that may read it (default: everyone in the tenant)")


def json_response(value: Any) -> Response:
    """JSON as the CLI prints it (dates and other values as strings)."""
    return Response(json.dumps(value, default=str), media_type="application/json")


@router.post("/query", summary="Answer a question with its path and evidence")
def query(body: QueryRequest, caller: Principal = Depends(require(Scope.QUERY)),
          svc: Service = Depends(service)) -> Response:
    with svc.scoped(caller) as conn:
        began = time.perf_counter()
        result = operations.ask(svc, conn, body.question, body.k, body.model_dump(exclude={"question", "k"}))
        engine_ms = (time.perf_counter() - began) * 1000
    response = json_response(result.to_json())
    # The engine's own time (embedding, stages, the stored trace): what is left of a request's
    # latency is the API's overhead (benchmarks/api_overhead.py).
    response.headers["Server-Timing"] = f"engine;dur={engine_ms:.2f}"
    return response


@router.post("/search", summary="Search chunks (exact BM25, vector or hybrid)")
def search_chunks(body: SearchRequest, caller: Principal = Depends(require(Scope.QUERY)),
                  svc: Service = Depends(service)) -> Response:
    with svc.scoped(caller) as conn:
        hits = operations.find(svc, conn, caller.tenant, body.query, body.mode, body.k, body.bm25_weight,
                               body.vector_weight, body.rrf_k)
    return json_response([hit.__dict__ for hit in hits])


@router.get("/sources", summary="The tenant's sources with their counts")
def sources(caller: Principal = Depends(require(Scope.QUERY)), svc: Service = Depends(service)) -> Response:
    with svc.scoped(caller) as conn:
        return json_response(operations.sources(conn))


@router.post("/sources", summary="Ingest a URL or a text (JSON), or an uploaded file (multipart)")
async def add_source(request: Request, caller: Principal = Depends(require(Scope.INGEST)),
                     svc: Service = Depends(service)) -> Response:
    if request.headers.get("content-type", "").startswith("multipart/form-data"):
        async with request.form(max_files=1, max_fields=5) as form:
            upload = form.get("file")
            if not isinstance(upload, UploadFile) or not upload.filename:
                raise ApiError(422, "invalid_request", "send the document as the multipart field 'file'")
            name, data, subgraphs = upload.filename, await upload.read(svc.limits.max_upload_bytes + 1), ()
        return await run_in_threadpool(_add, svc, caller, lambda conn: operations.add_text(
            svc, conn, caller.tenant, name, data, subgraphs))
    try:
        body = SourceRequest.model_validate_json(await request.body())
    except ValueError as exc:
        raise ApiError(422, "invalid_request", _first_error(exc)) from None
    if (body.url is None) == (body.text is None):
        raise ApiError(422, "invalid_request", "send exactly one of 'url' or 'text'")
    groups = tuple(body.subgraphs)
    readers = tuple(body.readers) if body.readers is not None else None
    if body.text is not None:
        text = body.text.encode()
        return await run_in_threadpool(_add, svc, caller, lambda conn: operations.add_text(
            svc, conn, caller.tenant, body.name, text, groups, readers))
    url = body.url or ""
    return await run_in_threadpool(_add, svc, caller, lambda conn: operations.add_url(
        svc, conn, caller.tenant, url, groups, readers))


@router.delete("/sources/{source_id}", summary="Remove a source and what only it supported")
def delete_source(source_id: int, caller: Principal = Depends(require(Scope.INGEST)),
                  svc: Service = Depends(service)) -> Response:
    with svc.scoped(caller) as conn:
        uri = operations.remove(conn, source_id)
    return json_response({"removed": source_id, "uri": uri})


@router.get("/traces/{trace_id}", summary="The stored trace of an answer")
def trace(trace_id: int, caller: Principal = Depends(require(Scope.QUERY)),
          svc: Service = Depends(service)) -> Response:
    with svc.scoped(caller) as conn:
        return json_response(operations.trace(conn, trace_id))


def _add(svc: Service, caller: Principal, ingest: Callable[[psycopg.Connection], StoreResult]) -> Response:
    """Ingest in one transaction of the caller's tenant (off the event loop: parsing and
    embedding take a while)."""
    with svc.scoped(caller) as conn:
        return json_response(ingest(conn).__dict__)


def _first_error(exc: ValueError) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        err = errors()[0]
        where = ".".join(str(p) for p in err.get("loc", ())) or "body"
        return f"{where}: {err.get('msg', 'invalid')}"
    return "the body is not valid JSON"
