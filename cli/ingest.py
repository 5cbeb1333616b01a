"""`tortus-pg ingest` and `tortus-pg sources …`."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

from tortus_pg import progress
from tortus_pg.config import Settings, reveal
from tortus_pg.db import check_groups, tenant_scope
from tortus_pg.embed import make_embedder
from tortus_pg.errors import ConfigError, InvalidInput
from tortus_pg.indexing import IndexReport, build_index, index_stale
from tortus_pg.ingest import pipeline, sources
from tortus_pg.ingest.llm_extract import LLMExtractor
from tortus_pg.ingest.store import source_summary
from tortus_pg.ingest.types import Limits
from tortus_pg.llm import ChatClient

from .context import console, err_console, owner_connection, settings

sources_app = typer.Typer(help="List, inspect and remove ingested sources.", no_args_is_help=True)


def ingest(
    ctx: typer.Context,
    targets: list[str] = typer.Argument(None, help="Files, directories or http(s) URLs."),
    manifest: Path = typer.Option(None, "--manifest", "-m", help="A sources.toml of paths/URLs with subgraphs."),
    demo: bool = typer.Option(False, "--demo", help="Ingest the built-in demo corpus."),
    subgraph: str = typer.Option(None, "--subgraph", "-s", help="Subgraph for every source (default: its folder)."),
    include: list[str] = typer.Option([], "--include", help="Glob on paths inside directories to include."),
    exclude: list[str] = typer.Option([], "--exclude", help="Glob on paths inside directories to skip."),
    allow_private_urls: bool = typer.Option(False, "--allow-private-urls", help="Allow loopback/private URLs."),
    reindex: bool = typer.Option(True, "--index/--no-index", help="Lay out the graph and rebuild portals after."),
    llm: bool = typer.Option(False, "--llm", help="Also extract with the LLM at TORTUS_LLM_BASE_URL (merged)."),
    max_mb: float = typer.Option(20.0, "--max-mb", help="Largest file or URL response to accept, in MB."),
    reader: list[str] = typer.Option(None, "--reader", help="Open these sources only to this group (repeat for "
                                     "several; a manifest entry's own readers win). Default: as stored; a new "
                                     "source is open to everyone in the tenant."),
) -> None:
    """Ingest documents (.md .mdx .txt .html .htm .pdf, directories, URLs) into the concept graph."""
    s = settings(ctx)
    specs = _specs(targets, manifest, demo, subgraph, include, exclude)
    readers = check_groups(reader or None)
    if readers is not None:
        specs = [spec if spec.readers is not None else replace(spec, readers=readers) for spec in specs]
    embedder = make_embedder(
        s.embedder, dim=s.embedding_dim, base_url=s.embed_base_url, api_key=reveal(s.embed_api_key), model=s.embed_model
    )
    extractor = llm_extractor(s) if llm else None
    if not 0 < max_mb <= 1024:
        raise InvalidInput("--max-mb must be between 0 and 1024")
    size = int(max_mb * 1_000_000)
    options = pipeline.IngestOptions(
        limits=Limits(max_file_bytes=size, max_response_bytes=size),
        allow_private_urls=allow_private_urls,
        ts_config=s.text_search_config,
        extra_extractor=extractor,
    )
    columns = (TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    report = None
    with owner_connection(ctx) as conn, Progress(*columns, console=err_console, transient=True) as bar, \
            progress.listening(_inner_bar(bar)):
        task = bar.add_task("ingesting", total=len(specs))
        summary = pipeline.ingest(
            conn,
            s.tenant,
            specs,
            embedder,
            options,
            on_progress=lambda spec, _: bar.update(task, advance=1, description=Path(spec.location).name[:40]),
        )
        changed = summary.count("ingested") or summary.count("updated")
        if reindex and (changed or (summary.count("unchanged") and index_stale(conn, s.tenant))):
            bar.update(task, description="indexing")
            report = build_index(conn, s.tenant)
    _print_summary(summary, report, extractor)
    if summary.failed:
        raise typer.Exit(1)


def _inner_bar(bar: Progress) -> progress.Listener:
    """A second bar for the work inside one source (texts embedded, LLM calls) and the index
    stages, shown while it runs."""
    tasks: dict[str, TaskID] = {}

    def update(step: str, done: int, total: int) -> None:
        key = step.split(":")[0]  # the index's stages share one bar
        if key not in tasks:
            tasks[key] = bar.add_task(step, total=total)
        bar.update(tasks[key], description=step, completed=done, total=total, visible=done < total)

    return update


def _specs(
    targets: list[str] | None, manifest: Path | None, demo: bool, subgraph: str | None, include: list[str],
    exclude: list[str],
) -> list[sources.SourceSpec]:
    """The sources the command names: the demo's, a manifest's, and the targets'."""
    specs = []
    if demo:
        specs += sources.from_manifest(sources.demo_manifest(), uri_base="demo")
    if manifest is not None:
        specs += sources.from_manifest(manifest)
    specs += sources.resolve(list(targets or []), subgraph, tuple(include), tuple(exclude))
    if not specs:
        raise InvalidInput("nothing to ingest: give files, directories, URLs, --manifest or --demo")
    return specs


