"""HTTP plumbing shared by the OpenAI-compatible clients: auth, retries, error translation."""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import httpx

from tortus_pg.errors import ConfigError, TortusError

log = logging.getLogger(__name__)

T = TypeVar("T")
RETRY_STATUSES = frozenset({408, 409, 429})


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

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def backoff_delay(
    attempt: int, base_s: float, cap_s: float, retry_after_s: float | None
) -> float:
    """Seconds to wait before retry number `attempt` (1-based): what the server asked for
    if it said, else exponential with full jitter; never more than `cap_s`."""
    if retry_after_s is not None:
        return min(max(retry_after_s, 0.0), cap_s)
    return min(cap_s, base_s * 2.0 ** (attempt - 1)) * random.uniform(0.5, 1.0)


def _retry_after(headers: httpx.Headers) -> float | None:
    try:
        if "retry-after-ms" in headers:
            return float(headers["retry-after-ms"]) / 1000
        if "retry-after" in headers:
            return float(headers["retry-after"])
    except ValueError:
        pass  # an HTTP date: fall back to our own schedule
    return None


def _safe_url(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


class OpenAIHTTP:
    """POSTs JSON to one OpenAI-compatible base URL (for example `http://localhost:11434/v1`).

    Retries 408/409/429/5xx, timeouts and connection failures with exponential backoff;
    other HTTP errors raise `EndpointError` at once. The API key only ever goes into the
    Authorization header: it is masked in every message this class produces.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        timeout_s: float = 60.0,
        max_retries: int = 3,
        backoff_s: float = 0.5,
        max_backoff_s: float = 20.0,
        ledger: TokenLedger | None = None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"base url must start with http:// or https://, got {base_url!r}")
        if max_retries < 0:
            raise ConfigError(f"max_retries must be >= 0, got {max_retries}")
        self.base_url = base_url.rstrip("/")
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.ledger = ledger if ledger is not None else TokenLedger()
        self._secret = api_key or None
        headers = {"Accept": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        # Connecting should fail fast; reading may legitimately take the whole budget.
        timeout = httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0))
        self._client = httpx.Client(headers=headers, timeout=timeout, follow_redirects=False)

    def __repr__(self) -> str:
        return f"OpenAIHTTP({self.where!r})"

    @property
    def where(self) -> str:
        """The base URL without credentials or query, for messages."""
        return _safe_url(self.base_url)

    def close(self) -> None:
        """Close pooled connections."""
        self._client.close()

    def _mask(self, text: str) -> str:
        return text.replace(self._secret, "***") if self._secret else text

    def post(
        self,
        path: str,
        payload: Mapping[str, Any],
        parse: Callable[[dict[str, Any]], T],
        *,
        retry_invalid: bool = False,
    ) -> T:
        """POST `payload` to `base_url + path` and return `parse(body)`.

        `parse` raises `InvalidOutput` on a body it cannot use; that is retried only when
        `retry_invalid` (model output can differ on the next try, a server bug does not).
        Token usage in each answered body is added to the ledger, including bodies that
        are then rejected, since they were paid for.
        """
        url = f"{self.base_url}/{path.lstrip('/')}"
        where = _safe_url(url)  # no user:password@ or ?key= in messages
        attempts = self.max_retries + 1
        problem, failure = "", EndpointError
        for attempt in range(attempts):
            self.ledger.count_request(retry=attempt > 0)
            retry_after: float | None = None
            failure = EndpointError
            try:
                response = self._client.post(url, json=payload)
            except httpx.TimeoutException:
                problem = f"{where} timed out"
            except httpx.TransportError as exc:
                problem = f"cannot reach {where} ({type(exc).__name__}: {self._mask(str(exc))})"
            else:
                if response.status_code in RETRY_STATUSES or response.status_code >= 500:
                    retry_after = _retry_after(response.headers)
                    problem = f"{where} answered {self._describe(response)}"
                elif not response.is_success:
                    raise EndpointError(f"{where} answered {self._describe(response)}")
                else:
                    body = self._json_body(response, where)
                    self.ledger.add(body.get("usage"))
                    try:
                        return parse(body)
                    except InvalidOutput as exc:
                        if not retry_invalid:
                            raise InvalidOutput(f"{where}: {self._mask(str(exc))}") from None
                        problem, failure = f"{where}: {self._mask(str(exc))}", InvalidOutput
            if attempt + 1 < attempts:
                delay = backoff_delay(attempt + 1, self.backoff_s, self.max_backoff_s, retry_after)
                log.info("%s; retry %d of %d in %.1fs", problem, attempt + 1, attempts - 1, delay)
                time.sleep(delay)
        raise failure(f"{problem} (gave up after {attempts} attempts)")

    def _describe(self, response: httpx.Response) -> str:
        detail = response.text.strip()
        try:
            err = response.json().get("error")
            detail = err.get("message", detail) if isinstance(err, dict) else str(err or detail)
        except (ValueError, AttributeError):
            pass
        hint = " (check the API key)" if response.status_code in (401, 403) else ""
        reason = response.reason_phrase or "error"
        text = f"HTTP {response.status_code} {reason}{hint}"
        return f"{text}: {self._mask(detail)[:300]}" if detail else text

    def _json_body(self, response: httpx.Response, where: str) -> dict[str, Any]:
        try:
            body = response.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise EndpointError(f"{where} answered with a body that is not JSON") from None
        if not isinstance(body, dict):
            raise EndpointError(f"{where} answered with JSON that is not an object")
        return body
