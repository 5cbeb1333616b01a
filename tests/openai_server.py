"""A tiny OpenAI-compatible server on 127.0.0.1 for the embedding and chat client tests.

POST /v1/embeddings answers with HashEmbedder vectors; POST /v1/chat/completions answers
with scripted contents. Failures are scripted per request, and every request is recorded.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tortus_pg.embed import HashEmbedder

USAGE = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class FakeOpenAI:
    """State of one server: what to answer next and what was asked."""

    base_url: str = ""
    dim: int = 32
    api_key: str | None = None
    requests: list[Request] = field(default_factory=list)
    # Each entry is used by one request, in order, before any normal answer:
    # an HTTP status (429, 500 …), "slow" (answer after `slow_s`), or an embeddings
    # mutation: "drop_one", "ragged", "not_numbers".
    script: deque[int | str] = field(default_factory=deque)
    # Chat answers in order; the last one repeats.
    contents: list[str] = field(default_factory=lambda: ['{"ok": true}'])
    slow_s: float = 0.5
    # Sent with every retryable status (408, 409, 429, 5xx), so the clients' retries are quick.
    retry_after: str | None = "0.01"
    latency_s: float = 0.0  # added to every answer, as a remote API's round trip would be
    lock: threading.Lock = field(default_factory=threading.Lock)
    in_flight: int = 0
    most_in_flight: int = 0  # the most requests being answered at one time

    def fail(self, *steps: int | str) -> None:
        """Queue failures for the next requests."""
        with self.lock:
            self.script.extend(steps)

    def bodies(self, path: str) -> list[dict[str, Any]]:
        """Bodies of the requests received on `path`."""
        return [r.body for r in self.requests if r.path == path]

    def answer(self, path: str, headers: dict[str, str], body: Any) -> tuple[int, Any]:
        with self.lock:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            return self._answer(path, headers, body)
        finally:
            with self.lock:
                self.in_flight -= 1

    def _answer(self, path: str, headers: dict[str, str], body: Any) -> tuple[int, Any]:
        with self.lock:
            self.requests.append(Request(path, headers, body))
            step = self.script.popleft() if self.script else None
            chat_turn = sum(r.path.endswith("/chat/completions") for r in self.requests) - 1
        if step == "slow":
            time.sleep(self.slow_s)
            step = None
        time.sleep(self.latency_s)
        if isinstance(step, int):
            return step, {"error": {"message": f"scripted {step}", "type": "scripted"}}
        if self.api_key and headers.get("authorization") != f"Bearer {self.api_key}":
            return 401, {"error": {"message": "Incorrect API key provided: "
                                   + headers.get("authorization", "")[7:]}}
        if path == "/v1/embeddings":
            return 200, self._embeddings(body, step)
        if path == "/v1/chat/completions":
            content = self.contents[min(chat_turn, len(self.contents) - 1)]
            return 200, {
                "id": "chatcmpl-test", "object": "chat.completion", "model": body.get("model"),
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": content}}],
                "usage": USAGE,
            }
        return 404, {"error": {"message": f"no route {path}"}}

    def _embeddings(self, body: dict[str, Any], step: int | str | None) -> dict[str, Any]:
        texts = body["input"]
        vectors = HashEmbedder(body.get("dimensions", self.dim)).embed(texts)
        data: list[dict[str, Any]] = [
            {"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)
        ]
        data.reverse()  # clients must order by index, not by position
        if step == "drop_one":
            data.pop()
        elif step == "ragged":
            data[0]["embedding"] = data[0]["embedding"][:-1]
        elif step == "not_numbers":
            data[0]["embedding"] = ["x"] * self.dim
        tokens = sum(len(t.split()) for t in texts)
        return {"object": "list", "data": data, "model": body.get("model"),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}


def _handler(state: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length", 0)))
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, reply = state.answer(self.path, headers, json.loads(raw))
            data = json.dumps(reply).encode()
            try:
                self.send_response(status)
                if (status in (408, 409, 429) or status >= 500) and state.retry_after is not None:
                    self.send_header("Retry-After", state.retry_after)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client timed out and hung up, as the timeout tests intend

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@contextmanager
def openai_server(**options: Any) -> Iterator[FakeOpenAI]:
    """Run a server on 127.0.0.1 (a free port) for the duration of the block."""
    state = FakeOpenAI(**options)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    httpd.daemon_threads = True
    state.base_url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def main() -> None:
    """Serve until interrupted, printing the base URL first (for benchmarks/openai_embed.py)."""
    parser = argparse.ArgumentParser(description="A local OpenAI-compatible server for tests and benchmarks.")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="added to every answer")
    parser.add_argument("--dim", type=int, default=384, help="embedding dimension")
    args = parser.parse_args()
    with openai_server(latency_s=args.latency_ms / 1000, dim=args.dim) as state:
        print(state.base_url, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()


if __name__ == "__main__":
    main()
