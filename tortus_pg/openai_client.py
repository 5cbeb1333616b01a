"""The OpenAI SDK set up for any OpenAI-compatible endpoint (OpenAI, Azure, Ollama, vLLM).

The SDK sends, retries (408/409/429/5xx, timeouts, lost connections; `Retry-After` honoured)
and backs off. This module adds what the project needs around it: a token ledger that
counts every attempt, an API key that never appears in a message, and the SDK's errors
turned into `EndpointError` with the endpoint named and what to do.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from tortus_pg.errors import ConfigError, TortusError

if TYPE_CHECKING:  # the SDK takes a second to import; only clients that are used load it
    import httpx2
    import openai

RETRY_STATUSES = frozenset({408, 409, 429})
_RETRY_HEADER = "x-stainless-retry-count"  # the SDK numbers each attempt of one call


class EndpointError(TortusError):
    """An OpenAI-compatible endpoint failed, refused the request or answered unusably."""


class InvalidOutput(EndpointError):
    """The endpoint answered, but the content is not what was asked for."""


# One lock for every ledger keeps TokenLedger a plain dataclass (asdict, copy, pickle work).
_LEDGER_LOCK = threading.Lock()


@dataclass
class TokenLedger:
    """Running totals of what a client has spent; safe to share between threads."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    requests: int = 0
    retries: int = 0

    def add(self, usage: Mapping[str, Any] | None) -> None:
        """Add an OpenAI `usage` object; servers that omit it (or parts of it) add nothing."""
        if not isinstance(usage, Mapping):
            return
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
        with _LEDGER_LOCK:
            if isinstance(prompt, int):
                self.prompt_tokens += prompt
            if isinstance(completion, int):
                self.completion_tokens += completion

    def count_request(self, *, retry: bool) -> None:
        """Count one HTTP attempt (a retry when it is not the first for its call)."""
        with _LEDGER_LOCK:
            self.requests += 1
            self.retries += int(retry)

    def count_retry(self) -> None:
        """Count a call made again because its answer was unusable (its request counts apart)."""
        with _LEDGER_LOCK:
            self.retries += 1

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def _safe_url(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


@dataclass(frozen=True)
class Endpoint:
    """Where and how to call one OpenAI-compatible API (`base_url` includes `/v1`)."""

    base_url: str
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = 60.0
    max_retries: int = 3
    ledger: TokenLedger = field(default_factory=TokenLedger, compare=False)

    def __post_init__(self) -> None:
        if not self.base_url.startswith(("http://", "https://")):
            raise ConfigError(f"base url must start with http:// or https://, got {self.base_url!r}")
        if self.max_retries < 0:
            raise ConfigError(f"max_retries must be >= 0, got {self.max_retries}")
        if self.timeout_s <= 0:
            raise ConfigError(f"timeout must be positive, got {self.timeout_s}")

    @property
    def where(self) -> str:
        """The base URL without credentials or query, for messages."""
        return _safe_url(self.base_url)

    @property
    def headers(self) -> dict[str, Any]:
        """Per-request headers: with no key, a local server gets no Authorization at all."""
        import openai

        return {} if self.api_key else {"Authorization": openai.omit}

    def client(self) -> openai.OpenAI:
        """A blocking SDK client whose every attempt is counted in the ledger."""
        import openai

        def count(request: httpx2.Request) -> None:
            self.ledger.count_request(retry=request.headers.get(_RETRY_HEADER, "0") != "0")

        http = openai.DefaultHttpxClient(event_hooks={"request": [count]}, follow_redirects=False)
        return openai.OpenAI(**self._options(), http_client=http)

    def async_client(self) -> openai.AsyncOpenAI:
        """An asyncio SDK client whose every attempt is counted in the ledger."""
        import openai

        async def count(request: httpx2.Request) -> None:
            self.ledger.count_request(retry=request.headers.get(_RETRY_HEADER, "0") != "0")

        http = openai.DefaultAsyncHttpxClient(event_hooks={"request": [count]}, follow_redirects=False)
        return openai.AsyncOpenAI(**self._options(), http_client=http)

    def _options(self) -> dict[str, Any]:
        import openai

        # Connecting should fail fast; reading may legitimately take the whole budget. The
        # placeholder key only satisfies the SDK: `headers` leaves it out of every request.
        timeout = openai.Timeout(self.timeout_s, connect=min(self.timeout_s, 10.0))
        return {"base_url": self.base_url, "api_key": self.api_key or "no-key",
                "max_retries": self.max_retries, "timeout": timeout}

    def mask(self, text: str) -> str:
        return text.replace(self.api_key, "***") if self.api_key else text

    def error(self, exc: Exception) -> EndpointError:
        """The SDK's exception as an EndpointError naming the endpoint, never the key."""
        import openai

        retried = f" (gave up after {self.max_retries + 1} attempts)"
        if isinstance(exc, openai.APITimeoutError):
            return EndpointError(f"{self.where} timed out{retried}")
        if isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__ or exc
            detail = self.mask(f"{type(cause).__name__}: {cause}")
            return EndpointError(f"cannot reach {self.where} ({detail}){retried}")
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            again = retried if status in RETRY_STATUSES or status >= 500 else ""
            return EndpointError(f"{self.where} answered {self._describe(exc)}{again}")
        return EndpointError(f"{self.where}: {self.mask(str(exc))}")

    def _describe(self, exc: openai.APIStatusError) -> str:
        body = exc.body
        detail = body.get("message") if isinstance(body, dict) else None
        detail = str(detail or body or exc.response.text).strip()
        hint = " (check the API key)" if exc.status_code in (401, 403) else ""
        text = f"HTTP {exc.status_code} {exc.response.reason_phrase or 'error'}{hint}"
        return f"{text}: {self.mask(detail)[:300]}" if detail else text


def json_body(endpoint: Endpoint, raw: Any) -> dict[str, Any]:
    """The JSON object an SDK raw response carries, with its usage added to the ledger."""
    try:
        body = raw.http_response.json()
    except ValueError:
        raise EndpointError(f"{endpoint.where} answered with a body that is not JSON") from None
    if not isinstance(body, dict):
        raise EndpointError(f"{endpoint.where} answered with JSON that is not an object")
    endpoint.ledger.add(body.get("usage"))
    return body
