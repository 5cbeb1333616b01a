"""What evidence-following visibility costs a query, and what it hides.

Into an empty database you name, the probe ingests the demo corpus (the `hash` embedder, so the
model is not what is measured) with every third source open only to the group `restricted`.
Then it asks the demo's golden questions through the engine as three callers, each entering the
tenant with an API key as the API does: a key given no groups (it reads everything and skips the
checks), a key holding `restricted` (it reads everything through the checks), and a key
holding another group (the checks hide the restricted sources). It prints, per caller, the
latency percentiles, the questions answered, and the questions whose evidence holds a restricted
source.

    python benchmarks/visibility_cost.py --url postgresql://owner@host/vis_db --rounds 3
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import psycopg

from tortus_pg import migrate, tenants
from tortus_pg.db import connect
from tortus_pg.embed import HashEmbedder
from tortus_pg.engine import answer
from tortus_pg.indexing import build_index
from tortus_pg.ingest import pipeline, sources

TENANT = "visibility"
EMBEDDER = HashEmbedder(dim=384)
CALLERS = {"no groups (reads all, no checks)": None, "holds `restricted` (reads all, checked)": ["restricted"],
           "holds `other` (restricted sources hidden)": ["other"]}


def _questions() -> list[str]:
    golden = Path(str(sources.demo_manifest())).parent / "golden.jsonl"
    return [json.loads(line)["question"] for line in golden.read_text(encoding="utf-8").splitlines() if line]


def setup(url: str) -> tuple[set[str], dict[str, str]]:
    """The demo with every third source restricted; the restricted URIs and a key per caller."""
    migrate.upgrade(url)
    specs = sources.from_manifest(sources.demo_manifest(), uri_base="demo")
    closed = {spec.uri for spec in specs[::3]}
    specs = [replace(spec, readers=("restricted",) if spec.uri in closed else None) for spec in specs]
    with connect(url) as conn:
        tenants.create_tenant(conn, TENANT)
        conn.commit()
        pipeline.ingest(conn, TENANT, specs, EMBEDDER)
        build_index(conn, TENANT)
        keys = {label: tenants.create_key(conn, TENANT, ["query"], groups=groups).key
                for label, groups in CALLERS.items()}
        conn.commit()
    return closed, keys


def ask_all(conn: psycopg.Connection, key: str, questions: list[str], closed: set[str]) -> tuple[list[float], int, int]:
    """Latencies, questions answered, and questions whose evidence holds a restricted source."""
    latencies, answered, cited_closed = [], 0, 0
    for question in questions:
        began = time.perf_counter()
        with conn.transaction():
            conn.execute("set local role tortus_app")
            conn.execute("select tortus.enter_tenant(%s)", [tenants.key_hash(key)])
            result = answer(conn, question, embedder=EMBEDDER, store=True)
        latencies.append((time.perf_counter() - began) * 1000)
        answered += not result.withheld
        cited_closed += any(e.uri in closed for e in result.evidence)
    return latencies, answered, cited_closed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True, help="the owner's URL of an empty database")
    parser.add_argument("--rounds", type=int, default=3, help="times each caller asks every question")
    args = parser.parse_args()
    closed, keys = setup(args.url)
    questions = _questions()
    print(f"{len(closed)} of the demo's sources open only to `restricted`; {len(questions)} questions "
          f"x {args.rounds} rounds per caller")
    print("| caller | p50 ms | p95 ms | answered | questions whose evidence holds a restricted source |")
    print("| --- | --- | --- | --- | --- |")
    with connect(args.url) as conn:
        for label, key in keys.items():
            ask_all(conn, key, questions[:3], closed)  # warm the caches
            runs = [ask_all(conn, key, questions, closed) for _ in range(args.rounds)]
            ms = np.array([x for run in runs for x in run[0]])
            print(f"| {label} | {np.percentile(ms, 50):.0f} | {np.percentile(ms, 95):.0f} | "
                  f"{runs[0][1]} of {len(questions)} | {runs[0][2]} |")


if __name__ == "__main__":
    main()
