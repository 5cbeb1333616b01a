"""Ingest many sources: read, parse, chunk, extract, embed, store — one transaction per source.

One bad source never aborts the batch, and an interrupted run leaves every source either
fully old or fully new, because each source commits on its own.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

import psycopg

from tortus_pg import age, telemetry
from tortus_pg.cost import Costs, ledger_of
from tortus_pg.db import require_idle, tenant_scope
from tortus_pg.embed import Embedder
from tortus_pg.errors import InvalidInput, TortusError
from tortus_pg.ingest.budget import budget_for
from tortus_pg.ingest.chunking import chunk_document
from tortus_pg.ingest.extract import extract_concepts
from tortus_pg.ingest.fetch import Validators, fetch_url
from tortus_pg.ingest.llm_extract import merged
from tortus_pg.ingest.parse import detect_kind, parse_document
from tortus_pg.ingest.sources import SourceSpec
from tortus_pg.ingest.store import (
    SourceRecord,
    StoreResult,
    current_source,
    remove_source,
    set_readers,
    store_document,
    stored_url,
)
from tortus_pg.ingest.types import Chunk, Document, Extraction, Limits


@dataclass
class IngestSummary:
    results: list[StoreResult] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for r in self.results if r.status == status)

    @property
    def warned(self) -> list[StoreResult]:
        return [r for r in self.results if r.warnings]


class Extractor(Protocol):
    def extract(self, doc: Document, chunks: list[Chunk], *, title: str | None = None) -> Extraction: ...


@dataclass(frozen=True)
class IngestOptions:
    limits: Limits = Limits()
    allow_private_urls: bool = False
    ts_config: str = "english"
    # An extra extractor (e.g. LLMExtractor) whose output is merged with the deterministic one.
    extra_extractor: Extractor | None = None


def _read(spec: SourceSpec, options: IngestOptions, validators: Validators | None = None) -> SourceRecord | None:
    """The source's bytes with what to store of them; None when a URL answers that the copy its
    `validators` describe is still current (304)."""
    if spec.problem:
        raise InvalidInput(spec.problem)
    if spec.is_url:
        snap = fetch_url(spec.location, limits=options.limits, allow_private=options.allow_private_urls,
                         validators=validators)
        if snap is None:
            return None
        return SourceRecord(
            uri=spec.uri,
            kind="url",
            sha256=snap.sha256,
            raw=snap.data,
            content_type=snap.content_type,
            etag=snap.etag,
            last_modified=snap.last_modified,
            retrieved_at=snap.retrieved_at,
            subgraphs=spec.subgraphs,
            metadata={**spec.metadata, "final_url": snap.final_url, "fetch_warnings": list(snap.warnings)},
            readers=spec.readers,
        )
    path = Path(spec.location)
    size = path.stat().st_size
    if size > options.limits.max_file_bytes:
        raise InvalidInput(
            f"{path}: {size / 1e6:.1f} MB exceeds the {options.limits.max_file_bytes / 1e6:.1f} MB limit"
            " (max_file_bytes)"
        )
    data = path.read_bytes()
    return SourceRecord(
        uri=spec.uri,
        kind=detect_kind(path.name, None),
        sha256=hashlib.sha256(data).hexdigest(),
        raw=data,
        subgraphs=spec.subgraphs,
        metadata=dict(spec.metadata),
        readers=spec.readers,
    )


def ingest_one(
    conn: psycopg.Connection, tenant: str, spec: SourceSpec, embedder: Embedder, options: IngestOptions
) -> StoreResult:
    """Ingest one source in its own transaction. A URL stored before is fetched conditionally:
    when the server says it has not changed (304), nothing is fetched or stored again."""
    result = _ingest_one(conn, tenant, spec, embedder, options)
    if result.status != "unchanged":
        age.follow(conn, tenant)
    return result


def _ingest_one(
    conn: psycopg.Connection, tenant: str, spec: SourceSpec, embedder: Embedder, options: IngestOptions
) -> StoreResult:
    stored = None
    if spec.is_url and not spec.problem:
        with tenant_scope(conn, tenant):
            stored = stored_url(conn, spec.uri)
    record = _read(spec, options, Validators(stored[1], stored[2]) if stored else None)
    if record is None:
        assert stored is not None
        with tenant_scope(conn, tenant):
            set_readers(conn, stored[0], spec.readers)
        return StoreResult(spec.uri, "unchanged", stored[0])
    name = spec.location.rsplit("/", 1)[-1]
    # Files are re-read from disk on demand; only URL snapshots keep their raw bytes.
    return _store(conn, tenant, record, name, spec.metadata.get("title"), embedder, options, keep_raw=spec.is_url)


def ingest_bytes(
    conn: psycopg.Connection, tenant: str, name: str, data: bytes, embedder: Embedder, options: IngestOptions,
    *, uri: str | None = None, subgraphs: tuple[str, ...] = (), readers: tuple[str, ...] | None = None,
) -> StoreResult:
    """Ingest a document handed over as bytes (an upload, a text), its kind read from its `name`;
    nothing on disk holds it, so its bytes are kept as a URL snapshot's are."""
    if len(data) > options.limits.max_file_bytes:
        raise InvalidInput(f"{name}: {len(data) / 1e6:.1f} MB exceeds the "
                           f"{options.limits.max_file_bytes / 1e6:.1f} MB limit (max_file_bytes)")
    record = SourceRecord(uri=uri or name, kind=detect_kind(name, None), sha256=hashlib.sha256(data).hexdigest(),
                          raw=data, subgraphs=subgraphs, readers=readers)
    result = _store(conn, tenant, record, name, None, embedder, options, keep_raw=True)
    if result.status != "unchanged":
        age.follow(conn, tenant)
    return result


