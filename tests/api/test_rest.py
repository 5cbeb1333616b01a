"""REST over a real socket: the CLI's answers, keys and scopes, tenants kept apart, bad input
refused with a clear 4xx."""

from __future__ import annotations

import json
import socket

from tortus_pg.cli.main import app as cli
from typer.testing import CliRunner

from .conftest import Api

QUESTION = "INC-2025-014 was triggered by an expired certificate on some system. Which team runs that system?"


def _cli_answer(api: Api, question: str) -> dict:
    result = CliRunner().invoke(cli, ["--workspace", str(api.workspace), "query", question, "--json"], env=api.env)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_health_and_readiness(api: Api) -> None:
    with api.client(None) as http:
        assert http.get("/healthz").json() == {"status": "ok"}
        ready = http.get("/readyz")
        assert ready.status_code == 200 and ready.json()["status"] == "ready"
        assert "/api/query" in http.get("/openapi.json").json()["paths"]


def test_rest_gives_the_clis_answer_path_and_evidence(api: Api) -> None:
    with api.client() as http:
        response = http.post("/api/query", json={"question": QUESTION})
    assert response.status_code == 200, response.text
    assert response.headers["X-Request-ID"]
    over_http, from_cli = response.json(), _cli_answer(api, QUESTION)
    assert over_http["answer"] and not over_http["withheld"]
    for field in ("answer", "short_answer", "withheld", "path", "evidence", "claims"):
        assert over_http[field] == from_cli[field], field


def test_policy_fields_shape_the_answer_and_clamping_is_reported(api: Api) -> None:
    with api.client() as http:
        one_hop = http.post("/api/query", json={"question": QUESTION, "max_hops": 1}).json()
        clamped = http.post("/api/query", json={"question": QUESTION, "max_hops": 99}).json()
    assert one_hop["budget"]["hops"]["limit"] == 1
    assert all(hop.get("hop", 1) <= 1 for hop in one_hop["path"])
    assert any("max_hops" in w for w in clamped["warnings"])


def test_trace_of_an_answer_is_fetched_by_its_id(api: Api) -> None:
    with api.client() as http:
        trace_id = http.post("/api/query", json={"question": QUESTION}).json()["trace_id"]
        trace = http.get(f"/api/traces/{trace_id}")
    assert trace.status_code == 200 and trace.json()["query"] == QUESTION
    assert "tenant_id" not in trace.json()


def test_search_returns_ranked_chunks(api: Api) -> None:
    with api.client("reader") as http:
        hits = http.post("/api/search", json={"query": "E-1042", "mode": "keyword", "k": 3}).json()
    assert 1 <= len(hits) <= 3 and "E-1042" in hits[0]["text"]
    assert [h["rank"] for h in hits] == sorted(h["rank"] for h in hits)


def test_keys_and_scopes(api: Api) -> None:
    with api.client(None) as http:
        missing = http.post("/api/query", json={"question": QUESTION})
    with api.client("revoked") as http:
        revoked = http.post("/api/query", json={"question": QUESTION})
    with api.client("reader") as http:
        no_scope = http.post("/api/sources", json={"text": "# Note\n\nA note.", "name": "note.md"})
    assert missing.status_code == 401 and "Bearer" in missing.json()["error"]["message"]
    assert revoked.status_code == 401 and "revoked" in revoked.json()["error"]["message"]
    assert no_scope.status_code == 403 and "'ingest'" in no_scope.json()["error"]["message"]


def test_another_tenants_key_sees_nothing_of_the_demo(api: Api) -> None:
    with api.client() as http:
        demo_trace = http.post("/api/query", json={"question": QUESTION}).json()["trace_id"]
        demo_sources = http.get("/api/sources").json()
    assert demo_sources
    with api.client("other") as http:
        answer = http.post("/api/query", json={"question": QUESTION}).json()
        hits = http.post("/api/search", json={"query": "E-1042 certificate", "mode": "hybrid"}).json()
        sources = http.get("/api/sources").json()
        trace, never = http.get(f"/api/traces/{demo_trace}"), http.get("/api/traces/999999999")
        removed = http.delete(f"/api/sources/{demo_sources[0]['source_id']}")
        absent = http.delete("/api/sources/999999999")
    assert answer["withheld"] and answer["evidence"] == [] and answer["path"] == []
    assert hits == []
    assert all(s["uri"] not in {d["uri"] for d in demo_sources} for s in sources)
    # An id of another tenant answers exactly as an id that never existed.
    assert trace.status_code == never.status_code == 404
    assert removed.status_code == absent.status_code == 404
    assert removed.json()["error"]["code"] == absent.json()["error"]["code"]
    with api.client() as http:
        assert len(http.get("/api/sources").json()) == len(demo_sources)