def _print_summary(
    summary: pipeline.IngestSummary, report: IndexReport | None, extractor: LLMExtractor | None,
) -> None:
    """What was ingested, the index rebuilt, the LLM's token ledger, and every source that
    warned or failed."""
    chunks = sum(r.chunks for r in summary.results)
    console.print(
        f"{summary.count('ingested')} ingested, {summary.count('updated')} updated, "
        f"{summary.count('unchanged')} unchanged, {len(summary.warned)} with warnings, "
        f"{len(summary.failed)} failed ({chunks} chunks written)"
    )
    if report is not None:
        print_index_report(report)
    if extractor is not None:
        ledger = extractor.ledger
        console.print(
            f"llm: {ledger.requests} requests, {ledger.retries} retries, "
            f"{ledger.prompt_tokens} prompt + {ledger.completion_tokens} completion tokens"
        )
    for r in summary.warned:
        console.print(Text.assemble(("warning", "yellow"), f" {r.uri}: {'; '.join(r.warnings)}"))
    for uri, reason in summary.failed:
        console.print(Text.assemble(("failed", "red"), f" {uri}: {reason}"))


def llm_extractor(s: Settings) -> LLMExtractor:
    if not (s.llm_base_url and s.llm_model):
        raise ConfigError("--llm needs llm_base_url and llm_model (TORTUS_LLM_BASE_URL, TORTUS_LLM_MODEL)")
    return LLMExtractor(ChatClient(s.llm_base_url, reveal(s.llm_api_key), s.llm_model))


def print_index_report(report: IndexReport) -> None:
    console.print(
        f"index: {report.chunks_placed} chunks and {report.concepts_placed} concepts placed on the {report.layout} "
        f"layout, {report.portals} portals, vector index {report.vector_index or 'none'}"
    )


def index(
    ctx: typer.Context,
    layout: str = typer.Option("torus", "--layout", help="Coordinates: torus, euclidean or random (for ablations)."),
    seed: int = typer.Option(0, help="Seed for the random layout."),
) -> None:
    """Lay out the graph on the torus, place concepts, rebuild portals and the HNSW index."""
    s = settings(ctx)
    columns = (TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn())
    with owner_connection(ctx) as conn, Progress(*columns, console=err_console, transient=True) as bar, \
            progress.listening(_inner_bar(bar)):
        report = build_index(conn, s.tenant, layout=layout, seed=seed)
    print_index_report(report)


@sources_app.command("list")
def sources_list(ctx: typer.Context) -> None:
    """List the tenant's sources with chunk and span counts."""
    s = settings(ctx)
    with owner_connection(ctx) as conn, tenant_scope(conn, s.tenant):
        rows = source_summary(conn)
    table = Table("uri", "kind", "subgraphs", "readers", "chunks", "spans", "warnings")
    for r in rows:
        readers = ",".join(r["readers"]) if r["readers"] is not None else "everyone"
        table.add_row(r["uri"], r["kind"], ",".join(r["subgraphs"]), readers, str(r["chunks"]), str(r["spans"]),
                      str(len(r["warnings"])))
    console.print(table)


@sources_app.command("show")
def sources_show(ctx: typer.Context, uri: str = typer.Argument(..., help="The source's URI as listed.")) -> None:
    """Show one source's snapshot details."""
    s = settings(ctx)
    with owner_connection(ctx) as conn, tenant_scope(conn, s.tenant):
        row = next((r for r in source_summary(conn) if r["uri"] == uri), None)
    if row is None:
        raise InvalidInput(f"no source {uri!r}; see `tortus-pg sources list`")
    cost = row.pop("cost")
    for key, value in row.items():
        console.print(f"{key:>10}: {value}")
    console.print("      cost: " + (", ".join(f"{k} {v}" for k, v in sorted(cost.items())) or "not recorded"))


@sources_app.command("remove")
def sources_remove(ctx: typer.Context, uri: str = typer.Argument(..., help="The source's URI as listed.")) -> None:
    """Remove a source and everything derived only from it."""
    s = settings(ctx)
    with owner_connection(ctx) as conn:
        if not pipeline.remove(conn, s.tenant, uri):
            raise InvalidInput(f"no source {uri!r}; see `tortus-pg sources list`")
    console.print(f"removed {uri}")
