"""A small OpenAI-compatible chat client for structured (JSON schema) extraction."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import partial
from typing import Any

from tortus_pg.errors import InvalidInput
from tortus_pg.jsoncheck import schema_errors
from tortus_pg.openai_http import EndpointError, InvalidOutput, OpenAIHTTP, TokenLedger

__all__ = ["ChatClient", "EndpointError", "TokenLedger"]

_SCHEMA_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_FENCE = re.compile(r"```(?:json)?\s*(.*?)\s*```", re.DOTALL)


class ChatClient:
    """Chat completions against any OpenAI-compatible endpoint (`base_url` includes `/v1`).

    Transient failures (429, 5xx, timeouts) and answers that are not valid JSON for the
    schema are retried together, up to `max_retries` times; `ledger` counts requests,
    retries and tokens, including those spent on rejected answers.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        model: str,
        timeout_s: float = 60.0,
        max_retries: int = 3,
        *,
        backoff_s: float = 0.5,
        temperature: float | None = None,
    ) -> None:
        self.model = model
        self.temperature = temperature
        self._http = OpenAIHTTP(
            base_url, api_key, timeout_s=timeout_s, max_retries=max_retries, backoff_s=backoff_s
        )
        self.ledger: TokenLedger = self._http.ledger

    def __repr__(self) -> str:
        return f"ChatClient({self._http.where!r}, model={self.model!r})"

    def __enter__(self) -> ChatClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close pooled connections."""
        self._http.close()

    def complete_json(
        self, system: str, user: str, schema: Mapping[str, Any], *, schema_name: str
    ) -> dict[str, Any]:
        """Ask for a JSON object matching `schema` (strict structured output) and return it.

        The answer is checked against the schema here too, since not every compatible
        server enforces it; raises `EndpointError` once the retries are spent.
        """
        if not _SCHEMA_NAME.fullmatch(schema_name):
            raise InvalidInput(f"schema name must match [A-Za-z0-9_-]{{1,64}}, got {schema_name!r}")
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": user},
            ],
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": schema_name, "schema": schema, "strict": True},
            },
        }
        # Some reasoning models reject any temperature, so it is sent only when chosen.
        if self.temperature is not None:
            payload["temperature"] = self.temperature
        parse = partial(_parse_answer, schema, schema_name)
        return self._http.post("chat/completions", payload, parse, retry_invalid=True)


def _parse_answer(
    schema: Mapping[str, Any], schema_name: str, body: dict[str, Any]
) -> dict[str, Any]:
    choices = body.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(choice, dict) or not isinstance(message, dict):
        raise InvalidOutput("chat response has no choices[0].message")
    if message.get("refusal"):
        raise EndpointError(f"the model refused: {str(message['refusal'])[:300]}")
    content = message.get("content")
    if not isinstance(content, str):
        raise InvalidOutput("chat answer has no text content")
    truncated = " (cut off at the token limit)" if choice.get("finish_reason") == "length" else ""
    # Servers that ignore response_format often wrap the JSON in a markdown code fence.
    fenced = _FENCE.fullmatch(content.strip())
    try:
        value = json.loads(fenced.group(1) if fenced else content)
    except json.JSONDecodeError as exc:
        raise InvalidOutput(f"answer is not valid JSON{truncated}: {exc}") from None
    if not isinstance(value, dict):
        raise InvalidOutput(f"answer is JSON but not an object: {content[:80]!r}")
    problems = schema_errors(value, schema)
    if problems:
        shown = "; ".join(problems[:5]) + ("; …" if len(problems) > 5 else "")
        raise InvalidOutput(f"answer does not match schema {schema_name}: {shown}")
    return value
