"""Ingest benchmark corpora (one passage per JSONL line) through the same pipeline as files.

Passages are short, so they are embedded in large batches and stored many per transaction;
each passage still goes through chunking, extraction and `store_document`.
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

from tortus_pg.db import require_idle, tenant_scope
from tortus_pg.embed import Embedder
from tortus_pg.errors import InvalidInput
from tortus_pg.ingest.chunking import chunk_document
from tortus_pg.ingest.embeddings import embed_cached
from tortus_pg.ingest.extract import extract_concepts
from tortus_pg.ingest.pipeline import IngestSummary
from tortus_pg.ingest.store import SourceRecord, chunk_context, embedding_text, store_document
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
    for batch in _batches(passages, batch_size):
        prepared = []
        for p in batch:
            doc = p.document
            chunks = chunk_document(doc)
            prepared.append((p, doc, chunks, extract_concepts(doc, chunks, title=doc.title)))
        with tenant_scope(conn, tenant):
            texts = [
                embedding_text(chunk_context(p.title, c), c) for p, _, chunks, _ in prepared for c in chunks
            ]
            embed_cached(conn, embedder, texts)
            for p, doc, chunks, extraction in prepared:
                record = SourceRecord(
                    uri=f"{uri_prefix}{p.id}",
                    kind="text",
                    sha256=hashlib.sha256(doc.text.encode("utf-8")).hexdigest(),
                    subgraphs=(subgraph,),
                    metadata={"title": p.title, "passage_id": p.id},
                )
                summary.results.append(
                    store_document(conn, record, doc, chunks, extraction, embedder, ts_config=ts_config)
                )
        if on_batch is not None:
            on_batch(len(batch))
    return summary
