"""`tortus-pg eval` and `tortus-pg report`: compare retrieval strategies on a dataset."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.measure import Measurement
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from tortus_pg.embed import make_embedder
from tortus_pg.errors import InvalidInput
from tortus_pg.eval import report as report_lib
from tortus_pg.eval import runner
from tortus_pg.eval.datasets import load_dataset
from tortus_pg.eval.strategies import EXTERNAL_CMD_ENV, STRATEGIES, StrategyContext, parse_names

from .context import console, err_console, owner_connection, settings

COLUMNS = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
SHOWN = {"recall@2": "R@2", "recall@5": "R@5", "recall@10": "R@10", "ndcg@10": "nDCG@10", "mrr": "MRR",
         "all_gold@5": "all@5"}
WITH_CI = ("recall@5", "all_gold@5")


def eval_(
    ctx: typer.Context,
    dataset_path: Path = typer.Argument(..., help="BEIR or multi-hop directory, golden-set .jsonl, or 'demo'."),
    strategies: str = typer.Option(
        None, "--strategies", help=f"Comma-separated, from: {', '.join(sorted(STRATEGIES))} "
        f"[default: {','.join(runner.DEFAULT_STRATEGIES)}, or the resumed run's]."
    ),
    k: int = typer.Option(None, "--k", help="Ids retrieved per question [default: 10, or the resumed run's]."),
    limit: int = typer.Option(None, "--limit", help="Evaluate only the first N questions."),
    json_out: Path = typer.Option(None, "--json-out", help="Write the summary and per-question rows here."),
    resume: int = typer.Option(None, "--resume", help="Continue run RUN_ID, skipping the answers it stored."),
    embedder_name: str = typer.Option(None, "--embedder", help="Embedder for the snapshot and queries."),
) -> None:
    """Run retrieval strategies side by side on one ingested snapshot of a dataset (tenant eval-<dataset>)."""
    s = settings(ctx)
    dataset = load_dataset(dataset_path)
    names = parse_names(strategies) if strategies else None
    embedder = make_embedder(
        embedder_name or s.embedder, dim=s.embedding_dim, base_url=s.embed_base_url, api_key=s.embed_api_key,
        model=s.embed_model,
    )
    tenant = runner.tenant_for(dataset.name)
    timeout = float(os.environ.get("TORTUS_EVAL_EXTERNAL_TIMEOUT") or 30)
    with owner_connection(ctx) as conn, Progress(*COLUMNS, console=err_console, transient=True) as bar:
        task = bar.add_task(f"corpus into {tenant}", total=None)
        prefix = runner.prepare(conn, dataset, embedder, tenant, ts_config=s.text_search_config,
                                on_progress=lambda done, total: bar.update(task, completed=done, total=total))
        bar.update(task, description="questions", completed=0, total=None)
        context = StrategyContext(prefix, embedder, s.text_search_config, os.environ.get(EXTERNAL_CMD_ENV), timeout)
        evaluation = runner.run(
            conn, dataset, names, tenant=tenant, context=context, k=k, limit=limit, resume_run_id=resume,
            on_progress=lambda done, total: bar.update(task, completed=done, total=total),
        )
    doc = runner.document(evaluation)
    print_summary(doc)
    if json_out is not None:
        json_out.write_text(json.dumps(doc, indent=2), encoding="utf-8")
        console.print(f"wrote {json_out}")


def print_summary(summary: dict[str, Any]) -> None:
    counts = summary["counts"]
    console.print(
        f"run {summary['run_id']} on {summary['dataset']}: {counts['questions']} questions "
        f"({counts['negative']} negative), k={summary['k']}, embedder {summary['embedder']}"
    )
    table = Table(caption="R@5 and all@5 (all gold in the top 5) with 95% bootstrap intervals")
    table.add_column("strategy", no_wrap=True)
    for header in (*SHOWN.values(), "p50 ms", "p95 ms", "fan-out"):
        table.add_column(header, justify="right")
    for name, e in summary["strategies"].items():
        if e["status"] != "done":
            table.add_row(name, f"skipped: {e['reason']}")
            continue
        cells = [_cell(e, m) for m in SHOWN]
        table.add_row(name, *cells, f"{e['latency_p50_ms']:.1f}", f"{e['latency_p95_ms']:.1f}",
                      f"{e['fan_out']:.2f}" if "fan_out" in e else "-")
    # Never squeeze numbers into ellipses (a pipe gets 80 columns): print as wide as the table needs.
    wanted = Measurement.get(console, console.options.update_width(1000), table).maximum
    Console(highlight=False, width=max(console.width, wanted)).print(table)


def _cell(entry: dict[str, Any], metric: str) -> str:
    value, (lo, hi) = entry.get(metric), entry["ci95"][metric]
    if value is None:
        return "-"
    return f"{value:.3f}\n[{lo:.2f},{hi:.2f}]" if metric in WITH_CI and lo is not None else f"{value:.3f}"


def report(
    ctx: typer.Context,
    run: int = typer.Option(None, "--run", help="A finished run id stored in the database."),
    eval_json: Path = typer.Option(None, "--eval-json", help="A JSON file written by `tortus-pg eval --json-out`."),
    out: Path = typer.Option(..., "--out", help="Directory for report.md and the PNG plots."),
) -> None:
    """Render an evaluation as markdown with plots (recall@k, latency vs recall, CI bars)."""
    if (run is None) == (eval_json is None):
        raise InvalidInput("give exactly one of --run ID or --eval-json FILE")
    if eval_json is not None:
        try:
            summary = json.loads(eval_json.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise InvalidInput(f"{eval_json}: cannot read evaluation JSON ({exc})") from None
    else:
        with owner_connection(ctx) as conn:
            summary = runner.stored_summary(conn, run)
    console.print(f"wrote {report_lib.render(summary, out)}")
