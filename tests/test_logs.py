"""Logging: readable lines for the CLI, JSON lines under `serve`, levels from the flags."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from openai_server import openai_server
from ports import free_port
from tortus_pg.cli.main import app
from typer.testing import CliRunner

from tortus_pg import __version__, logs
from tortus_pg.errors import InvalidInput
from tortus_pg.openai_embed import OpenAIEmbedder

log = logging.getLogger("tortus_pg.test")


def test_json_lines_carry_time_level_logger_message_and_the_records_extras(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure("info", logs.LogFormat.JSON)
    log.debug("not at info")
    log.info("tenant %s busy", "t1", extra={"attempt": 2})
    try:
        raise ValueError("boom")
    except ValueError:
        log.warning("failed", exc_info=True)
    lines = capsys.readouterr().err.strip().splitlines()
    events = [json.loads(line) for line in lines]
    assert [e["message"] for e in events] == ["tenant t1 busy", "failed"]
    assert events[0]["level"] == "info" and events[0]["logger"] == "tortus_pg.test" and events[0]["attempt"] == 2
    assert events[0]["time"].endswith("+00:00") and "ValueError: boom" in events[1]["exception"]


def test_configuring_again_replaces_the_handler_and_text_goes_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure("warning", logs.LogFormat.JSON)
    logs.configure("warning", logs.LogFormat.TEXT)
    log.info("below the level")
    log.warning("disk nearly full")
    out = capsys.readouterr()
    assert "disk nearly full" in out.err and "below the level" not in out.err and not out.out
    assert not out.err.lstrip().startswith("{")  # one handler: no JSON copy of the line
    with pytest.raises(InvalidInput, match="unknown log level 'loud': use one of debug, info, warning, error"):
        logs.configure("loud")


def test_retries_of_an_openai_compatible_endpoint_are_logged_at_info(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure("info", logs.LogFormat.JSON)
    with openai_server() as server, OpenAIEmbedder(server.base_url, None, "m", max_retries=1) as embedder:
        server.fail(503)
        embedder.embed(["retried once"])
    events = [json.loads(line) for line in capsys.readouterr().err.strip().splitlines()]
    retries = [e for e in events if e["logger"].startswith("openai") and "retry 1 of 1" in e["message"]]
    assert len(retries) == 1 and retries[0]["level"] == "info"


def test_the_cli_takes_its_level_from_the_flags_and_prints_its_version() -> None:
    runner = CliRunner()
    shown = runner.invoke(app, ["--version"])
    assert shown.exit_code == 0 and shown.output.strip() == f"tortus-pg {__version__}"
    for flags, level in ((["-v"], logging.INFO), (["-vv"], logging.DEBUG), (["--log-level", "error"], logging.ERROR)):
        result = runner.invoke(app, [*flags, "query", "--help"])
        assert result.exit_code == 0, result.output
        assert logging.getLogger("tortus_pg").level == level
    bad = runner.invoke(app, ["--log-level", "loud", "query", "--help"])
    assert bad.exit_code != 0 and "unknown log level 'loud'" in bad.output



def test_serve_logs_json_lines_its_requests_included(db_url: str, tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "TORTUS_DATABASE_URL": db_url, "TORTUS_EMBEDDER": "hash", "TORTUS_HOME": str(tmp_path)}
    server = subprocess.Popen([sys.executable, "-m", "tortus_pg.cli.main", "serve", "--port", str(port)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as reply:
                    assert reply.status == 200
                    break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, server.stderr and server.stderr.read()
                time.sleep(0.2)
    finally:
        server.terminate()
        _, err = server.communicate(timeout=30)
    events = [json.loads(line) for line in err.splitlines() if line.strip()]
    assert events and all({"time", "level", "logger", "message"} <= e.keys() for e in events)
    assert not any("color_message" in e for e in events)  # uvicorn's terminal colours stay out
    assert any(e["logger"] == "uvicorn.access" and "/healthz" in e["message"] for e in events)
