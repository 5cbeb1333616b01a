"""Where the query engine's time goes: each stage's mean and p95 over a dataset's questions.

    python benchmarks/engine_stages.py PATH/TO/multihop/SET [--limit 100]

Asks every question with the default policy (no trace stored) on the snapshot that
`tortus-pg eval` ingested for the dataset (tenant eval-<name>), so run an evaluation of it
first. Uses the workspace's database (the embedded server unless TORTUS_DATABASE_URL is set).
The first question is asked once before timing, so loading the model and cold caches are not
counted. A stage that some questions skip (a second walk, a bridge) is averaged over the
questions that ran it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from rich.progress import track

from tortus_pg.config import load_settings
from tortus_pg.db import connect, database_url, tenant_scope
from tortus_pg.embed import make_embedder
from tortus_pg.engine import answer
from tortus_pg.eval.datasets import load_dataset
from tortus_pg.eval.runner import tenant_for


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset", type=Path, help="a dataset `tortus-pg eval` has ingested, or 'demo'")
    parser.add_argument("--limit", type=int, default=None, help="only the first N questions")
    args = parser.parse_args()

    settings = load_settings()
    dataset = load_dataset(args.dataset)
    questions = [q.text for q in dataset.questions][: args.limit]
    if not questions:
        raise SystemExit(f"{args.dataset}: no questions")
    embedder = make_embedder(settings.embedder, dim=settings.embedding_dim, base_url=settings.embed_base_url,
                             api_key=settings.embed_api_key, model=settings.embed_model)
    stages: dict[str, list[float]] = {}
    totals = []
    with connect(database_url(settings)) as conn, tenant_scope(conn, tenant_for(dataset.name)):
        answer(conn, questions[0], embedder=embedder, store=False, ts_config=settings.text_search_config)
        for question in track(questions, description=f"{dataset.name}: asking"):
            timings = answer(conn, question, embedder=embedder, store=False,
                             ts_config=settings.text_search_config).diagnostics["timings"]
            for name, ms in timings.items():
                stages.setdefault(name.removesuffix("_ms"), []).append(ms)
            totals.append(timings["embed_ms"] + timings["total_ms"])
    print(f"{dataset.name}: {len(questions)} questions")
    print(f"{'stage':<16} {'questions':>9} {'mean ms':>8} {'p95 ms':>8}")
    for name, values in sorted(stages.items(), key=lambda kv: -float(np.mean(kv[1]))):
        print(f"{name:<16} {len(values):>9} {np.mean(values):>8.1f} {np.percentile(values, 95):>8.1f}")
    print(f"{'embed + total':<16} {len(totals):>9} {np.mean(totals):>8.1f} {np.percentile(totals, 95):>8.1f}")


if __name__ == "__main__":
    main()
