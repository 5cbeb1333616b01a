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
from tortus_pg.ingest.extract import heading_label
from tortus_pg.ingest.types import Chunk, Document, Extraction

Status = Literal["ingested", "updated", "unchanged"]
# Raised whenever what ingestion derives from a source changes, so stored evaluation snapshots
# built by an older version are ingested again rather than reused.
GRAPH_VERSION = 6
MENTION_WEIGHT = 0.6
# The context is indexed this many times: a field weight, as BM25F gives titles and headings.
HEADING_BOOST = 2
NEXT_WEIGHT = 0.5
# A chunk that defines a concept (its document's title, its clause number) is the concept's
# best evidence: the strongest edge a walk can take to reach it.
DEFINES_WEIGHT = 1.0


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
    # The groups that may read it: () for everyone in the tenant; None keeps what is stored (a new
    # source is open to everyone), so a re-ingest that names no readers never widens them.
    readers: tuple[str, ...] | None = None


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
    warnings = tuple(doc.warnings) + tuple(extraction.warnings)
    current = current_source(conn, record.uri, record.sha256)
    if current is not None:
        return StoreResult(record.uri, "unchanged", current, warnings=warnings)
    existing = conn.execute("select source_id from tortus.source where uri = %s", [record.uri]).fetchone()
    if existing is not None:
        _clear_derived(conn, existing[0])
    source_id = _upsert_source(conn, record, doc, warnings)
    _ensure_subgraphs(conn, record.subgraphs)

    chunk_ids = _insert_chunks(conn, source_id, record, chunks, embedder, ts_config)
    concept_ids = _upsert_concepts(conn, extraction)
    edges = _insert_edges(conn, source_id, chunks, chunk_ids, concept_ids, extraction)
    _memberships(conn, record.subgraphs, [*chunk_ids, *concept_ids.values()])
    status: Status = "updated" if existing is not None else "ingested"
    return StoreResult(record.uri, status, source_id, len(chunk_ids), len(concept_ids), edges, warnings)


def current_source(conn: psycopg.Connection, uri: str, sha256: str) -> int | None:
    """The source_id when `uri` is stored with these bytes by this graph version (nothing to
    redo), else None: sources stored by an older version are ingested again."""
    row = conn.execute(
        "select source_id from tortus.source where uri = %s and sha256 = %s "
        "and (metadata ->> 'graph_version')::int is not distinct from %s",
        [uri, sha256, GRAPH_VERSION],
    ).fetchone()
    return int(row[0]) if row else None


