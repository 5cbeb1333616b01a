"""Queries under load while the same tenant ingests: errors, deadlocks and latency.

Into an empty database you name, the probe ingests the demo corpus (the `hash` embedder, so
the model is not what is measured), then starts an ingest of `--documents` generated documents
into the same tenant and, while it runs, `--clients` loops asking the demo's golden questions
through the engine, each on its own connection. It prints the questions answered, the errors
by kind (deadlocks among them) and the latency percentiles.

    python benchmarks/load_probe.py --url postgresql://owner@host/load_db --clients 4 --documents 200
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections import Counter
from pathlib import Path
from tempfile import TemporaryDirectory

import numpy as np
import psycopg

from tortus_pg import migrate, tenants
from tortus_pg.db import connect, tenant_scope
from tortus_pg.embed import HashEmbedder
from tortus_pg.engine import answer
from tortus_pg.indexing import build_index
from tortus_pg.ingest import pipeline, sources

TENANT = "load"
EMBEDDER = HashEmbedder(dim=384)


def _questions() -> list[str]:
    golden = Path(str(sources.demo_manifest())).parent / "golden.jsonl"
    return [json.loads(line)["question"] for line in golden.read_text(encoding="utf-8").splitlines() if line]


def _corpus(root: Path, n: int) -> list[sources.SourceSpec]:
    for i in range(n):
        (root / f"svc{i:04d}.md").write_text(
            f"# Service {i}\n\nService {i} depends on the Ledger Service and is owned by Team {i % 9}. "
            f"It retries failed calls {i % 5} times and keeps its data for {i % 30 + 1} days.\n")
    return sources.resolve([str(root)], "load")


def _ask(url: str, questions: list[str], stop: threading.Event, latencies: list[float], errors: Counter[str],
         offset: int) -> None:
    with connect(url) as conn:
        i = offset
        while not stop.is_set():
            began = time.perf_counter()
            try:
                with tenant_scope(conn, TENANT):
                    answer(conn, questions[i % len(questions)], embedder=EMBEDDER, store=True)
                latencies.append((time.perf_counter() - began) * 1000)
            except psycopg.Error as exc:
                errors[type(exc).__name__] += 1
                conn.rollback()
            i += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True, help="the owner's URL of an empty database")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--documents", type=int, default=200)
    args = parser.parse_args()
    migrate.upgrade(args.url)
    with connect(args.url) as conn:
        tenants.create_tenant(conn, TENANT)
        conn.commit()
        pipeline.ingest(conn, TENANT, sources.from_manifest(sources.demo_manifest(), uri_base="demo"), EMBEDDER)
        build_index(conn, TENANT)
    stop, latencies, errors = threading.Event(), list[float](), Counter[str]()
    loops = [threading.Thread(target=_ask, args=(args.url, _questions(), stop, latencies, errors, n * 7))
             for n in range(args.clients)]
    for loop in loops:
        loop.start()
    with TemporaryDirectory() as tmp, connect(args.url) as conn:
        began = time.perf_counter()
        summary = pipeline.ingest(conn, TENANT, _corpus(Path(tmp), args.documents), EMBEDDER)
        build_index(conn, TENANT)
        ingest_s = time.perf_counter() - began
    stop.set()
    for loop in loops:
        loop.join()
    ms = np.array(latencies)
    print(f"ingest of {args.documents} documents under load: {ingest_s:.1f} s, "
          f"{summary.count('ingested')} ingested, {len(summary.failed)} failed")
    print(f"{args.clients} query loops: {len(ms)} questions answered, errors {dict(errors) or 0} "
          f"(deadlocks {errors.get('DeadlockDetected', 0)}), latency p50 {np.percentile(ms, 50):.0f} ms, "
          f"p95 {np.percentile(ms, 95):.0f} ms")


if __name__ == "__main__":
    main()
