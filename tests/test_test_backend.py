"""The suite's PostgreSQL: the project's own image under TORTUS_TEST_BACKEND=docker."""

from __future__ import annotations

import os
from typing import Any

import psycopg
import pytest
from docker_engine import docker_engine


@pytest.mark.skipif(os.environ.get("TORTUS_TEST_BACKEND") != "docker",
                    reason="TORTUS_TEST_BACKEND is not docker: the suite runs on the embedded server")
def test_the_docker_backend_runs_the_projects_image(pg_server: Any) -> None:
    if not docker_engine():
        pytest.skip("TORTUS_TEST_BACKEND=docker, but no Docker engine answers: the suite ran on the embedded server")
    with psycopg.connect(pg_server.admin_url("tortus")) as conn:
        extensions = {r[0] for r in conn.execute("select extname from pg_extension")}
        preload = conn.execute("show shared_preload_libraries").fetchone()
    assert {"vector", "age"} <= extensions, "the image's init scripts install pgvector and AGE"
    assert preload is not None and "age" in preload[0]
