"""Ingest benchmark corpora (one passage per JSONL line) through the same pipeline as files.

Passages are short, so they are embedded in large batches and stored many per transaction and
per statement (`store_documents`); each passage still goes through chunking and extraction.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

import psycopg

from tortus_pg import age
from tortus_pg.db import require_idle, tenant_scope
from tortus_pg.embed import Embedder
from tortus_pg.errors import InvalidInput
from tortus_pg.ingest.budget import budget_for
from tortus_pg.ingest.chunking import ChunkBudget, chunk_document
from tortus_pg.ingest.extract import extract_concepts
from tortus_pg.ingest.pipeline import IngestSummary
from tortus_pg.ingest.store import Prepared, SourceRecord, store_documents
from tortus_pg.ingest.types import Document


@dataclass(frozen=True)
class Passage:
    id: str
    title: str
    text: str

    @property
    def document(self) -> Document:
        body = f"{self.title}\n\n{self.text}" if self.title else self.text
        return Document(text=body, kind="text", title=self.title or None)


def read_passages(path: Path, limit: int | None = None) -> Iterator[Passage]:
    """Passages from a corpus.jsonl[.gz] with `id`/`_id`, `title` and `text` fields."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as lines:
        for number, line in enumerate(islice(lines, limit), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                pid = str(row.get("id", row.get("_id")))
                yield Passage(pid, str(row.get("title") or ""), str(row["text"]))
            except (json.JSONDecodeError, KeyError, AttributeError) as exc:
                raise InvalidInput(f"{path}:{number}: not a passage object with id, title and text ({exc})") from None


def _batches(items: Iterable[Passage], size: int) -> Iterator[list[Passage]]:
    it = iter(items)
    while batch := list(islice(it, size)):
        yield batch


def _prepared(p: Passage, uri_prefix: str, subgraph: str, budget: ChunkBudget) -> Prepared:
    """A passage parsed, chunked and extracted, with its source record."""
    doc = p.document
    chunks = chunk_document(doc, budget=budget)
    record = SourceRecord(uri=f"{uri_prefix}{p.id}", kind="text",
                          sha256=hashlib.sha256(doc.text.encode("utf-8")).hexdigest(), subgraphs=(subgraph,),
                          metadata={"title": p.title, "passage_id": p.id})
    return Prepared(record, doc, chunks, extract_concepts(doc, chunks, title=doc.title))


def _distinct_uris(prepared: list[Prepared]) -> Iterator[list[Prepared]]:
    """The batch in runs of distinct sources: a passage id seen again in the batch starts a new
    run, so a later passage replaces an earlier one as it would stored one by one."""
    run: list[Prepared] = []
    seen: set[str] = set()
    for p in prepared:
        if p.record.uri in seen:
            yield run
            run, seen = [], set()
        run.append(p)
        seen.add(p.record.uri)
    if run:
        yield run


def ingest_passages(
    conn: psycopg.Connection,
    tenant: str,
    passages: Iterable[Passage],
    embedder: Embedder,
    *,
    uri_prefix: str,
    subgraph: str,
    batch_size: int = 256,
    ts_config: str = "english",
    on_batch: Callable[[int], None] | None = None,
) -> IngestSummary:
    """Store passages as sources `<uri_prefix><id>`, one committed transaction per batch."""
    require_idle(conn, "corpus ingestion")
    summary = IngestSummary()
    budget = budget_for(embedder.name)
    for batch in _batches(passages, batch_size):
        prepared = [_prepared(p, uri_prefix, subgraph, budget) for p in batch]
        with tenant_scope(conn, tenant):
            for part in _distinct_uris(prepared):
                summary.results += store_documents(conn, part, embedder, ts_config=ts_config)
        if on_batch is not None:
            on_batch(len(batch))
    age.follow(conn, tenant)
    return summary
