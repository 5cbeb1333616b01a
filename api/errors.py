"""Errors as JSON: `{"error": {"code", "message", "request_id"}}`, with the request id that the
`X-Request-ID` header also carries, so a caller can quote it and an operator find it in the log.

Bad input is a 4xx naming the problem; anything unexpected is a 500 that says nothing about the
server's internals.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from tortus_pg.errors import InvalidInput, TenantNotFound, TortusError

log = logging.getLogger("tortus_pg.api")
REQUEST_ID = "X-Request-ID"


class ApiError(Exception):
    """An error with its HTTP status and a stable code."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def error_response(request: Request, status: int, code: str, message: str) -> JSONResponse:
    rid = getattr(request.state, "request_id", "")
    return JSONResponse({"error": {"code": code, "message": message, "request_id": rid}}, status_code=status,
                        headers={REQUEST_ID: rid})


def _validation_message(exc: RequestValidationError) -> str:
    """The first problem of a request that failed validation, with where it is."""
    problems = []
    for err in exc.errors()[:3]:
        where = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
        problems.append(f"{where}: {err.get('msg', 'invalid')}")
    return "; ".join(problems) or "the request is invalid"


def _body_problem(request: Request, max_body_bytes: int, max_upload_bytes: int) -> tuple[int, str, str] | None:
    """A body the server will not read: over its cap (uploads have their own), or of unstated
    length (the cap is checked before a byte is read)."""
    if request.method not in ("POST", "PUT", "PATCH"):
        return None
    limit = max_upload_bytes if request.url.path.startswith("/api/sources") else max_body_bytes
    length = request.headers.get("content-length")
    if length is None:
        return 411, "length_required", "send the body with a Content-Length header"
    if not length.isdigit() or int(length) > limit:
        return 413, "too_large", f"the body is over the {limit:,}-byte limit"
    return None


def install(app: FastAPI, max_body_bytes: int, max_upload_bytes: int) -> None:
    """Request ids, the body-size cap and the JSON error handlers."""

    @app.middleware("http")
    async def request_id(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        given = request.headers.get(REQUEST_ID, "")
        request.state.request_id = given if given.isalnum() and len(given) <= 64 else uuid.uuid4().hex
        if problem := _body_problem(request, max_body_bytes, max_upload_bytes):
            return error_response(request, *problem)
        response = await call_next(request)
        response.headers[REQUEST_ID] = request.state.request_id
        return response

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        return error_response(request, exc.status, exc.code, exc.message)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(request, 422, "invalid_request", _validation_message(exc))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return error_response(request, exc.status_code, "http_error", str(exc.detail))

    @app.exception_handler(InvalidInput)
    async def invalid_input(request: Request, exc: InvalidInput) -> JSONResponse:
        return error_response(request, 400, "invalid_input", str(exc))

    @app.exception_handler(TenantNotFound)
    async def no_tenant(request: Request, exc: TenantNotFound) -> JSONResponse:
        return error_response(request, 404, "not_found", "not found")

    @app.exception_handler(TortusError)
    async def tortus_error(request: Request, exc: TortusError) -> JSONResponse:
        log.warning("request %s failed: %s", request.state.request_id, exc)
        return error_response(request, 503, "unavailable", str(exc))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("request %s failed", getattr(request.state, "request_id", ""))
        return error_response(request, 500, "internal", "internal error; quote the request id to the operator")
