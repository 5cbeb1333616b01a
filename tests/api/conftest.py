"""The API served on a real socket (uvicorn on 127.0.0.1, an ephemeral port) over the demo
database: tenant `default` holds the demo corpus, tenant `api-other` starts empty. Keys are
created as an operator would, with `tortus.tenants.create_key`."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg
import pytest
import uvicorn
from fastapi import FastAPI
from tortus_pg.api.app import create_app
from tortus_pg.api.service import ApiLimits

from tortus_pg.config import load_settings
from tortus_pg.tenants import create_key, create_tenant, revoke_key

OTHER = "api-other"


@dataclass(frozen=True)
class Api:
    base: str
    keys: dict[str, str]  # demo (query, ingest), reader (query), other (query, ingest in api-other), revoked
    workspace: Path
    env: dict[str, str]

    def client(self, key: str | None = "demo") -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.keys[key]}"} if key else {}
        return httpx.Client(base_url=self.base, headers=headers, timeout=60)


def _keys(url: str) -> dict[str, str]:
    with psycopg.connect(url) as conn:
        create_tenant(conn, OTHER)
        keys = {
            "demo": create_key(conn, "default", ["query", "ingest"]).key,
            "reader": create_key(conn, "default", ["query"]).key,
            "other": create_key(conn, OTHER, ["query", "ingest"]).key,
        }
        revoked = create_key(conn, "default", ["query"])
        revoke_key(conn, "default", revoked.key_id)
        keys["revoked"] = revoked.key
        conn.commit()
    return keys


@contextmanager
def serving(app: FastAPI) -> Iterator[str]:
    """`app` served by uvicorn on 127.0.0.1 (an ephemeral port); yields its base URL."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the API server did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)


@contextmanager
def _served(demo: tuple[Path, dict[str, str]], keys: dict[str, str], limits: ApiLimits) -> Iterator[Api]:
    workspace, env = demo
    settings = load_settings(workspace, environ=env)
    with serving(create_app(settings, limits, pool_size=4)) as base:
        yield Api(base, keys, workspace, env)


@pytest.fixture(scope="session")
def api_keys(demo: tuple[Path, dict[str, str]]) -> dict[str, str]:
    return _keys(demo[1]["TORTUS_DATABASE_URL"])


@pytest.fixture(scope="session")
def api(demo: tuple[Path, dict[str, str]], api_keys: dict[str, str]) -> Iterator[Api]:
    with _served(demo, api_keys, ApiLimits()) as served:
        yield served


@pytest.fixture(scope="session")
def api_closed(demo: tuple[Path, dict[str, str]], api_keys: dict[str, str]) -> Iterator[Api]:
    """The same data served with production settings: introspection off."""
    with _served(demo, api_keys, ApiLimits(introspection=False)) as served:
        yield served
