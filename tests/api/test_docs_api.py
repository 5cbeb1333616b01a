"""Every example in docs/api.md runs against a served demo and gets a successful JSON answer."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from .conftest import Api

DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"
TEXT = DOC.read_text(encoding="utf-8")
SHELL = re.findall(r"```bash\n(.*?)```", TEXT, flags=re.S)
GRAPHQL = re.findall(r"```graphql\n(.*?)```", TEXT, flags=re.S)


def _last_json(output: str) -> object:
    """The JSON a block printed last (curl prints one document per call)."""
    lines = [line for line in output.strip().splitlines() if line.strip()]
    return json.loads(lines[-1])


def test_the_page_has_examples() -> None:
    assert len(SHELL) >= 7 and len(GRAPHQL) >= 3


@pytest.mark.parametrize("block", SHELL, ids=[b.split("\n")[0][:60] for b in SHELL])
def test_every_shell_example_answers(api: Api, block: str, tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "TORTUS_URL": api.base, "TORTUS_KEY": api.keys["demo"]}
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    answer = _last_json(done.stdout)
    assert not (isinstance(answer, dict) and "error" in answer), answer
    with api.client() as http:  # the examples that add sources leave the demo as it was
        for source in http.get("/api/sources").json():
            if source["uri"].startswith("upload/"):
                assert http.delete(f"/api/sources/{source['source_id']}").status_code == 200


@pytest.mark.parametrize("query", GRAPHQL, ids=[q.split("{")[1].split("(")[0].strip()[:40] for q in GRAPHQL])
def test_every_graphql_example_answers(api: Api, query: str) -> None:
    with api.client() as http:
        reply = http.post("/graphql", json={"query": query}).json()
        assert "errors" not in reply and all(v is not None for v in reply["data"].values()), reply
        for source in http.get("/api/sources").json():
            if source["uri"].startswith("upload/"):
                assert http.delete(f"/api/sources/{source['source_id']}").status_code == 200
