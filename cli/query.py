"""`tortus-pg query`: answer a question (tortus mode) or search the tenant's chunks."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

import typer
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from tortus_pg.config import Settings, reveal
from tortus_pg.db import tenant_scope
from tortus_pg.embed import make_embedder
from tortus_pg.engine import Answer, answer
from tortus_pg.llm import ChatClient
from tortus_pg.policy import PORTAL_PREFERENCES, make_policy
from tortus_pg.query.refusal import CHECKS_OF_FORM
from tortus_pg.retrieve import MODES, search
from tortus_pg.synth import LLMSynthesizer

from .context import console, owner_connection, settings

ALL_MODES = ("tortus", *MODES)


def query(
    ctx: typer.Context,
    text: str = typer.Argument(..., help="The question or search terms."),
    mode: str = typer.Option(
        "tortus", "--mode", help=f"tortus answers from the graph; {', '.join(MODES)} only search chunks."
    ),
    k: int = typer.Option(5, "--k", help="Chunks to return (search) or evidence chunks to answer from (tortus)."),
    explain: bool = typer.Option(False, "--explain", help="tortus: show the reasoning path with evidence quotes."),
    as_json: bool = typer.Option(False, "--json", help="Print the full response as JSON."),
    max_hops: int = typer.Option(None, "--max-hops", help="tortus: edges a path may take (default 3)."),
    max_ms: int = typer.Option(None, "--max-ms", help="tortus: time budget in ms (default 3000)."),
    max_tokens: int = typer.Option(None, "--max-tokens", help="tortus: evidence words for synthesis (default 1200)."),
    semantic_group: str = typer.Option(None, "--semantic-group", help="tortus: stay inside this subgraph."),
    portal_preference: str = typer.Option(
        None, "--portal-preference", help=f"tortus: {', '.join(PORTAL_PREFERENCES)} (default auto)."
    ),
    failover_level: int = typer.Option(
        None, "--failover-level", help="tortus: 0 walks within the torus radius (default); 1 or 2 widens a thin walk."
    ),
    local_only: bool = typer.Option(False, "--local-only", help="tortus: no portals, stay in the seeds' subgraphs."),
    no_personalization: bool = typer.Option(
        False, "--no-personalization", help="tortus: seed from search only, not the concepts the question names."
    ),
    traversal: str = typer.Option(None, "--traversal", help="tortus: walk the tables (sql, default) or the "
                                  "Apache AGE mirror (age; `tortus-pg graph sync-age` first)."),
    min_support: float = typer.Option(
        None, "--min-support", help="tortus: the support (0 to 1) an answer read from the evidence needs, else it is "
        "withheld (default: the tenant's, else 0.5)."
    ),
    llm: bool = typer.Option(False, "--llm", help="tortus: write the answer with the configured LLM endpoint."),
    bm25_weight: float = typer.Option(1.0, "--bm25-weight", help="Weight of the BM25 leg in hybrid fusion."),
    vector_weight: float = typer.Option(1.0, "--vector-weight", help="Weight of the vector leg in hybrid fusion."),
    rrf_k: int = typer.Option(60, "--rrf-k", help="RRF constant: larger flattens rank differences."),
) -> None:
    """Ask a question: the answer, the path that reached its evidence and the cited spans (tortus),
    or search chunks with exact BM25, vector or hybrid retrieval."""
    s = settings(ctx)
    if mode not in ALL_MODES:
        raise typer.BadParameter(f"unknown mode {mode!r}; choose from {', '.join(ALL_MODES)}", param_hint="--mode")
    embedder = None if mode == "keyword" else make_embedder(
        s.embedder, dim=s.embedding_dim, base_url=s.embed_base_url, api_key=reveal(s.embed_api_key), model=s.embed_model
    )
    if mode != "tortus":
        with owner_connection(ctx) as conn, tenant_scope(conn, s.tenant):
            hits = search(
                conn, text, mode=mode, k=k, embedder=embedder,  # type: ignore[arg-type]
                bm25_weight=bm25_weight, vector_weight=vector_weight, rrf_k=rrf_k, ts_config=s.text_search_config,
                tenant=s.tenant,
            )
        if as_json:
            print(json.dumps([asdict(h) for h in hits], indent=2))
        else:
            _hits_table(hits)
        return
    policy, warnings = make_policy({
        "max_hops": max_hops, "max_ms": max_ms, "max_tokens": max_tokens, "semantic_group": semantic_group,
        "portal_preference": portal_preference, "failover_level": failover_level, "local_only": local_only,
        "explain": explain, "no_personalization": no_personalization, "traversal": traversal,
        "min_support": min_support,
    })
    with owner_connection(ctx) as conn, tenant_scope(conn, s.tenant):
        result = answer(conn, text, embedder=embedder, policy=policy, k=k, ts_config=s.text_search_config,
                        synthesizer=_synthesizer(s) if llm else None, warnings=warnings)
    if as_json:
        print(json.dumps(result.to_json(), indent=2, default=str))
    else:
        _render(result, explain)


def _synthesizer(s: Settings) -> LLMSynthesizer:
    """The LLM synthesizer at the configured endpoint."""
    if not (s.llm_base_url and s.llm_model):
        raise typer.BadParameter("set llm_base_url and llm_model (tortus.toml or TORTUS_LLM_*)", param_hint="--llm")
    return LLMSynthesizer(ChatClient(s.llm_base_url, reveal(s.llm_api_key), s.llm_model))


def _hits_table(hits: list[Any]) -> None:
    table = Table("#", "score", "bm25", "vector")
    table.add_column("source", no_wrap=True, max_width=40)
    table.add_column("chunk", no_wrap=True, overflow="ellipsis", max_width=60)
    for h in hits:
        snippet = " ".join(h.text.split())
        where = f"{h.uri}" + (f" p.{h.page}" if h.page else "")
        table.add_row(str(h.rank), f"{h.score:.4f}", str(h.bm25_rank or "-"), str(h.vector_rank or "-"), where, snippet)
    console.print(table)


def _quote(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _render(result: Answer, explain: bool) -> None:
    if result.withheld:
        console.print(Text.assemble(("Not enough source-backed evidence to answer", "bold yellow"),
                                    f" (support {result.confidence:.2f})."))
        if result.diagnostics.get("draft"):
            # What the reader would have quoted: a lead to check against the sources, not an answer.
            why = "withheld for the reason below" if result.refusal in CHECKS_OF_FORM else \
                "too weakly supported to answer"
            console.print(f"Closest statements found, {why}:", style="yellow")
            console.print(f"  {result.diagnostics['draft']}", style="dim")
    else:
        console.print(result.answer or "", style="bold")
        short = f"short answer: {result.short_answer}; " if result.short_answer else ""
        console.print(f"{short}confidence {result.confidence:.2f}")
        for claim in result.claims:
            page = f" p.{claim.page}" if claim.page else ""
            chars = f" chars {claim.span[0]}-{claim.span[1]}" if claim.span else ""
            console.print(f"  [{claim.citation}] {claim.uri or '(no source)'}{page}{chars}")
    for warning in result.warnings:
        console.print(f"! {warning}", style="yellow")
    if not explain:
        return
    tree = Tree(Text(result.question, style="bold"))
    nodes: dict[object, Tree] = {}
    for hop in result.path:
        parent = tree if hop.searched else nodes.get(hop.source_id)
        start = "" if parent is not None else f"{hop.source} "  # a concept the question names
        branch = (parent or tree).add(
            Text.assemble(start, (hop.edge_type, "cyan"), f" → {hop.target}  ", (hop.reason or "", "dim"))
        )
        for item in hop.evidence[:1]:
            branch.add(Text.assemble((f"“{_quote(item.text)}”", "green"), " ", (item.uri or "", "dim")))
        nodes[hop.target_id] = branch
    console.print(tree)
    if result.diagnostics.get("answer_type"):
        console.print(f"the question asks for {result.diagnostics['answer_type']}", style="dim")
    budget = ", ".join(f"{name} {b['used']}/{b['limit']}" for name, b in result.budget.to_json().items())
    console.print(f"budget: {budget}; trace {result.trace_id}", style="dim")
