"""`tortus-pg ingest` and `tortus-pg sources …`."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from tortus_pg.db import tenant_scope
from tortus_pg.embed import make_embedder
from tortus_pg.errors import InvalidInput
from tortus_pg.ingest import pipeline, sources
from tortus_pg.ingest.store import source_summary

from .context import console, err_console, owner_connection, settings

sources_app = typer.Typer(help="List, inspect and remove ingested sources.", no_args_is_help=True)


def ingest(
    ctx: typer.Context,
    targets: list[str] = typer.Argument(None, help="Files, directories or http(s) URLs."),
    manifest: Path = typer.Option(
        None, "--manifest", "-m", help="A sources.toml listing paths/URLs with subgraphs and metadata."
    ),
    demo: bool = typer.Option(False, "--demo", help="Ingest the built-in demo corpus."),
    subgraph: str = typer.Option(
        None, "--subgraph", "-s", help="Put every source in this subgraph (default: its directory name)."
    ),
    include: list[str] = typer.Option(
        [], "--include", help="Glob on paths inside directories to include (repeatable)."
    ),
    exclude: list[str] = typer.Option([], "--exclude", help="Glob on paths inside directories to skip (repeatable)."),
    allow_private_urls: bool = typer.Option(
        False, "--allow-private-urls", help="Allow URLs on loopback/private networks."
    ),
) -> None:
    """Ingest documents (.md .mdx .txt .html .htm .pdf, directories, URLs) into the concept graph."""
    s = settings(ctx)
    specs = []
    if demo:
        specs += sources.from_manifest(sources.demo_manifest(), uri_base="demo")
    if manifest is not None:
        specs += sources.from_manifest(manifest)
    specs += sources.resolve(list(targets or []), subgraph, tuple(include), tuple(exclude))
    if not specs:
        raise InvalidInput("nothing to ingest: give files, directories, URLs, --manifest or --demo")
    embedder = make_embedder(
        s.embedder, dim=s.embedding_dim, base_url=s.embed_base_url, api_key=s.embed_api_key, model=s.embed_model
    )
    options = pipeline.IngestOptions(allow_private_urls=allow_private_urls, ts_config=s.text_search_config)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with owner_connection(ctx) as conn, Progress(*columns, console=err_console, transient=True) as bar:
        task = bar.add_task("ingesting", total=len(specs))
        summary = pipeline.ingest(
            conn,
            s.tenant,
            specs,
            embedder,
            options,
            on_progress=lambda spec, _: bar.update(task, advance=1, description=Path(spec.location).name[:40]),
        )
    chunks = sum(r.chunks for r in summary.results)
    console.print(
        f"{summary.count('ingested')} ingested, {summary.count('updated')} updated, "
        f"{summary.count('unchanged')} unchanged, {len(summary.warned)} with warnings, "
        f"{len(summary.failed)} failed ({chunks} chunks written)"
    )
    for r in summary.warned:
        console.print(f"[yellow]warning[/] {r.uri}: {'; '.join(r.warnings)}")
    for uri, reason in summary.failed:
        console.print(f"[red]failed[/] {uri}: {reason}")
    if summary.failed:
        raise typer.Exit(1)


@sources_app.command("list")
def sources_list(ctx: typer.Context) -> None:
    """List the tenant's sources with chunk and span counts."""
    s = settings(ctx)
    with owner_connection(ctx) as conn, tenant_scope(conn, s.tenant):
        rows = source_summary(conn)
    table = Table("uri", "kind", "subgraphs", "chunks", "spans", "warnings")
    for r in rows:
        table.add_row(
            r["uri"], r["kind"], ",".join(r["subgraphs"]), str(r["chunks"]), str(r["spans"]), str(len(r["warnings"]))
        )
    console.print(table)


@sources_app.command("show")
def sources_show(ctx: typer.Context, uri: str = typer.Argument(..., help="The source's URI as listed.")) -> None:
    """Show one source's snapshot details."""
    s = settings(ctx)
    with owner_connection(ctx) as conn, tenant_scope(conn, s.tenant):
        row = next((r for r in source_summary(conn) if r["uri"] == uri), None)
    if row is None:
        raise InvalidInput(f"no source {uri!r}; see `tortus-pg sources list`")
    for key, value in row.items():
        console.print(f"{key:>10}: {value}")


@sources_app.command("remove")
def sources_remove(ctx: typer.Context, uri: str = typer.Argument(..., help="The source's URI as listed.")) -> None:
    """Remove a source and everything derived only from it."""
    s = settings(ctx)
    with owner_connection(ctx) as conn:
        if not pipeline.remove(conn, s.tenant, uri):
            raise InvalidInput(f"no source {uri!r}; see `tortus-pg sources list`")
    console.print(f"removed {uri}")
