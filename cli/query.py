"""`tortus-pg query`: search the tenant's chunks from the command line."""

from __future__ import annotations

import json
from dataclasses import asdict

import typer
from rich.table import Table

from tortus_pg.db import tenant_scope
from tortus_pg.embed import make_embedder
from tortus_pg.retrieve import MODES, search

from .context import console, owner_connection, settings


def query(
    ctx: typer.Context,
    text: str = typer.Argument(..., help="The question or search terms."),
    mode: str = typer.Option("hybrid", "--mode", help=f"Retrieval mode: {', '.join(MODES)}."),
    k: int = typer.Option(5, "--k", help="How many chunks to return."),
    bm25_weight: float = typer.Option(1.0, "--bm25-weight", help="Weight of the BM25 leg in hybrid fusion."),
    vector_weight: float = typer.Option(1.0, "--vector-weight", help="Weight of the vector leg in hybrid fusion."),
    rrf_k: int = typer.Option(60, "--rrf-k", help="RRF constant: larger flattens rank differences."),
    as_json: bool = typer.Option(False, "--json", help="Print the hits as JSON."),
) -> None:
    """Search the knowledge base: exact BM25, vector or hybrid (weighted RRF) retrieval in SQL."""
    s = settings(ctx)
    embedder = None if mode == "keyword" else make_embedder(
        s.embedder, dim=s.embedding_dim, base_url=s.embed_base_url, api_key=s.embed_api_key, model=s.embed_model
    )
    with owner_connection(ctx) as conn, tenant_scope(conn, s.tenant):
        hits = search(
            conn, text, mode=mode, k=k, embedder=embedder,  # type: ignore[arg-type]
            bm25_weight=bm25_weight, vector_weight=vector_weight, rrf_k=rrf_k, ts_config=s.text_search_config,
        )
    if as_json:
        print(json.dumps([asdict(h) for h in hits], indent=2))
        return
    table = Table("#", "score", "bm25", "vector")
    table.add_column("source", no_wrap=True, max_width=40)
    table.add_column("chunk", no_wrap=True, overflow="ellipsis", max_width=60)
    for h in hits:
        snippet = " ".join(h.text.split())
        where = f"{h.uri}" + (f" p.{h.page}" if h.page else "")
        table.add_row(str(h.rank), f"{h.score:.4f}", str(h.bm25_rank or "-"), str(h.vector_rank or "-"), where, snippet)
    console.print(table)
