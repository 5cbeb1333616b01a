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
from tortus_pg.embed import make_embedder
from tortus_pg.errors import TenantNotFound
from tortus_pg.ingest.budget import budget_for
from tortus_pg.ingest.chunking import chunk_document
from tortus_pg.ingest.corpus import ingest_passages, read_passages
from tortus_pg.migrate import upgrade


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--embedders", default="hash,minilm")
    parser.add_argument("--limit", type=int, default=None)
    args = parser.parse_args()

    url = database_url(load_settings())
    upgrade(url)
    passages = list(read_passages(args.corpus, args.limit))
    print(f"{args.corpus}: {len(passages)} passages")
    print(f"{'embedder':<26} {'embed only':>12} {'ingest':>12} {'database+pipeline share':>24}")
    for name in args.embedders.split(","):
        embedder = make_embedder(name)
        # The chunks ingest makes for this embedder (its chunk budget), embedded alone.
        budget = budget_for(embedder.name)
        texts = [c.text for p in passages for c in chunk_document(p.document, budget=budget)]
        embedder.embed(texts[:8])  # load the model outside the timings
        start = time.perf_counter()
        embedder.embed(texts)
        embed_s = time.perf_counter() - start

        tenant = f"bench-{name}"
        with connect(url) as conn:
            with contextlib.suppress(TenantNotFound):
                tenants.delete_tenant(conn, tenant)
            tenants.create_tenant(conn, tenant)
            conn.commit()
            start = time.perf_counter()
            summary = ingest_passages(conn, tenant, passages, embedder, uri_prefix="bench/", subgraph="bench")
            ingest_s = time.perf_counter() - start
        chunks = sum(r.chunks for r in summary.results)
        share = max(0.0, 1 - embed_s / ingest_s)
        print(
            f"{embedder.name:<26} {len(texts) / embed_s:>8.1f} c/s {chunks / ingest_s:>8.1f} c/s "
            f"{share:>23.0%}   ({embed_s:.1f} s embed, {ingest_s:.1f} s ingest)"
        )


if __name__ == "__main__":
    main()
