"""Ingest throughput with the `openai` embedder as requests in flight grow, against a local
OpenAI-compatible server that adds a fixed round trip to every answer (as a remote API does).

    python benchmarks/openai_embed.py PATH/TO/corpus.jsonl [--latency-ms 100] [--concurrency 1,2,4,8]

Uses the workspace's database (the embedded server unless TORTUS_DATABASE_URL is set) and a
throw-away tenant per setting, deleted first so the embedding cache is cold. Concurrency 1 is
one request at a time, as a blocking client sends them.
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from ingest import database_and_corpus, timed_ingest  # benchmarks/ingest.py, beside this script

from tortus_pg.ingest.corpus import Passage
from tortus_pg.openai_embed import OpenAIEmbedder

SERVER = Path(__file__).resolve().parent.parent / "tests" / "openai_server.py"


@contextlib.contextmanager
def local_server(latency_ms: float) -> Iterator[str]:
    """The test suite's OpenAI-compatible server in a process of its own; yields its base URL."""
    process = subprocess.Popen([sys.executable, str(SERVER), "--latency-ms", str(latency_ms)],
                               stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        yield process.stdout.readline().strip()
    finally:
        process.terminate()
        process.wait()


def measure(url: str, base_url: str, passages: list[Passage], concurrency: int) -> tuple[float, float]:
    """Chunks per second embedding alone, and ingesting (a cold cache each time)."""
    with OpenAIEmbedder(base_url, None, "bench-embed", 384, concurrency=concurrency) as embedder:
        embed_s, chunks, ingest_s = timed_ingest(url, f"bench-openai-{concurrency}", passages, embedder)
    return chunks / embed_s, chunks / ingest_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--latency-ms", type=float, default=100.0)
    parser.add_argument("--concurrency", default="1,2,4,8")
    parser.add_argument("--limit", type=int, default=None)
    args = parser.parse_args()
    url, passages = database_and_corpus(args.corpus, args.limit)
    print(f"{args.corpus}: {len(passages)} passages; server round trip {args.latency_ms:.0f} ms")
    print(f"{'in flight':>9} {'embed only':>14} {'ingest':>14}")
    with local_server(args.latency_ms) as base_url:
        for concurrency in map(int, args.concurrency.split(",")):
            embed_rate, ingest_rate = measure(url, base_url, passages, concurrency)
            print(f"{concurrency:>9} {embed_rate:>10.1f} c/s {ingest_rate:>10.1f} c/s")


if __name__ == "__main__":
    main()
