"""A chat client for structured output: the answer's shape is a pydantic model, sent to the
model as a strict JSON schema and checked again on arrival."""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar

import pydantic

from tortus_pg.errors import InvalidInput
from tortus_pg.openai_client import Endpoint, EndpointError, InvalidOutput, TokenLedger, json_body

__all__ = ["Answer", "ChatClient", "EndpointError", "TokenLedger", "strict_schema"]

_SCHEMA_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_FENCE = re.compile(r"```(?:json)?\s*(.*?)\s*```", re.DOTALL)


class Answer(pydantic.BaseModel):
    """Base of every structured answer: strict (no coercion), closed (no extra keys), frozen."""

    model_config = pydantic.ConfigDict(extra="forbid", strict=True, frozen=True)


M = TypeVar("M", bound=Answer)


def strict_schema(model: type[Answer]) -> dict[str, Any]:
    """The JSON schema structured-output endpoints accept in strict mode for `model`."""
    return model.model_json_schema()


class ChatClient:
    """Chat completions against any OpenAI-compatible endpoint (`base_url` includes `/v1`).

    Transient failures (429, 5xx, timeouts) are retried by the SDK, and answers that are not
    valid JSON for the model are asked again, each up to `max_retries` times; `ledger` counts
    requests, retries and tokens, including those spent on rejected answers.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        model: str,
        timeout_s: float = 60.0,
        max_retries: int = 3,
        *,
        temperature: float | None = None,
    ) -> None:
        self.model = model
        self.temperature = temperature
        self.endpoint = Endpoint(base_url, api_key, timeout_s, max_retries)
        self.ledger: TokenLedger = self.endpoint.ledger
        self._client = self.endpoint.client()

    def __repr__(self) -> str:
        return f"ChatClient({self.endpoint.where!r}, model={self.model!r})"

    def __enter__(self) -> ChatClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close pooled connections."""
        self._client.close()

    def complete_json(self, system: str, user: str, answer: type[M], *, schema_name: str) -> M:
        """Ask for a JSON object of the shape `answer` (strict structured output) and return it.

        The answer is validated here too, since not every compatible server enforces the
        schema; raises `EndpointError` (`InvalidOutput` for unusable answers) once the
        retries are spent.
        """
        if not _SCHEMA_NAME.fullmatch(schema_name):
            raise InvalidInput(f"schema name must match [A-Za-z0-9_-]{{1,64}}, got {schema_name!r}")
        request: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "response_format": {"type": "json_schema", "json_schema": {
                "name": schema_name, "schema": strict_schema(answer), "strict": True}},
        }
        # Some reasoning models reject any temperature, so it is sent only when chosen.
        if self.temperature is not None:
            request["temperature"] = self.temperature
        attempts, problem = self.endpoint.max_retries + 1, ""
        for attempt in range(attempts):
            if attempt:
                self.ledger.count_retry()
            try:
                return _parse_answer(answer, schema_name, self._ask(request))
            except InvalidOutput as exc:
                problem = f"{self.endpoint.where}: {self.endpoint.mask(str(exc))}"
        raise InvalidOutput(f"{problem} (gave up after {attempts} attempts)")

    def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        import openai

        try:
            raw = self._client.chat.completions.with_raw_response.create(
                **request, extra_headers=self.endpoint.headers)
        except openai.OpenAIError as exc:
            raise self.endpoint.error(exc) from None
        return json_body(self.endpoint, raw)


def _parse_answer(answer: type[M], schema_name: str, body: dict[str, Any]) -> M:
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
    try:
        return answer.model_validate(value)
    except pydantic.ValidationError as exc:
        raise InvalidOutput(f"answer does not match schema {schema_name}: {problems(exc)}") from None


def problems(exc: pydantic.ValidationError, shown: int = 5) -> str:
    """A validation error as 'path: problem' parts, e.g. `claims[0].text: Field required`."""
    parts = []
    for error in exc.errors()[:shown]:
        path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error["loc"])
        parts.append(f"{path.lstrip('.') or '$'}: {error['msg']}")
    return "; ".join(parts) + ("; …" if exc.error_count() > shown else "")
