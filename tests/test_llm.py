"""The chat client: strict JSON schema requests, retries, validation and token counting."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Literal

import pytest
from openai_server import USAGE, FakeOpenAI, openai_server
from pydantic import Field

from tortus_pg.errors import InvalidInput
from tortus_pg.llm import Answer, ChatClient, EndpointError, TokenLedger, strict_schema
from tortus_pg.openai_client import InvalidOutput

KEY = "sk-chat-test-key"


class Concept(Answer):
    label: str = Field(min_length=1)
    kind: Literal["entity", "claim", "event"]
    confidence: float = Field(ge=0, le=1)


class Concepts(Answer):
    concepts: list[Concept]
    note: str | None


GOOD = {"concepts": [{"label": "pgvector", "kind": "entity", "confidence": 0.9}], "note": None}


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with openai_server(contents=[json.dumps(GOOD)]) as state:
        yield state


@pytest.fixture
def chat(server: FakeOpenAI) -> Iterator[ChatClient]:
    with ChatClient(server.base_url, KEY, "test-chat", max_retries=2) as client:
        yield client


def ask(chat: ChatClient) -> dict[str, Any]:
    answer = chat.complete_json("Extract concepts.", "pgvector adds vectors.", Concepts,
                                schema_name="concepts")
    return answer.model_dump()


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
            "json_schema": {"name": "concepts", "schema": strict_schema(Concepts), "strict": True},
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
    assert "concepts[0].kind: Input should be 'entity', 'claim' or 'event'" in message
    assert "note: Field required" in message
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
        chat.complete_json("s", "u", Concepts, schema_name="has spaces")


def test_token_ledger_ignores_missing_usage() -> None:
    ledger = TokenLedger()
    ledger.add(None)
    ledger.add({"prompt_tokens": 5})
    ledger.add({"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3})
    assert (ledger.prompt_tokens, ledger.completion_tokens, ledger.requests) == (6, 2, 0)


def test_strict_schema_closes_every_object_and_requires_every_field() -> None:
    schema = strict_schema(Concepts)
    item = schema["$defs"]["Concept"]
    for obj in (schema, item):
        assert obj["additionalProperties"] is False and obj["required"] == list(obj["properties"])
    assert item["properties"]["kind"]["enum"] == ["entity", "claim", "event"]
    assert schema["properties"]["concepts"]["items"] == {"$ref": "#/$defs/Concept"}


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ({**GOOD, "extra": 1}, "extra: Extra inputs are not permitted"),
        ({**GOOD, "note": 3}, "note: Input should be a valid string"),
        ({"concepts": "x", "note": None}, "concepts: Input should be a valid list"),
        ({"concepts": [{"label": "", "kind": "entity", "confidence": 1}], "note": "n"},
         "concepts[0].label: String should have at least 1 character"),
        ({"concepts": [{"label": "a", "kind": "entity", "confidence": True}], "note": None},
         "concepts[0].confidence: Input should be a valid number"),
        ({"concepts": [{"label": "a", "kind": "entity", "confidence": "0.5"}], "note": None},
         "concepts[0].confidence: Input should be a valid number"),
    ],
)
def test_answers_breaking_the_model_name_the_path_of_each_problem(
    server: FakeOpenAI, chat: ChatClient, value: Any, problem: str
) -> None:
    server.contents = [json.dumps(value)]
    with pytest.raises(InvalidOutput) as caught:
        ask(chat)
    assert problem in str(caught.value)