def set_readers(conn: psycopg.Connection, source_id: int, readers: tuple[str, ...] | None) -> None:
    """Open a stored source to other readers, () to everyone (its graph does not change); None
    leaves them."""
    if readers is None:
        return
    stored = list(readers) or None
    conn.execute("update tortus.source set readers = %s, updated_at = now() "
                 "where source_id = %s and readers is distinct from %s", [stored, source_id, stored])


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
    metadata = {**r.metadata, "title": doc.title, "pages": len(doc.pages), "graph_version": GRAPH_VERSION}
    row = conn.execute(
        """
        insert into tortus.source (tenant_id, uri, kind, sha256, content_type, etag, last_modified,
                                   retrieved_at, raw, text, warnings, metadata, subgraphs, readers)
        values (tortus.current_tenant(), %(uri)s, %(kind)s, %(sha)s, %(ct)s, %(etag)s, %(lm)s,
                coalesce(%(at)s, now()), %(raw)s, %(text)s, %(warnings)s, %(meta)s, %(subgraphs)s, %(readers)s)
        on conflict (tenant_id, uri) do update set
            kind = excluded.kind, sha256 = excluded.sha256, content_type = excluded.content_type,
            etag = excluded.etag, last_modified = excluded.last_modified,
            retrieved_at = excluded.retrieved_at, raw = excluded.raw, text = excluded.text,
            warnings = excluded.warnings, metadata = excluded.metadata,
            subgraphs = excluded.subgraphs, updated_at = now(),
            readers = case when %(keep_readers)s then tortus.source.readers else excluded.readers end
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
            "readers": list(r.readers) if r.readers else None,
            "keep_readers": r.readers is None,
        },
    ).fetchone()
    assert row is not None
    return int(row[0])


def _ensure_subgraphs(conn: psycopg.Connection, names: Sequence[str]) -> None:
    conn.execute(
        "insert into tortus.subgraph (tenant_id, name) select tortus.current_tenant(), unnest(%s::text[]) "
        "on conflict do nothing",
        [list(names)],
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
    title = str(r.metadata.get("title") or r.uri.rsplit("/", 1)[-1])
    contexts = [chunk_context(title, c) for c in chunks]
    vectors = embed_cached(conn, embedder, [embedding_text(x, c) for x, c in zip(contexts, chunks, strict=True)])
    keys = [f"{source_id}:{c.index}" for c in chunks]
    rows = conn.execute(
        """
        insert into tortus.node (tenant_id, kind, key, label, text, source_id, embedding,
                                 embedding_model, tsv, props)
        select tortus.current_tenant(), 'chunk', k, l, x, %(source)s, v::vector, %(model)s,
               to_tsvector(%(cfg)s::regconfig, repeat(c || E'\n', %(boost)s) || x), p
        from unnest(%(keys)s::text[], %(labels)s::text[], %(texts)s::text[], %(vectors)s::text[],
                    %(props)s::jsonb[], %(contexts)s::text[]) as t(k, l, x, v, p, c)
        returning key, node_id
        """,
        {
            "source": source_id,
            "model": embedder.name,
            "cfg": ts_config,
            "keys": keys,
            "labels": [" > ".join((title, *map(heading_label, c.headings[-1:]))) for c in chunks],
            "contexts": contexts,
            "boost": HEADING_BOOST,
            "texts": [c.text for c in chunks],
            "vectors": ["[" + ",".join(map(repr, v.tolist())) + "]" for v in vectors],
            "props": [Jsonb({"index": c.index, "headings": list(c.headings), "page": c.page}) for c in chunks],
        },
    ).fetchall()
    by_key = {k: int(i) for k, i in rows}
    ids = [by_key[k] for k in keys]
    conn.execute(
        "insert into tortus.evidence_span (tenant_id, source_id, start_char, end_char, page, node_id) "
        "select tortus.current_tenant(), %s, s, e, p, n "
        "from unnest(%s::int[], %s::int[], %s::int[], %s::bigint[]) as t(s, e, p, n)",
        [source_id, [c.start for c in chunks], [c.end for c in chunks], [c.page for c in chunks], ids],
    )
    conn.execute(
        "insert into tortus.edge (tenant_id, src, dst, type, weight, source_id, provenance) "
        "select tortus.current_tenant(), a, b, 'next', %s, %s, %s from unnest(%s::bigint[], %s::bigint[]) as t(a, b)",
        [NEXT_WEIGHT, source_id, Jsonb({"rule": "reading_order"}), ids[:-1], ids[1:]],
    )
    return ids


def chunk_context(title: str, chunk: Chunk) -> str:
    """Title and heading path not already in the chunk's text. It is embedded and indexed with
    the chunk, so a chunk deep in a section still matches the words that name its document and
    section (a clause's text rarely repeats its own number)."""
    lowered = chunk.text.casefold()
    parts = (title, *map(heading_label, chunk.headings))
    return " > ".join(p for p in dict.fromkeys(parts) if p and p.casefold() not in lowered)


def embedding_text(context: str, chunk: Chunk) -> str:
    """What is embedded for a chunk: its context line, then its text."""
    return f"{context}\n{chunk.text}" if context else chunk.text


def _upsert_concepts(conn: psycopg.Connection, extraction: Extraction) -> dict[str, int]:
    concepts = {(c.kind, c.key): c for c in extraction.concepts}
    if not concepts:
        return {}
    rows = conn.execute(
        """
        insert into tortus.node (tenant_id, kind, key, label, text)
        select tortus.current_tenant(), k, y, l, l from unnest(%s::text[], %s::text[], %s::text[]) as t(k, y, l)
        on conflict (tenant_id, kind, key) do update set freshness = now()
        returning kind, key, node_id
        """,
        [[k for k, _ in concepts], [y for _, y in concepts], [c.label for c in concepts.values()]],
    ).fetchall()
    by_kind_key = {(k, y): int(i) for k, y, i in rows}
    return {c.key: by_kind_key[(c.kind, c.key)] for c in extraction.concepts}


def _insert_edges(
    conn: psycopg.Connection,
    source_id: int,
    chunks: Sequence[Chunk],
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
    # The defining chunk is the evidence of its definition.
    defines = {(chunk_ids[c], concept_ids[key]): (chunks[c].start, chunks[c].end) for c, key in extraction.defines}
    spans = [*_source_edges(conn, source_id, "mentions", MENTION_WEIGHT, "mention", mentions),
             *_source_edges(conn, source_id, "defines", DEFINES_WEIGHT, "title_or_clause_heading", defines)]
    if typed:
        rows = conn.execute(
            """
            insert into tortus.edge (tenant_id, src, dst, type, weight, confidence, provenance)
            select tortus.current_tenant(), a, b, y, greatest(c, 0.05), c, jsonb_build_object('rule', r)
            from unnest(%s::bigint[], %s::bigint[], %s::text[], %s::real[], %s::text[]) as t(a, b, y, c, r)
            on conflict (tenant_id, src, dst, type) do update
                set confidence = greatest(tortus.edge.confidence, excluded.confidence),
                    weight = greatest(tortus.edge.weight, excluded.weight)
            returning src, dst, type, edge_id
            """,
            [
                [k[0] for k in typed], [k[1] for k in typed], [k[2] for k in typed],
                [v[0] for v in typed.values()], [v[1] for v in typed.values()],
            ],
        ).fetchall()
        spans += [(typed[(a, b, y)][2], typed[(a, b, y)][3], i) for a, b, y, i in rows]
    if spans:
        conn.execute(
            "insert into tortus.evidence_span (tenant_id, source_id, start_char, end_char, edge_id) "
            "select tortus.current_tenant(), %s, s, e, i from unnest(%s::int[], %s::int[], %s::bigint[]) as t(s, e, i)",
            [source_id, [x[0] for x in spans], [x[1] for x in spans], [x[2] for x in spans]],
        )
    return len(spans)


def _source_edges(
    conn: psycopg.Connection, source_id: int, type_: str, weight: float, rule: str,
    pairs: dict[tuple[int, int], tuple[int, int]],
) -> list[tuple[int, int, int]]:
    """Insert edges of one source (`pairs`: (src, dst) -> the span stating it); their spans as
    (start, end, edge id)."""
    if not pairs:
        return []
    rows = conn.execute(
        "insert into tortus.edge (tenant_id, src, dst, type, weight, source_id, provenance) "
        "select tortus.current_tenant(), a, b, %s, %s, %s, %s from unnest(%s::bigint[], %s::bigint[]) "
        "as t(a, b) returning src, dst, edge_id",
        [type_, weight, source_id, Jsonb({"rule": rule}), [a for a, _ in pairs], [b for _, b in pairs]],
    ).fetchall()
    return [(*pairs[(a, b)], i) for a, b, i in rows]


def _memberships(conn: psycopg.Connection, subgraphs: Sequence[str], node_ids: Sequence[int]) -> None:
    if subgraphs and node_ids:
        conn.execute(
            "insert into tortus.membership (tenant_id, node_id, subgraph) "
            "select tortus.current_tenant(), n, s from unnest(%s::bigint[]) as n, unnest(%s::text[]) as s "
            "on conflict do nothing",
            [list(node_ids), list(subgraphs)],
        )


def source_summary(conn: psycopg.Connection) -> list[dict[str, Any]]:
    """Every source of the current tenant with its counts (for `tortus-pg sources list`)."""
    rows = conn.execute(
        """
        select s.source_id, s.uri, s.kind, s.sha256, s.subgraphs, s.readers, s.warnings, s.updated_at,
               (select count(*) from tortus.node n where n.source_id = s.source_id) as chunks,
               (select count(*) from tortus.evidence_span e where e.source_id = s.source_id) as spans
        from tortus.source s order by s.uri
        """
    ).fetchall()
    keys = ("source_id", "uri", "kind", "sha256", "subgraphs", "readers", "warnings", "updated_at", "chunks", "spans")
    return [dict(zip(keys, r, strict=True)) for r in rows]


__all__ = ["SourceRecord", "StoreResult", "remove_source", "source_summary", "store_document"]
