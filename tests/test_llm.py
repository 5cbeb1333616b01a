"""The chat client: strict JSON schema requests, retries, validation and token counting."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from openai_server import USAGE, FakeOpenAI, openai_server

from tortus_pg.errors import InvalidInput
from tortus_pg.jsoncheck import schema_errors
from tortus_pg.llm import ChatClient, EndpointError, TokenLedger
from tortus_pg.openai_http import InvalidOutput

KEY = "sk-chat-test-key"
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "concepts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "label": {"type": "string", "minLength": 1},
                    "kind": {"enum": ["entity", "claim", "event"]},
                    "confidence": {"type": "number", "minimum": 0, "maximum": 1},
                },
                "required": ["label", "kind", "confidence"],
                "additionalProperties": False,
            },
        },
        "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    },
    "required": ["concepts", "note"],
    "additionalProperties": False,
}
GOOD = {"concepts": [{"label": "pgvector", "kind": "entity", "confidence": 0.9}], "note": None}


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with openai_server(contents=[json.dumps(GOOD)]) as state:
        yield state


@pytest.fixture
def chat(server: FakeOpenAI) -> Iterator[ChatClient]:
    with ChatClient(server.base_url, KEY, "test-chat", max_retries=2, backoff_s=0.0) as client:
        yield client


def ask(chat: ChatClient) -> dict[str, Any]:
    return chat.complete_json("Extract concepts.", "pgvector adds vectors.", SCHEMA,
                              schema_name="concepts")


def test_complete_json_sends_a_strict_json_schema_request(
    server: FakeOpenAI, chat: ChatClient
) -> None:
    assert ask(chat) == GOOD
    (request,) = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.body == {
        "model": "test-chat",
        "messages": [
            {"role": "system", "content": "Extract concepts."},
            {"role": "user", "content": "pgvector adds vectors."},
        ],
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "concepts", "schema": SCHEMA, "strict": True},
        },
    }


def test_complete_json_sends_temperature_only_when_chosen(server: FakeOpenAI) -> None:
    with ChatClient(server.base_url, None, "m", temperature=0.0) as client:
        ask(client)
    assert server.requests[0].body["temperature"] == 0.0
    assert "authorization" not in server.requests[0].headers


def test_complete_json_retries_invalid_json(server: FakeOpenAI, chat: ChatClient) -> None:
    server.contents = ['{"concepts": [', json.dumps(GOOD)]
    assert ask(chat) == GOOD
    assert len(server.requests) == 2


def test_complete_json_accepts_json_in_a_code_fence(server: FakeOpenAI, chat: ChatClient) -> None:
    server.contents = ["```json\n" + json.dumps(GOOD) + "\n```"]
    assert ask(chat) == GOOD
    assert len(server.requests) == 1


def test_ledger_counts_tokens_of_every_answer_including_rejected(
    server: FakeOpenAI, chat: ChatClient
) -> None:
    server.contents = ["not json", json.dumps(GOOD)]
    ask(chat)
    server.fail(429)
    ask(chat)
    ledger = chat.ledger
    assert (ledger.requests, ledger.retries) == (4, 2)
    assert ledger.prompt_tokens == 3 * USAGE["prompt_tokens"]
    assert ledger.completion_tokens == 3 * USAGE["completion_tokens"]
    assert ledger.total_tokens == 3 * USAGE["total_tokens"]


def test_complete_json_rejects_answers_that_break_the_schema(
    server: FakeOpenAI, chat: ChatClient
) -> None:
    server.contents = ['{"concepts": [{"label": "x", "kind": "idea", "confidence": 2}]}']
    with pytest.raises(EndpointError) as caught:
        ask(chat)
    message = str(caught.value)
    assert "does not match schema concepts" in message
    assert "missing required key 'note'" in message
    assert "gave up after 3 attempts" in message
    assert len(server.requests) == 3


def test_complete_json_gives_up_on_persistent_invalid_json(
    server: FakeOpenAI, chat: ChatClient
) -> None:
    server.contents = ["Sure! Here is the JSON you asked for"]
    with pytest.raises(InvalidOutput, match="not valid JSON.*gave up after 3 attempts"):
        ask(chat)


def test_complete_json_retries_server_errors_then_gives_up(
    server: FakeOpenAI, chat: ChatClient
) -> None:
    server.fail(500, 502)
    assert ask(chat) == GOOD
    server.fail(503, 503, 503)
    with pytest.raises(EndpointError, match="HTTP 503.*gave up after 3 attempts"):
        ask(chat)


def test_complete_json_does_not_retry_client_errors(server: FakeOpenAI, chat: ChatClient) -> None:
    server.fail(400)
    with pytest.raises(EndpointError, match="HTTP 400.*scripted 400"):
        ask(chat)
    assert len(server.requests) == 1


def test_complete_json_checks_the_schema_name(chat: ChatClient) -> None:
    with pytest.raises(InvalidInput, match="schema name"):
        chat.complete_json("s", "u", SCHEMA, schema_name="has spaces")


def test_token_ledger_ignores_missing_usage() -> None:
    ledger = TokenLedger()
    ledger.add(None)
    ledger.add({"prompt_tokens": 5})
    ledger.add({"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3})
    assert (ledger.prompt_tokens, ledger.completion_tokens, ledger.requests) == (6, 2, 0)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (GOOD, None),
        ({**GOOD, "extra": 1}, "$: unexpected key 'extra'"),
        ({**GOOD, "note": 3}, "$.note: matches none of the anyOf choices"),
        ({"concepts": "x", "note": None}, "$.concepts: expected array, got str"),
        ({"concepts": [{"label": "", "kind": "entity", "confidence": 1}], "note": "n"},
         "$.concepts[0].label: 0 characters is below the minLength of 1"),
        ({"concepts": [{"label": "a", "kind": "entity", "confidence": True}], "note": None},
         "$.concepts[0].confidence: expected number, got bool"),
    ],
)
def test_schema_errors_name_the_path_of_each_problem(value: Any, problem: str | None) -> None:
    errors = schema_errors(value, SCHEMA)
    if problem is None:
        assert errors == []
    else:
        assert any(e.startswith(problem) for e in errors), errors


def test_schema_errors_follow_local_refs() -> None:
    schema = {"$defs": {"n": {"type": "integer"}}, "type": "array", "items": {"$ref": "#/$defs/n"}}
    assert schema_errors([1, 2], schema) == []
    assert schema_errors([1, 2.5], schema) == ["$[1]: expected integer, got float"]
