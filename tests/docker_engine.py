"""Whether the tests can use a Docker engine."""

from __future__ import annotations

import os
from pathlib import Path


def docker_engine() -> bool:
    """Whether a Docker engine answers."""
    if not (os.environ.get("DOCKER_HOST") or Path("/var/run/docker.sock").exists()):
        return False
    import docker

    try:
        client = docker.from_env()
    except docker.errors.DockerException:
        return False
    try:
        return bool(client.ping())
    except Exception:  # noqa: BLE001 - any failure means no usable engine
        return False
    finally:
        client.close()
