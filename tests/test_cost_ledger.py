"""The cost ledger: each ingest step's and each question's stages' milliseconds and tokens,
kept with the source and the trace, and read in SQL through `tortus.cost_ledger`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from openai_server import FakeOpenAI, openai_server
from tortus_pg.cli.main import app
from typer.testing import CliRunner

from tortus_pg import migrate
from tortus_pg.db import connect, tenant_scope
from tortus_pg.engine import answer
from tortus_pg.ingest import pipeline, sources
from tortus_pg.openai_embed import OpenAIEmbedder
from tortus_pg.tenants import create_tenant

DOCS = {"billing.md": "# Billing Service\n\nThe Billing Service is owned by the Ledger Team. It retries a failed "
                      "charge 4 times.\n\n## Limits\n\nIt accepts 200 charges per second.\n",
        "ledger.md": "# Ledger Team\n\nThe Ledger Team is led by Ines Duarte.\n"}
LEDGER = "select work, step, ms, tokens from tortus.cost_ledger where ref = %s and work = %s order by step"


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with openai_server(dim=64) as state:
        yield state


@pytest.fixture
def url(fresh_db: Callable[..., str], tmp_path: Path) -> str:
    """A migrated database of the test's own, and the documents to ingest in tmp_path."""
    for name, text in DOCS.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    made = fresh_db()
    migrate.upgrade(made)
    return made


def _ingest(url: str, root: Path, embedder: OpenAIEmbedder) -> dict[str, int]:
    with connect(url) as conn:
        create_tenant(conn, "costs")
        conn.commit()
        summary = pipeline.ingest(conn, "costs", sources.from_directory(root, ()), embedder)
        assert summary.count("ingested") == 2, summary.failed
        return {r.uri.rsplit("/", 1)[-1]: r.source_id for r in summary.results}


def test_ingest_and_questions_are_costed_step_by_step(url: str, tmp_path: Path, server: FakeOpenAI) -> None:
    embedder = OpenAIEmbedder(server.base_url, "sk-test", "test-embed", dim=64)
    ids = _ingest(url, tmp_path, embedder)
    # The fake server counts one token per word embedded, as a paid API would bill them.
    billed = sum(len(" ".join(r.body["input"]).split()) for r in server.requests if r.path.endswith("/embeddings"))
    with connect(url) as conn, tenant_scope(conn, "costs") as scoped:
        rows = {sid: scoped.execute(LEDGER, [sid, "ingest"]).fetchall() for sid in ids.values()}
        assert {step for r in rows.values() for _, step, _, _ in r} == {"parse", "chunk", "extract", "embed"}
        assert all(ms is not None and ms >= 0 for r in rows.values() for _, _, ms, _ in r)
        embed_tokens = [tokens for r in rows.values() for _, step, _, tokens in r if step == "embed"]
        assert sum(embed_tokens) in range(billed - 1, billed + 2) and all(t > 0 for t in embed_tokens)  # shares rounded
        question = answer(scoped, "How many times does the Billing Service retry a failed charge?",
                          embedder=embedder, store=True)
        assert question.trace_id is not None
        stages = scoped.execute(LEDGER, [question.trace_id, "query"]).fetchall()
        names = [step for _, step, _, _ in stages]
        assert {"seed", "walk", "synthesis", "total"} <= set(names)
        total = next(row for row in stages if row[1] == "total")
        assert total[3] == question.budget.tokens.used and total[2] == question.budget.ms.used
    with connect(url) as conn:
        create_tenant(conn, "costs-other")
        with tenant_scope(conn, "costs-other") as other:  # a tenant sees its own costs only
            assert other.execute("select count(*) from tortus.cost_ledger").fetchone() == (0,)


def test_sources_show_prints_what_the_source_cost(url: str, tmp_path: Path, server: FakeOpenAI) -> None:
    ids = _ingest(url, tmp_path, OpenAIEmbedder(server.base_url, "sk-test", "test-embed", dim=64))
    with connect(url) as conn, tenant_scope(conn, "costs") as scoped:
        uri = scoped.execute("select uri from tortus.source where source_id = %s", [ids["billing.md"]]).fetchone()[0]  # type: ignore[index]
    shown = CliRunner().invoke(app, ["--database-url", url, "--tenant", "costs", "sources", "show", uri])
    assert shown.exit_code == 0, shown.output
    assert "embed_ms" in shown.output and "embed_tokens" in shown.output and "parse_ms" in shown.output
