"""The HTTP application: `create_app()` for `tortus-pg serve` (and tests).

One process holds one connection pool and one embedder (the model is loaded at start, not per
request). `/healthz` answers while the process runs; `/readyz` when the database answers and
its schema is at the migration head.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI
from fastapi.responses import JSONResponse

from tortus_pg import __version__, telemetry
from tortus_pg.config import Settings, load_settings
from tortus_pg.db import database_url
from tortus_pg.migrate import current_revision, head_revision

from . import dashboard, errors, graphql, rest
from .auth import service
from .service import ApiLimits, Service, open_service


def create_app(settings: Settings | None = None, limits: ApiLimits | None = None, pool_size: int | None = None,
               ) -> FastAPI:
    """The app for `settings` (default: the workspace's, from TORTUS_* and tortus.toml), with
    `pool_size` database connections (default: TORTUS_API_POOL_SIZE, else 4)."""
    settings = settings or load_settings()
    limits = limits or ApiLimits()
    pool_size = pool_size or int(os.environ.get("TORTUS_API_POOL_SIZE") or 4)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        svc = open_service(settings, database_url(settings), limits, pool_size)
        if svc.embedder is not None:
            svc.embedder.embed(["warm up"])  # load the model before the first question
        app.state.service = svc
        try:
            yield
        finally:
            svc.pool.close()

    app = FastAPI(title="tortus-pg", version=__version__, lifespan=lifespan,
                  description="Postgres-native retrieval for explainable multi-hop RAG: answers with the "
                              "reasoning path and the evidence spans behind them.")
    errors.install(app, limits.max_body_bytes, limits.max_upload_bytes)
    app.include_router(rest.router)
    graphql.mount(app, limits)
    app.include_router(dashboard.router)
    app.add_api_route("/healthz", healthz, methods=["GET"], tags=["health"])
    app.add_api_route("/readyz", readyz, methods=["GET"], tags=["health"])
    if telemetry.configure():  # the OTLP variables ask for traces (each worker process exports its own)
        telemetry.instrument_server(app)
    return app


def healthz() -> dict[str, str]:
    return {"status": "ok"}


def readyz(svc: Service = Depends(service)) -> JSONResponse:
    try:
        with svc.pool.connection(timeout=5) as conn:
            current = current_revision(conn)
    except Exception as exc:  # noqa: BLE001 - any failure to reach the database means not ready
        return JSONResponse({"status": "unavailable", "reason": type(exc).__name__}, status_code=503)
    head = head_revision()
    if current != head:
        return JSONResponse({"status": "outdated", "schema": current, "head": head,
                             "reason": "run `tortus-pg db upgrade`"}, status_code=503)
    return JSONResponse({"status": "ready", "schema": current})