def test_a_text_and_an_upload_are_ingested_searched_and_removed(api: Api) -> None:
    note = "# Harbour Crane\n\nThe Harbour Crane lifts containers of the quarantine line. It is owned by Dock Ops."
    with api.client("other") as http:
        added = http.post("/api/sources", json={"text": note, "name": "crane.md", "subgraphs": ["docks"]})
        uploaded = http.post("/api/sources", files={"file": ("gate.txt", b"The north gate opens at 05:40 daily.")})
        found = http.post("/api/search", json={"query": "quarantine containers", "mode": "keyword"}).json()
        listed = {s["uri"]: s for s in http.get("/api/sources").json()}
        removed = http.delete(f"/api/sources/{listed['upload/crane.md']['source_id']}")
        after = {s["uri"] for s in http.get("/api/sources").json()}
        http.delete(f"/api/sources/{listed['upload/gate.txt']['source_id']}")
    assert added.status_code == 200 and added.json()["status"] == "ingested", added.text
    assert uploaded.status_code == 200 and uploaded.json()["uri"] == "upload/gate.txt"
    assert found and "quarantine" in found[0]["text"]
    assert listed["upload/crane.md"]["subgraphs"] == ["docks"]
    assert removed.status_code == 200 and "upload/crane.md" not in after and "upload/gate.txt" in after


def _error(response) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    return response.status_code, response.json()["error"]["message"]


def test_bad_input_gets_a_4xx_naming_the_problem(api: Api) -> None:
    with api.client() as http:
        malformed = _error(http.post("/api/query", content=b"{not json", headers={"Content-Type": "application/json"}))
        unknown = _error(http.post("/api/query", json={"question": QUESTION, "max_hopz": 2}))
        empty = _error(http.post("/api/query", json={"question": ""}))
        too_many = _error(http.post("/api/query", json={"question": QUESTION, "k": 5000}))
        bad_policy = _error(http.post("/api/query", json={"question": QUESTION, "max_hops": 0}))
        huge = _error(http.post("/api/query", content=b" " * 2_000_000, headers={"Content-Type": "application/json"}))
        both = _error(http.post("/api/sources", json={"url": "https://example.com/", "text": "x"}))
        bad_name = _error(http.post("/api/sources", json={"text": "x", "name": "../../etc/passwd"}))
        not_a_url = _error(http.post("/api/sources", json={"url": "file:///etc/passwd"}))
        no_group = _error(http.post("/api/query", json={"question": QUESTION, "semantic_group": "no-such-group"}))
    assert malformed[0] == 422 and "JSON" in malformed[1]
    assert unknown[0] == 422 and "max_hopz" in unknown[1]
    assert empty[0] == 422 and "question" in empty[1]
    assert too_many[0] == 422 and "k" in too_many[1]
    assert bad_policy[0] == 400 and "max_hops" in bad_policy[1]
    assert huge[0] == 413 and "limit" in huge[1]
    assert both[0] == 422 and "exactly one" in both[1]
    assert bad_name[0] == 422 and "name" in bad_name[1]
    assert not_a_url[0] == 422 and "http" in not_a_url[1]
    assert no_group[0] == 400 and "no subgraph 'no-such-group'" in no_group[1] and "incidents" in no_group[1]


def test_a_body_of_unstated_length_is_refused_before_it_is_read(api: Api) -> None:
    host, port = api.base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"POST /api/query HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Transfer-Encoding: chunked\r\nAuthorization: Bearer " + api.keys["demo"].encode() +
                     b"\r\n\r\n5\r\n{\"a\":\r\n")
        reply = b""
        while not reply.endswith(b"}") and (part := sock.recv(4096)):
            reply += part
    assert reply.startswith(b"HTTP/1.1 411") and b"Content-Length header" in reply
