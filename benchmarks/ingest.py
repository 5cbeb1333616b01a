"""Ingest throughput next to raw embedding throughput, so the database's share is visible.

    python benchmarks/ingest.py PATH/TO/corpus.jsonl [--embedders hash,minilm] [--limit N]

Uses the workspace's database (the embedded server unless TORTUS_DATABASE_URL is set) and a
throw-away tenant per embedder, deleted first so the embedding cache is cold.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from pathlib import Path

from tortus_pg import tenants
from tortus_pg.config import load_settings
from tortus_pg.db import connect, database_url
from tortus_pg.embed import Embedder, make_embedder
from tortus_pg.errors import TenantNotFound
from tortus_pg.ingest.budget import budget_for
from tortus_pg.ingest.chunking import chunk_document
from tortus_pg.ingest.corpus import Passage, ingest_passages, read_passages
from tortus_pg.migrate import upgrade


def database_and_corpus(corpus: Path, limit: int | None) -> tuple[str, list[Passage]]:
    """The workspace's database URL, migrated, and the corpus's first `limit` passages."""
    url = database_url(load_settings())
    upgrade(url)
    return url, list(read_passages(corpus, limit))


def timed_ingest(url: str, tenant: str, passages: list[Passage], embedder: Embedder) -> tuple[float, int, float]:
    """Seconds to embed the chunks ingest makes for `embedder` (its chunk budget) alone, then the
    chunks stored and the seconds to ingest the passages into a fresh `tenant` (cold cache)."""
    budget = budget_for(embedder.name)
    texts = [c.text for p in passages for c in chunk_document(p.document, budget=budget)]
    embedder.embed(texts[:8])  # load the model (or connect) outside the timings
    start = time.perf_counter()
    embedder.embed(texts)
    embed_s = time.perf_counter() - start
    with connect(url) as conn:
        with contextlib.suppress(TenantNotFound):
            tenants.delete_tenant(conn, tenant)
        tenants.create_tenant(conn, tenant)
        conn.commit()
        start = time.perf_counter()
        summary = ingest_passages(conn, tenant, passages, embedder, uri_prefix="bench/", subgraph="bench")
        ingest_s = time.perf_counter() - start
        tenants.delete_tenant(conn, tenant)
    return embed_s, sum(r.chunks for r in summary.results), ingest_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--embedders", default="hash,minilm")
    parser.add_argument("--limit", type=int, default=None)
    args = parser.parse_args()

    url, passages = database_and_corpus(args.corpus, args.limit)
    print(f"{args.corpus}: {len(passages)} passages")
    print(f"{'embedder':<26} {'embed only':>12} {'ingest':>12} {'database+pipeline share':>24}")
    for name in args.embedders.split(","):
        embedder = make_embedder(name)
        embed_s, chunks, ingest_s = timed_ingest(url, f"bench-{name}", passages, embedder)
        share = max(0.0, 1 - embed_s / ingest_s)
        print(
            f"{embedder.name:<26} {chunks / embed_s:>8.1f} c/s {chunks / ingest_s:>8.1f} c/s "
            f"{share:>23.0%}   ({embed_s:.1f} s embed, {ingest_s:.1f} s ingest)"
        )


if __name__ == "__main__":
    main()
