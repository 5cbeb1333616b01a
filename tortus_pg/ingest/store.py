"""Write one parsed document into the graph, atomically.

Runs inside a tenant scope (`tortus_pg.db.tenant_scope`): every statement is subject to
row-level security and stamps `tortus.current_tenant()`. Re-ingesting the same bytes is a
no-op; changed bytes replace everything derived from the source; concepts shared with
other sources survive and keep only the evidence that still supports them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import psycopg
from psycopg.types.json import Jsonb

from tortus_pg.embed import Embedder
from tortus_pg.ingest.embeddings import embed_cached
from tortus_pg.ingest.types import Chunk, Document, Extraction

Status = Literal["ingested", "updated", "unchanged"]
MENTION_WEIGHT = 0.6
NEXT_WEIGHT = 0.5


@dataclass(frozen=True)
class SourceRecord:
    """What is known about a source besides its parsed text."""

    uri: str
    kind: str  # markdown, text, html, pdf, url
    sha256: str
    raw: bytes | None = None
    content_type: str | None = None
    etag: str | None = None
    last_modified: str | None = None
    retrieved_at: datetime | None = None
    subgraphs: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class StoreResult:
    uri: str
    status: Status
    source_id: int
    chunks: int = 0
    concepts: int = 0
    edges: int = 0
    warnings: tuple[str, ...] = ()


def store_document(
    conn: psycopg.Connection,
    record: SourceRecord,
    doc: Document,
    chunks: Sequence[Chunk],
    extraction: Extraction,
    embedder: Embedder,
    *,
    ts_config: str = "english",
) -> StoreResult:
    """Insert or replace one source and everything derived from it; the caller commits."""
    existing = conn.execute("select source_id, sha256 from tortus.source where uri = %s", [record.uri]).fetchone()
    warnings = tuple(doc.warnings) + tuple(extraction.warnings)
    if existing is not None and existing[1] == record.sha256:
        return StoreResult(record.uri, "unchanged", existing[0], warnings=warnings)
    if existing is not None:
        _clear_derived(conn, existing[0])
    source_id = _upsert_source(conn, record, doc, warnings)
    _ensure_subgraphs(conn, record.subgraphs)

    chunk_ids = _insert_chunks(conn, source_id, record, chunks, embedder, ts_config)
    concept_ids = _upsert_concepts(conn, extraction)
    edges = _insert_edges(conn, source_id, chunk_ids, concept_ids, extraction)
    _memberships(conn, record.subgraphs, [*chunk_ids, *concept_ids.values()])
    status: Status = "updated" if existing is not None else "ingested"
    return StoreResult(record.uri, status, source_id, len(chunk_ids), len(concept_ids), edges, warnings)


def remove_source(conn: psycopg.Connection, uri: str) -> bool:
    """Delete a source and what only it supported; return False if there was none."""
    row = conn.execute("select source_id from tortus.source where uri = %s", [uri]).fetchone()
    if row is None:
        return False
    _clear_derived(conn, row[0])
    conn.execute("delete from tortus.source where source_id = %s", [row[0]])
    return True


def _clear_derived(conn: psycopg.Connection, source_id: int) -> None:
    # Chunk nodes cascade to their edges, spans and BM25 postings; concept-level edges and
    # nodes are shared, so they go only once no evidence span supports them any more.
    conn.execute("delete from tortus.node where source_id = %s", [source_id])
    conn.execute("delete from tortus.evidence_span where source_id = %s", [source_id])
    conn.execute(
        "delete from tortus.edge e where e.tenant_id = tortus.current_tenant() and e.source_id is null "
        "and not exists (select 1 from tortus.evidence_span s "
        "where s.tenant_id = e.tenant_id and s.edge_id = e.edge_id)"
    )
    conn.execute(
        "delete from tortus.node n where n.tenant_id = tortus.current_tenant() and n.kind <> 'chunk' "
        "and not exists (select 1 from tortus.edge e where e.tenant_id = n.tenant_id and n.node_id in (e.src, e.dst))"
    )


def _upsert_source(conn: psycopg.Connection, r: SourceRecord, doc: Document, warnings: tuple[str, ...]) -> int:
    metadata = {**r.metadata, "title": doc.title, "pages": len(doc.pages)}
    row = conn.execute(
        """
        insert into tortus.source (tenant_id, uri, kind, sha256, content_type, etag, last_modified,
                                   retrieved_at, raw, text, warnings, metadata, subgraphs)
        values (tortus.current_tenant(), %(uri)s, %(kind)s, %(sha)s, %(ct)s, %(etag)s, %(lm)s,
                coalesce(%(at)s, now()), %(raw)s, %(text)s, %(warnings)s, %(meta)s, %(subgraphs)s)
        on conflict (tenant_id, uri) do update set
            kind = excluded.kind, sha256 = excluded.sha256, content_type = excluded.content_type,
            etag = excluded.etag, last_modified = excluded.last_modified,
            retrieved_at = excluded.retrieved_at, raw = excluded.raw, text = excluded.text,
            warnings = excluded.warnings, metadata = excluded.metadata,
            subgraphs = excluded.subgraphs, updated_at = now()
        returning source_id
        """,
        {
            "uri": r.uri,
            "kind": r.kind,
            "sha": r.sha256,
            "ct": r.content_type,
            "etag": r.etag,
            "lm": r.last_modified,
            "at": r.retrieved_at,
            "raw": r.raw,
            "text": doc.text,
            "warnings": list(warnings),
            "meta": Jsonb(metadata),
            "subgraphs": list(r.subgraphs),
        },
    ).fetchone()
    assert row is not None
    return int(row[0])


def _ensure_subgraphs(conn: psycopg.Connection, names: Sequence[str]) -> None:
    with conn.cursor() as cur:
        cur.executemany(
            "insert into tortus.subgraph (tenant_id, name) values (tortus.current_tenant(), %s) on conflict do nothing",
            [(n,) for n in names],
        )


def _insert_chunks(
    conn: psycopg.Connection,
    source_id: int,
    r: SourceRecord,
    chunks: Sequence[Chunk],
    embedder: Embedder,
    ts_config: str,
) -> list[int]:
    if not chunks:
        return []
    vectors = embed_cached(conn, embedder, [c.text for c in chunks])
    title = r.metadata.get("title") or r.uri.rsplit("/", 1)[-1]
    params = []
    for chunk, vector in zip(chunks, vectors, strict=True):
        label = " > ".join((str(title), *chunk.headings[-1:])) if chunk.headings else str(title)
        props = {"index": chunk.index, "headings": list(chunk.headings), "page": chunk.page}
        params.append(
            [
                f"{source_id}:{chunk.index}",
                label,
                chunk.text,
                source_id,
                vector,
                embedder.name,
                ts_config,
                chunk.text,
                Jsonb(props),
            ]
        )
    with conn.cursor() as cur:
        ids = _insert_returning(
            cur,
            """
            insert into tortus.node (tenant_id, kind, key, label, text, source_id, embedding,
                                     embedding_model, tsv, props)
            values (tortus.current_tenant(), 'chunk', %s, %s, %s, %s, %s, %s,
                    to_tsvector(%s::regconfig, %s), %s)
            returning node_id
            """,
            params,
        )
        cur.executemany(
            "insert into tortus.evidence_span (tenant_id, source_id, start_char, end_char, page, node_id) "
            "values (tortus.current_tenant(), %s, %s, %s, %s, %s)",
            [(source_id, c.start, c.end, c.page, i) for c, i in zip(chunks, ids, strict=True)],
        )
        cur.executemany(
            "insert into tortus.edge (tenant_id, src, dst, type, weight, source_id, provenance) "
            "values (tortus.current_tenant(), %s, %s, 'next', %s, %s, %s)",
            [(a, b, NEXT_WEIGHT, source_id, Jsonb({"rule": "reading_order"})) for a, b in zip(ids, ids[1:], strict=False)],
        )
    return ids


def _upsert_concepts(conn: psycopg.Connection, extraction: Extraction) -> dict[str, int]:
    with conn.cursor() as cur:
        ids = _insert_returning(
            cur,
            """
            insert into tortus.node (tenant_id, kind, key, label, text)
            values (tortus.current_tenant(), %s, %s, %s, %s)
            on conflict (tenant_id, kind, key) do update set freshness = now()
            returning node_id
            """,
            [[c.kind, c.key, c.label, c.label] for c in extraction.concepts],
        )
    return {c.key: i for c, i in zip(extraction.concepts, ids, strict=True)}


def _insert_edges(
    conn: psycopg.Connection,
    source_id: int,
    chunk_ids: list[int],
    concept_ids: dict[str, int],
    extraction: Extraction,
) -> int:
    mentions: dict[tuple[int, int], tuple[int, int]] = {}
    for concept in extraction.concepts:
        for m in concept.mentions:
            mentions.setdefault((chunk_ids[m.chunk], concept_ids[concept.key]), (m.start, m.end))
    # Typed edges between concepts may be supported by several sources: such an edge has no
    # source_id, its evidence spans do (one per supporting sentence).
    typed: dict[tuple[int, int, str], tuple[float, str, int, int]] = {}
    for e in extraction.edges:
        src, dst = concept_ids.get(e.src), concept_ids.get(e.dst)
        if src is not None and dst is not None and src != dst:
            best = typed.get((src, dst, e.type))
            if best is None or e.confidence > best[0]:
                typed[(src, dst, e.type)] = (e.confidence, e.rule, e.evidence.start, e.evidence.end)
    with conn.cursor() as cur:
        mention_ids = _insert_returning(
            cur,
            "insert into tortus.edge (tenant_id, src, dst, type, weight, source_id, provenance) "
            "values (tortus.current_tenant(), %s, %s, 'mentions', %s, %s, %s) returning edge_id",
            [[c, k, MENTION_WEIGHT, source_id, Jsonb({"rule": "mention"})] for c, k in mentions],
        )
        typed_ids = _insert_returning(
            cur,
            """
            insert into tortus.edge (tenant_id, src, dst, type, weight, confidence, provenance)
            values (tortus.current_tenant(), %s, %s, %s, %s, %s, %s)
            on conflict (tenant_id, src, dst, type) do update
                set confidence = greatest(tortus.edge.confidence, excluded.confidence),
                    weight = greatest(tortus.edge.weight, excluded.weight)
            returning edge_id
            """,
            [
                [s, d, t, max(conf, 0.05), conf, Jsonb({"rule": rule})]
                for (s, d, t), (conf, rule, _, _) in typed.items()
            ],
        )
        spans = [(source_id, a, b, i) for (a, b), i in zip(mentions.values(), mention_ids, strict=True)]
        spans += [(source_id, a, b, i) for (_, _, a, b), i in zip(typed.values(), typed_ids, strict=True)]
        cur.executemany(
            "insert into tortus.evidence_span (tenant_id, source_id, start_char, end_char, edge_id) "
            "values (tortus.current_tenant(), %s, %s, %s, %s)",
            spans,
        )
    return len(mention_ids) + len(typed_ids)


def _insert_returning(cur: psycopg.Cursor[Any], query: str, params: Sequence[Sequence[Any]]) -> list[int]:
    """Run `query` once per parameter row in one pipelined batch; return the first column of each."""
    if not params:
        return []
    cur.executemany(query, params, returning=True)
    ids = []
    while True:
        row = cur.fetchone()
        assert row is not None
        ids.append(int(row[0]))
        if not cur.nextset():
            return ids


def _memberships(conn: psycopg.Connection, subgraphs: Sequence[str], node_ids: Sequence[int]) -> None:
    with conn.cursor() as cur:
        cur.executemany(
            "insert into tortus.membership (tenant_id, node_id, subgraph) "
            "values (tortus.current_tenant(), %s, %s) on conflict do nothing",
            [(n, s) for s in subgraphs for n in node_ids],
        )


def source_summary(conn: psycopg.Connection) -> list[dict[str, Any]]:
    """Every source of the current tenant with its counts (for `tortus-pg sources list`)."""
    rows = conn.execute(
        """
        select s.uri, s.kind, s.sha256, s.subgraphs, s.warnings, s.updated_at,
               (select count(*) from tortus.node n where n.source_id = s.source_id) as chunks,
               (select count(*) from tortus.evidence_span e where e.source_id = s.source_id) as spans
        from tortus.source s order by s.uri
        """
    ).fetchall()
    keys = ("uri", "kind", "sha256", "subgraphs", "warnings", "updated_at", "chunks", "spans")
    return [dict(zip(keys, r, strict=True)) for r in rows]


__all__ = ["SourceRecord", "StoreResult", "remove_source", "source_summary", "store_document"]
