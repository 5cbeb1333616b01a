"""Embeddings from any OpenAI-compatible `/embeddings` endpoint, several requests in flight.

The requests run on the SDK's asyncio client, on an event loop of the embedder's own thread,
so `embed` can be called from blocking code and from inside another running loop (the API's)
alike; a semaphore bounds how many are in flight.
"""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Coroutine, Sequence
from concurrent.futures import Future, as_completed
from typing import TYPE_CHECKING, Any, TypeVar

from tortus_pg import progress
from tortus_pg.embed import OPENAI_BASE_URL, OPENAI_MODEL, unit
from tortus_pg.errors import ConfigError
from tortus_pg.openai_client import Endpoint, InvalidOutput, json_body

if TYPE_CHECKING:
    import openai

T = TypeVar("T")
_DIMS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072, "text-embedding-ada-002": 1536}


class _LoopThread:
    """An asyncio event loop running on a daemon thread, started on first use."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        with self._lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(target=self._loop.run_forever, name="tortus-embed",
                                                daemon=True)
                self._thread.start()
            return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def stop(self) -> None:
        with self._lock:
            loop, thread, self._loop, self._thread = self._loop, self._thread, None, None
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join()
            loop.close()


class OpenAIEmbedder:
    """Any OpenAI-compatible `/embeddings` endpoint (OpenAI, Azure, Ollama, vLLM).

    `base_url` includes the version prefix, e.g. `http://localhost:11434/v1`. With `dim`
    unset the dimension is the model's documented one, or learnt from the first answer.
    Texts go `batch_size` per request, at most `concurrency` requests at once. Every answer
    is checked: one finite, non-zero vector per input, all of length `dim`.
    """

    def __init__(
        self,
        base_url: str = OPENAI_BASE_URL,
        api_key: str | None = None,
        model: str = OPENAI_MODEL,
        dim: int | None = None,
        *,
        batch_size: int = 64,
        concurrency: int = 4,
        timeout_s: float = 60.0,
        max_retries: int = 5,
    ) -> None:
        if batch_size < 1:
            raise ConfigError(f"batch size must be at least 1, got {batch_size}")
        if concurrency < 1:
            raise ConfigError(f"concurrency must be at least 1, got {concurrency}")
        if dim is not None and dim < 1:
            raise ConfigError(f"embedding dimension must be positive, got {dim}")
        self.model = model
        self.batch_size = batch_size
        self.concurrency = concurrency
        self._dim = dim if dim is not None else _DIMS.get(model)
        # Only the text-embedding-3 models accept `dimensions`; other servers may reject it.
        self._send_dim = dim is not None and model.startswith("text-embedding-3")
        # The name keys the embedding cache, so it names the requested dimension too.
        self.name = f"openai:{model}:{dim}" if self._send_dim else f"openai:{model}"
        self.endpoint = Endpoint(base_url, api_key, timeout_s, max_retries)
        self.ledger = self.endpoint.ledger
        self._client: openai.AsyncOpenAI | None = None
        self._loop = _LoopThread()

    def __repr__(self) -> str:
        return f"OpenAIEmbedder({self.endpoint.where!r}, model={self.model!r}, dim={self._dim})"

    def __enter__(self) -> OpenAIEmbedder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close pooled connections and stop the embedder's thread."""
        if self._client is not None:
            self._loop.submit(self._client.close()).result()
            self._client = None
        self._loop.stop()

    @property
    def dim(self) -> int:
        """The vector length; for an unknown model with no `dim` given, one probe request."""
        if self._dim is None:
            self.embed(["dimension probe"])
        assert self._dim is not None
        return self._dim

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed texts in input order, reporting progress as each batch comes back."""
        if self._client is None:
            self._client = self.endpoint.async_client()
        gate = asyncio.Semaphore(self.concurrency)
        starts = range(0, len(texts), self.batch_size)
        futures = {self._loop.submit(self._batch(gate, list(texts[s : s + self.batch_size]))): s
                   for s in starts}
        rows: dict[int, list[list[float]]] = {}
        try:
            for future in as_completed(futures):
                rows[futures[future]] = future.result()
                progress.report("embedding", sum(map(len, rows.values())), len(texts))
        except BaseException:
            for future in futures:
                future.cancel()
            raise
        return [row for start in starts for row in rows[start]]

    async def _batch(self, gate: asyncio.Semaphore, batch: list[str]) -> list[list[float]]:
        import openai

        assert self._client is not None
        request: dict[str, Any] = {"model": self.model, "input": batch, "encoding_format": "float"}
        if self._send_dim:
            request["dimensions"] = self._dim
        async with gate:
            try:
                raw = await self._client.embeddings.with_raw_response.create(
                    **request, extra_headers=self.endpoint.headers)
            except openai.OpenAIError as exc:
                raise self.endpoint.error(exc) from None
        return self._parse(len(batch), json_body(self.endpoint, raw))

    def _parse(self, expected: int, body: dict[str, Any]) -> list[list[float]]:
        data = body.get("data")
        if not isinstance(data, list):
            raise InvalidOutput("embeddings response has no 'data' list")
        if len(data) != expected:
            raise InvalidOutput(f"got {len(data)} embeddings for {expected} inputs")
        rows: list[list[float] | None] = [None] * expected
        for position, item in enumerate(data):
            index = item.get("index", position) if isinstance(item, dict) else None
            if not isinstance(index, int) or not 0 <= index < expected or rows[index] is not None:
                raise InvalidOutput(f"embedding indexes are not 0..{expected - 1}")
            rows[index] = _vector(item.get("embedding"), index)
        dims = sorted({len(row) for row in rows if row})
        if len(dims) != 1:
            raise InvalidOutput(f"embeddings have different lengths {dims}")
        if self._dim is None:
            self._dim = dims[0]
        elif dims[0] != self._dim:
            raise InvalidOutput(
                f"model {self.model} returned {dims[0]}-dimensional vectors, expected "
                f"{self._dim}: set the embedding dimension to {dims[0]}"
            )
        return [unit(row) for row in rows if row]


def _vector(value: object, index: int) -> list[float]:
    if not isinstance(value, list) or not value:
        raise InvalidOutput(f"embedding {index} is not a list of numbers")
    if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in value):
        raise InvalidOutput(f"embedding {index} is not a list of numbers")
    vector = [float(x) for x in value]
    if not all(map(math.isfinite, vector)) or not any(vector):
        raise InvalidOutput(f"embedding {index} is zero or not finite")
    return vector