def _store(
    conn: psycopg.Connection, tenant: str, record: SourceRecord, name: str, title: str | None, embedder: Embedder,
    options: IngestOptions, *, keep_raw: bool,
) -> StoreResult:
    """Parse, chunk, extract and store a source read into `record`, unless it is stored unchanged:
    one transaction, holding the source's lock, so two ingests of one source take turns (the
    second finds it unchanged) instead of colliding on its rows."""
    with tenant_scope(conn, tenant):
        conn.execute("select pg_advisory_xact_lock(hashtextextended(tortus.current_tenant() || ' ' || %s, 0))",
                     [record.uri])
        current = current_source(conn, record.uri, record.sha256)
        if current is not None:
            set_readers(conn, current, record.readers)
            return StoreResult(record.uri, "unchanged", current)
        assert record.raw is not None
        with telemetry.span("tortus.ingest.source", source_kind=record.kind, bytes=len(record.raw)) as span:
            costs = Costs()
            with costs.step("parse", "tortus.ingest.parse"):
                doc = parse_document(record.raw, name=name, content_type=record.content_type, limits=options.limits)
            with costs.step("chunk", "tortus.ingest.chunk"):
                chunks = chunk_document(doc, budget=budget_for(embedder.name))
            title = title or doc.title
            extra = options.extra_extractor
            with costs.step("extract", "tortus.ingest.extract", ledger_of(extra), chunks=len(chunks)):
                extraction = extract_concepts(doc, chunks, title=title)
                if extra is not None:
                    extraction = merged(extraction, extra.extract(doc, chunks, title=title))
            stored = replace(record, raw=record.raw if keep_raw else None,
                             metadata={**record.metadata, "cost": costs.entries})
            result = store_document(conn, stored, doc, chunks, extraction, embedder, ts_config=options.ts_config)
            span.set(source_id=result.source_id, status=result.status, chunks=result.chunks,
                     concepts=result.concepts, edges=result.edges)
            return result


def ingest(
    conn: psycopg.Connection,
    tenant: str,
    specs: Sequence[SourceSpec],
    embedder: Embedder,
    options: IngestOptions = IngestOptions(),
    on_progress: Callable[[SourceSpec, StoreResult | None], None] | None = None,
) -> IngestSummary:
    """Ingest every source, each in its own committed transaction; collect per-source failures.
    A mirror of the tenant's graph in Apache AGE is brought up to date once, at the end."""
    require_idle(conn, "ingest")
    summary = IngestSummary()
    for spec in specs:
        result: StoreResult | None = None
        try:
            result = _ingest_one(conn, tenant, spec, embedder, options)
            summary.results.append(result)
        except (TortusError, OSError) as exc:
            summary.failed.append((spec.uri or spec.location, str(exc)))
        except psycopg.errors.DataError as exc:
            summary.failed.append((spec.uri or spec.location, f"rejected by the database: {exc}"))
        if on_progress is not None:
            on_progress(spec, result)
    if any(r.status != "unchanged" for r in summary.results):
        age.follow(conn, tenant)
    return summary


def remove(conn: psycopg.Connection, tenant: str, uri: str) -> bool:
    """Remove a source and what only it supported; return False if it was not there."""
    with tenant_scope(conn, tenant):
        removed = remove_source(conn, uri)
    if removed:
        age.follow(conn, tenant)
    return removed
