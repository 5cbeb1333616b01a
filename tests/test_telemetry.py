"""Traces: spans for every ingest step and query stage, and nothing they return changes."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psycopg
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tortus_pg import migrate, telemetry
from tortus_pg.db import connect, tenant_scope
from tortus_pg.embed import HashEmbedder
from tortus_pg.engine import answer
from tortus_pg.indexing import build_index
from tortus_pg.ingest import pipeline, sources
from tortus_pg.tenants import create_tenant

EMBEDDER = HashEmbedder(dim=384)
DOCS = {
    "billing.md": "# Billing Service\n\nThe Billing Service is owned by the Ledger Team. "
                  "It retries a failed charge 4 times with a 2 second delay.\n",
    "ledger.md": "# Ledger Team\n\nThe Ledger Team is led by Ines Duarte. It keeps the books for every merchant.\n",
    "inc-7.md": "# INC-7\n\nDuring INC-7 the Billing Service double-charged 120 merchants for two hours.\n",
}
QUESTIONS = ["How many times does the Billing Service retry a failed charge?", "Who leads the Ledger Team?",
             "Who leads the team that owns the service behind INC-7?", "What colour is the office cat?"]


@pytest.fixture(scope="module")
def spans() -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return exporter


@pytest.fixture
def tenant_db(fresh_db: Callable[..., str], tmp_path: Path, spans: InMemorySpanExporter,
              ) -> Iterator[psycopg.Connection]:
    for name, text in DOCS.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    url = fresh_db()
    migrate.upgrade(url)
    spans.clear()
    with connect(url) as conn:
        create_tenant(conn, "traced")
        conn.commit()
        summary = pipeline.ingest(conn, "traced", sources.from_directory(tmp_path, ()), EMBEDDER)
        assert summary.count("ingested") == 3, summary.failed
        build_index(conn, "traced")
        conn.commit()
        with tenant_scope(conn, "traced") as scoped:
            yield scoped


def _comparable(conn: psycopg.Connection, question: str) -> dict[str, Any]:
    """What an answer says, without its timings (which differ from run to run)."""
    out = answer(conn, question, embedder=EMBEDDER, store=False).to_json()
    out["budget"] = {k: v for k, v in out["budget"].items() if k != "ms"}
    out["diagnostics"] = {k: v for k, v in out["diagnostics"].items() if k != "timings"}
    return out


def test_ingest_and_every_query_stage_leave_spans_and_the_answers_do_not_change(
    tenant_db: psycopg.Connection, spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch,
) -> None:
    ingest = [s for s in spans.get_finished_spans() if s.name.startswith("tortus.ingest.")]
    assert [s.name for s in ingest].count("tortus.ingest.source") == 3
    assert {"tortus.ingest.parse", "tortus.ingest.chunk", "tortus.ingest.extract", "tortus.ingest.embed",
            "tortus.ingest.store"} <= {s.name for s in ingest}
    source = next(s for s in ingest if s.name == "tortus.ingest.source")
    assert source.attributes is not None and source.attributes["tortus.status"] == "ingested"
    assert int(source.attributes["tortus.chunks"]) >= 1  # type: ignore[arg-type]
    spans.clear()
    traced = [_comparable(tenant_db, q) for q in QUESTIONS]
    finished = spans.get_finished_spans()
    roots = [s for s in finished if s.name == "tortus.query"]
    assert len(roots) == len(QUESTIONS)
    for root, out in zip(roots, traced, strict=True):
        attributes = dict(root.attributes or {})
        assert list(attributes["tortus.evidence_node_ids"]) == [e["node_id"] for e in out["evidence"]]  # type: ignore[call-overload]
        assert attributes["tortus.withheld"] == out["withheld"] and attributes["tortus.max_hops"] == 3
        assert attributes["tortus.tokens_used"] == out["budget"]["tokens"]["used"]
        stages = [s for s in finished if s.parent is not None and s.parent.span_id == root.context.span_id]
        assert {"tortus.query.seed", "tortus.query.walk", "tortus.query.synthesis"} <= {s.name for s in stages}
        assert all("tortus.remaining_ms" in (s.attributes or {}) for s in stages)
    monkeypatch.setattr(telemetry, "trace", None)  # as without the otel extra
    spans.clear()
    assert [_comparable(tenant_db, q) for q in QUESTIONS] == traced
    assert not spans.get_finished_spans()


def test_spans_are_exported_only_when_the_otlp_variables_ask_for_it() -> None:
    assert not telemetry.enabled_by_environment({})
    assert not telemetry.configure({"OTEL_SERVICE_NAME": "x"})
    assert telemetry.enabled_by_environment({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"})
    assert telemetry.enabled_by_environment({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"})


class _Collector(BaseHTTPRequestHandler):
    """An OTLP/HTTP receiver that keeps what is posted to it."""

    received: list[tuple[str, bytes]] = []

    def do_POST(self) -> None:  # noqa: N802 (the handler's API)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        _Collector.received.append((self.path, body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def test_configured_spans_and_requests_reach_an_otlp_collector_over_http() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    code = ("from fastapi import FastAPI\n"
            "from fastapi.testclient import TestClient\n"
            "from tortus_pg import telemetry\n"
            "assert telemetry.configure()\n"
            "with telemetry.span('tortus.query.seed', remaining_ms=2900):\n"
            "    pass\n"
            "app = FastAPI()\n"
            "app.get('/ping')(lambda: {})\n"
            "telemetry.instrument_server(app)\n"
            "assert TestClient(app).get('/ping').status_code == 200\n")
    env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{server.server_port}",
           "OTEL_SERVICE_NAME": "tortus-test"}
    try:
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    finally:
        server.shutdown()
        server.server_close()
    assert done.returncode == 0, done.stderr
    [(path, body)] = _Collector.received  # flushed once, when the process ended
    assert path == "/v1/traces" and b"tortus.query.seed" in body and b"tortus-test" in body
    assert b"tortus.remaining_ms" in body and b"GET /ping" in body  # the request's span, from FastAPI
