"""`tortus-pg bench`: the query engine's time per stage, or where its answers are lost, over a
dataset's questions."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.progress import Progress
from rich.table import Table

from tortus_pg.bench import AnswerLosses, answer_losses, stage_timings
from tortus_pg.config import reveal
from tortus_pg.db import tenant_scope
from tortus_pg.embed import make_embedder
from tortus_pg.errors import InvalidInput, TenantNotFound
from tortus_pg.eval.datasets import load_dataset
from tortus_pg.eval.runner import tenant_for

from . import bench_scale
from .context import console, err_console, owner_connection, settings
from .eval import COLUMNS


def bench(
    ctx: typer.Context,
    dataset_path: Path = typer.Argument(
        None, help="BEIR or multi-hop directory, golden-set .jsonl, or 'demo' (not with --scale)."
    ),
    limit: int = typer.Option(None, "--limit", help="Only the first N questions."),
    on_tenant: bool = typer.Option(
        False, "--on-tenant", help="Ask on the workspace's tenant (--tenant) instead of the dataset's eval snapshot."
    ),
    answers: bool = typer.Option(
        False, "--answers", help="Instead of timings, count where answers are lost: withheld (by reason) or wrong "
        "although the evidence holds the expected text."
    ),
    scale: str = typer.Option(
        None, "--scale", help="Instead, the scale suite: synthetic tenants of these sizes in nodes (e.g. 10k,100k), "
        "every query kind timed as the application role next to its peers."
    ),
    questions: int = typer.Option(100, "--questions", help="--scale: questions per query kind and size."),
    clients: str = typer.Option("1,4", "--clients", help="--scale: concurrent client counts."),
    out: Path = typer.Option(Path("scale-report"), "--out", help="--scale: where the JSON, markdown and plots go."),
    reuse: bool = typer.Option(False, "--reuse", help="--scale: keep scale tenants already built (ingest not timed)."),
) -> None:
    """Time the query engine stage by stage (mean and p95 ms) on a dataset's questions, or with
    --answers count where its answers are lost; asked on the snapshot `tortus-pg eval` ingested
    (tenant eval-<dataset>-<hash>) or with --on-tenant on yours. With --scale, the scale suite instead
    (docs/benchmarks.md): build tenants of those sizes and write a report."""
    if (scale is None) == (dataset_path is None):
        raise InvalidInput("give a dataset, or --scale SIZES for the scale suite (not both)")
    if scale is not None:
        bench_scale.scale(ctx, scale, questions, clients, out, reuse)
    else:
        _on_dataset(ctx, dataset_path, limit, on_tenant, answers)


def _on_dataset(ctx: typer.Context, dataset_path: Path, limit: int | None, on_tenant: bool, answers: bool) -> None:
    s = settings(ctx)
    dataset = load_dataset(dataset_path)
    asked = dataset.questions[:limit]
    tenant = s.tenant if on_tenant else tenant_for(dataset)
    embedder = make_embedder(s.embedder, dim=s.embedding_dim, base_url=s.embed_base_url,
                             api_key=reveal(s.embed_api_key), model=s.embed_model)
    with owner_connection(ctx) as conn:
        try:
            with tenant_scope(conn, tenant), Progress(*COLUMNS, console=err_console, transient=True) as bar:
                task = bar.add_task(f"asking on {tenant}", total=len(asked))

                def progress(done: int, total: int) -> None:
                    bar.update(task, completed=done, total=total)

                if answers:
                    losses = answer_losses(conn, asked, embedder, ts_config=s.text_search_config,
                                           on_progress=progress)
                else:
                    rows = stage_timings(conn, [q.text for q in asked], embedder,
                                         ts_config=s.text_search_config, on_progress=progress)
        except TenantNotFound as exc:
            if on_tenant:
                raise
            raise InvalidInput(f"no snapshot of {dataset.name!r} yet: run `tortus-pg eval {dataset_path}` first, "
                               "or pass --on-tenant to ask on the workspace's tenant") from exc
    title = f"{dataset.name} on {tenant}: {len(asked)} questions"
    if answers:
        _print_losses(losses, title)
        return
    table = Table(title=title)
    table.add_column("stage")
    for header in ("questions", "mean ms", "p95 ms"):
        table.add_column(header, justify="right")
    for r in rows:
        table.add_row(r.stage, str(r.questions), f"{r.mean_ms:.1f}", f"{r.p95_ms:.1f}")
    console.print(table)


def _print_losses(losses: AnswerLosses, title: str) -> None:
    table = Table(title=title)
    table.add_column("answerable questions")
    table.add_column("count", justify="right")
    for name, count in [("answered", losses.answered), ("answer contains the expected text", losses.matched),
                        ("evidence contains the expected text", losses.in_evidence),
                        ("  answered without it", losses.wrong_with_evidence),
                        ("  withheld", sum(losses.withheld_with_evidence.values()))]:
        table.add_row(name, f"{count} of {losses.answerable}")
    for reason, count in losses.withheld_with_evidence.most_common():
        table.add_row(f"    {reason.name.lower().replace('_', ' ') if reason else 'no reason given'}", str(count))
    if losses.negatives:
        table.add_row("negatives withheld", f"{losses.negatives_withheld} of {losses.negatives}")
    console.print(table)
