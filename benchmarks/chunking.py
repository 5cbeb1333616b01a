"""Chunks of a corpus under each embedder's chunk budget, measured in MiniLM's word pieces.

    python benchmarks/chunking.py PATH/TO/corpus.jsonl[.gz] [--embedders hash,minilm] [--limit N] [--embed]

For each embedder: how many chunks its budget makes, their mean and largest size in
all-MiniLM-L6-v2 word pieces, how many embedded texts (the context line and the chunk, as ingest
embeds them) exceed the 254 word pieces the model reads besides [CLS] and [SEP], the share of
word pieces beyond that window, and the time chunking takes (best of three, CPU seconds).
With --embed, also the wall time all-MiniLM-L6-v2 takes to embed each budget's texts (the model
loaded beforehand), whatever the embedder: the model's cost of the budget's chunking alone.
Needs the minilm extra; no database.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tortus_pg.embed import MiniLMEmbedder, make_embedder
from tortus_pg.ingest.budget import budget_for
from tortus_pg.ingest.chunking import ChunkBudget, chunk_document
from tortus_pg.ingest.corpus import Passage, read_passages
from tortus_pg.ingest.store import chunk_context, embedding_text

WINDOW = 254
RUNS = 3


@dataclass(frozen=True)
class Row:
    chunks: int
    mean: float  # word pieces of a chunk's own text
    largest: int
    over: int  # embedded texts longer than the window
    lost: float  # share of the embedded word pieces beyond the window
    cpu_s: float
    embedded: list[str]  # what ingest embeds for each chunk


def measure(passages: list[Passage], budget: ChunkBudget, pieces: Callable[[str], int]) -> Row:
    best = float("inf")
    for _ in range(RUNS):
        start = time.process_time()
        chunked = [(p, chunk_document(p.document, budget=budget)) for p in passages]
        best = min(best, time.process_time() - start)
    own = [pieces(c.text) for _, cs in chunked for c in cs]
    texts = [embedding_text(chunk_context(p.title, c), c) for p, cs in chunked for c in cs]
    embedded = [pieces(text) for text in texts]
    lost = sum(max(0, n - WINDOW) for n in embedded) / max(1, sum(embedded))
    return Row(len(own), statistics.mean(own), max(own), sum(n > WINDOW for n in embedded), lost, best, texts)


def embed_seconds(model: MiniLMEmbedder, texts: list[str]) -> float:
    start = time.perf_counter()
    model.embed(texts)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--embedders", default="hash,minilm")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--embed", action="store_true", help="also time MiniLM embedding each budget's texts")
    args = parser.parse_args()
    passages = list(read_passages(args.corpus, args.limit))
    lengths = budget_for(MiniLMEmbedder.name).lengths

    def pieces(text: str) -> int:
        return lengths(text).length(0, len(text))

    print(f"{args.corpus}: {len(passages)} passages; sizes in all-MiniLM-L6-v2 word pieces")
    print(f"{'embedder':<24} {'budget (target/max/min)':<42} {'chunks':>7} {'mean':>6} {'max':>5} "
          f"{'over':>6} {'lost':>6} {'cpu s':>6}{' embed s' if args.embed else ''}")
    model = MiniLMEmbedder() if args.embed else None
    if model is not None:
        model.embed(["warm-up"])
    for name in args.embedders.split(","):
        embedder_name = make_embedder(name).name
        budget = budget_for(embedder_name)
        row = measure(passages, budget, pieces)
        sizes = f"{budget.target}/{budget.max}/{budget.min} {budget.unit}"
        embed = f" {embed_seconds(model, row.embedded):>7.1f}" if model is not None else ""
        print(f"{embedder_name:<24} {sizes:<42} {row.chunks:>7} {row.mean:>6.1f} {row.largest:>5} "
              f"{row.over:>6} {row.lost:>6.1%} {row.cpu_s:>6.2f}{embed}")


if __name__ == "__main__":
    main()
