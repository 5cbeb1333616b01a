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

from tortus_pg.config import reveal
from tortus_pg.embed import make_embedder
from tortus_pg.errors import InvalidInput
from tortus_pg.eval import abstention, datasets, runner, trec
from tortus_pg.eval import report as report_lib
from tortus_pg.eval.datasets import load_dataset
from tortus_pg.eval.strategies import EXTERNAL_CMD_ENV, STRATEGIES, StrategyContext, parse_names
from tortus_pg.eval.summary import twins_section
from tortus_pg.query.paths import SHARDS

from .context import console, err_console, owner_connection, settings

COLUMNS = (TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
SHOWN = {"recall@2": "R@2", "recall@5": "R@5", "recall@10": "R@10", "ndcg@10": "nDCG@10", "mrr": "MRR",
         "all_gold@5": "all@5"}
WITH_CI = ("recall@5", "all_gold@5")


def eval_(
    ctx: typer.Context,
    dataset_path: Path = typer.Argument(..., help="BEIR or multi-hop directory, golden-set .jsonl, or 'demo'."),
    strategies: str = typer.Option(
        None, "--strategies", help=f"Comma-separated, from: {', '.join(sorted(STRATEGIES))} "
        f"(default: {','.join(runner.DEFAULT_STRATEGIES)}, or the resumed run's)."
    ),
    k: int = typer.Option(None, "--k", help="Ids retrieved per question (default: 10, or the resumed run's)."),
    limit: int = typer.Option(None, "--limit", help="Evaluate only the first N questions."),
    json_out: Path = typer.Option(None, "--json-out", help="Write the summary and per-question rows here."),
    resume: int = typer.Option(None, "--resume", help="Continue run RUN_ID, skipping the answers it stored."),
    embedder_name: str = typer.Option(None, "--embedder", help="Embedder for the snapshot and queries."),
    twins: bool = typer.Option(
        False, "--twins", help="Multi-hop sets: also ask each question over a snapshot without its gold passages "
        "(its unanswerable twin) and print the abstention curve over the support threshold."
    ),
    trec_run: Path = typer.Option(
        None, "--trec-run", help="Also write TREC files here: the qrels and one run per strategy (for trec_eval, "
        "ir-measures, ranx)."
    ),
    twin_gap: datasets.TwinGap = typer.Option(
        datasets.TwinGap.GOLD, "--twin-gap", help="What the twins' snapshot leaves out: every gold passage, or "
        "only those stating the answer (what the question names stays)."
    ),
) -> None:
    """Run retrieval strategies side by side on one ingested snapshot of a dataset (tenant eval-<dataset>-<hash>)."""
    s = settings(ctx)
    dataset = load_dataset(dataset_path)
    names = parse_names(strategies) if strategies else None
    embedder = make_embedder(
        embedder_name or s.embedder, dim=s.embedding_dim, base_url=s.embed_base_url, api_key=reveal(s.embed_api_key),
        model=s.embed_model,
    )
    twin_set = datasets.twins(dataset, limit, twin_gap) if twins else None
    timeout = float(os.environ.get("TORTUS_EVAL_EXTERNAL_TIMEOUT") or 30)
    with owner_connection(ctx) as conn, Progress(*COLUMNS, console=err_console, transient=True) as bar:

        def evaluate(ds: datasets.Dataset, run_names: list[str] | None, run_k: int | None,
                     resumed: int | None) -> runner.EvalRun:
            tenant = runner.tenant_for(ds)
            task = bar.add_task(f"corpus into {tenant}", total=None)
            prefix = runner.prepare(conn, ds, embedder, tenant, ts_config=s.text_search_config,
                                    on_progress=lambda done, total: bar.update(task, completed=done, total=total))
            bar.update(task, description=f"questions of {ds.name}", completed=0, total=None)
            context = StrategyContext(prefix, embedder, s.text_search_config, os.environ.get(EXTERNAL_CMD_ENV),
                                      timeout)
            return runner.run(conn, ds, run_names, tenant=tenant, context=context, k=run_k, limit=limit,
                              resume_run_id=resumed,
                              on_progress=lambda done, total: bar.update(task, completed=done, total=total))

        evaluation = evaluate(dataset, names, k, resume)
        twin_run = evaluate(twin_set, list(evaluation.config["strategies"]), int(evaluation.config["k"]), None) \
            if twin_set is not None else None
        if twin_run is not None:
            runner.link_twins(conn, evaluation, twin_run)
    _show(evaluation, twin_run, json_out, trec_run)


def _show(evaluation: runner.EvalRun, twin_run: runner.EvalRun | None, json_out: Path | None,
          trec_run: Path | None) -> None:
    """Print the run's summary (and its twins' curves), and write the JSON and TREC files asked for."""
    doc = runner.document(evaluation)
    print_summary(doc)
    if twin_run is not None:
        doc["twins"] = twins_section(evaluation.results, twin_run.run_id, twin_run.dataset.name, twin_run.results)
        _print_curves(doc["twins"], evaluation)
    if json_out is not None:
        json_out.write_text(json.dumps(doc, indent=2), encoding="utf-8")
        console.print(f"wrote {json_out}")
    if trec_run is not None:
        for path in trec.write(evaluation, trec_run):
            console.print(f"wrote {path}")


def _print_curves(twins: dict[str, Any], evaluation: runner.EvalRun) -> None:
    """Each answering strategy's abstention curve over its twins (`summary.twins_section`)."""
    for name, points in twins["abstention_curve"].items():
        asked = sum(r.strategy == name and "reply_match" in r.metrics for r in evaluation.results)
        unanswerable = sum(t["strategy"] == name for t in twins["questions"])
        _print_curve(f"{name}: {asked} answerable questions and their {unanswerable} unanswerable twins "
                     f"(run {twins['run_id']})", points)


def _print_curve(title: str, points: list[dict[str, float]]) -> None:
    """An abstention curve, every 0.1 of the support threshold, and its best balance."""
    best = abstention.best_balance([abstention.CurvePoint(**p) for p in points])
    table = Table(title=title, caption=f"best balance of answered and withheld at support {best.threshold:.2f} "
                  f"(answered {best.answered_when_answerable:.3f}, withheld {best.withheld_when_unanswerable:.3f})")
    for header in ("support threshold", "answered when answerable", "with the expected text",
                   "withheld when unanswerable"):
        table.add_column(header, justify="right")
    for p in points[::2]:
        table.add_row(f"{p['threshold']:.2f}", f"{p['answered_when_answerable']:.3f}", f"{p['answer_match']:.3f}",
                      f"{p['withheld_when_unanswerable']:.3f}")
    console.print(table)


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
    for name, e in summary["strategies"].items():
        if e.get("abstention"):
            a = e["abstention"]
            console.print(f"{name}: answered {_share(a['answered_when_answerable'])} of the answerable questions, "
                          f"{_share(a['answer_match'])} with the expected text (short answer F1 "
                          f"{_share(a['answer_f1'])}), withheld {_share(a['accuracy_on_negatives'])} of "
                          f"{a['negatives']} negatives")
            if a.get("curve"):
                _print_curve(f"{name}: answerable questions ({counts['questions'] - counts['negative']}) and the "
                             f"set's negatives ({a['negatives']})", a["curve"])
        if e.get("answer_groups"):
            _groups_table(name, e["answer_groups"])
        if "shard_affinity" in e:
            paired = e.get("vs_baseline", {}).get("shard_affinity")
            against = "" if not paired else (f" ({paired['diff']:+.3f} [{paired['ci95'][0]:+.3f}, "
                                             f"{paired['ci95'][1]:+.3f}] against {summary['baseline']})")
            console.print(f"{name}: {_share(e['shard_affinity'])} of the {e['path_hops']:.2f} graph hops per question "
                          f"on the evidence's paths stay inside one of {SHARDS} torus shards{against}")


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _groups_table(name: str, groups: dict[str, dict[str, int]]) -> None:
    table = Table(title=f"{name}: the originals and each set of paraphrases, per half of the golden set")
    for header in ("questions", "answered with the expected text", "answered", "negatives withheld"):
        table.add_column(header, justify="right" if header != "questions" else "left")
    for group, g in groups.items():
        table.add_row(group, f"{g['matched']} of {g['answerable']}", f"{g['answered']} of {g['answerable']}",
                      f"{g['negatives_withheld']} of {g['negatives']}")
    console.print(table)


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
