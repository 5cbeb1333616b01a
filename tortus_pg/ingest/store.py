"""Write one parsed document into the graph, atomically.

Runs inside a tenant scope (`tortus_pg.db.tenant_scope`): every statement is subject to
row-level security and stamps `tortus.current_tenant()`. Re-ingesting the same bytes is a
no-op; changed bytes replace everything derived from the source; concepts shared with
other sources survive and keep only the evidence that still supports them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from tortus_pg import telemetry
from tortus_pg.cost import Costs, ledger_of
from tortus_pg.db import generic_plans
from tortus_pg.embed import Embedder
from tortus_pg.ingest.embeddings import embed_cached
from tortus_pg.ingest.extract import heading_label
from tortus_pg.ingest.types import Chunk, Concept, Document, Extraction

Status = Literal["ingested", "updated", "unchanged"]
# Raised whenever what ingestion derives from a source changes, so stored evaluation snapshots
# built by an older version are ingested again rather than reused.
GRAPH_VERSION = 17
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


@dataclass(frozen=True)
class Prepared:
    """A document parsed, chunked and extracted, ready to be stored under its record."""

    record: SourceRecord
    doc: Document
    chunks: Sequence[Chunk]
    extraction: Extraction

    @property
    def warnings(self) -> tuple[str, ...]:
        return tuple(self.doc.warnings) + tuple(self.extraction.warnings)


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
    return store_documents(conn, [Prepared(record, doc, chunks, extraction)], embedder, ts_config=ts_config)[0]


def store_documents(
    conn: psycopg.Connection, items: Sequence[Prepared], embedder: Embedder, *, ts_config: str = "english",
) -> list[StoreResult]:
    """Insert or replace many sources (distinct URIs) and everything derived from them, in a
    fixed number of statements whatever their count: each table's rows for all of them go in one
    set-based statement, so per-statement work (the BM25 trigger, planning, a round trip) is paid
    once per batch, not per document. The caller commits."""
    uris = [p.record.uri for p in items]
    if len(set(uris)) != len(uris):
        raise ValueError("store_documents: a batch holds each source once")
    with generic_plans(conn):
        return _store(conn, items, embedder, ts_config)


def _store(conn: psycopg.Connection, items: Sequence[Prepared], embedder: Embedder, ts_config: str,
           ) -> list[StoreResult]:
    current = _current_sources(conn, [(p.record.uri, p.record.sha256) for p in items])
    todo = [p for p in items if p.record.uri not in current]
    # Embedding (the slow part) comes before the first write, which may lock the tenant's BM25 row.
    texts_of = [_embedding_texts(p) for p in todo]
    texts = [t for each in texts_of for t in each]
    embedding = Costs()
    with embedding.step("embed", "tortus.ingest.embed", ledger_of(embedder), texts=len(texts), embedder=embedder.name):
        vectors = embed_cached(conn, embedder, texts)
    # Each source's ledger: its own steps, and its share of the batch's embedding.
    costs = {p.record.uri: {**p.record.metadata.get("cost", {}), **embedding.share(len(each) / max(len(texts), 1)),
                            "embed_texts": len(each)} for p, each in zip(todo, texts_of, strict=True)}
    with telemetry.span("tortus.ingest.store", sources=len(todo)):
        return _write(conn, items, todo, current, vectors, embedder, ts_config, costs)


def _write(conn: psycopg.Connection, items: Sequence[Prepared], todo: Sequence[Prepared], current: dict[str, int],
           vectors: Sequence[Any], embedder: Embedder, ts_config: str, costs: dict[str, dict[str, Any]],
           ) -> list[StoreResult]:
    """Write the sources to store (`todo`, whose chunks' `vectors` are known, with their `costs`)
    and report every one of `items`: those in `current` unchanged."""
    existing = _existing_sources(conn, [p.record.uri for p in todo])
    if existing:
        _clear_derived(conn, list(existing.values()))
    source_ids = _upsert_sources(conn, todo, costs)
    _ensure_subgraphs(conn, sorted({s for p in todo for s in p.record.subgraphs}))
    chunk_ids = _insert_chunks(conn, source_ids, todo, vectors, embedder.name, ts_config)
    concept_ids = _upsert_concepts(conn, [p.extraction for p in todo])
    edges = _insert_edges(conn, source_ids, todo, chunk_ids, concept_ids)
    _memberships(conn, [(p.record.subgraphs, [*c, *k.values()]) for p, c, k in zip(todo, chunk_ids, concept_ids,
                                                                                   strict=True)])
    stored = {p.record.uri: StoreResult(p.record.uri, "updated" if p.record.uri in existing else "ingested", s,
                                        len(c), len(k), e, p.warnings)
              for p, s, c, k, e in zip(todo, source_ids, chunk_ids, concept_ids, edges, strict=True)}
    return [stored.get(p.record.uri) or StoreResult(p.record.uri, "unchanged", current[p.record.uri],
                                                    warnings=p.warnings) for p in items]


def _embedding_texts(p: Prepared) -> list[str]:
    return [embedding_text(chunk_context(_title(p.record), c), c) for c in p.chunks]


def stored_url(conn: psycopg.Connection, uri: str) -> tuple[int, str | None, str | None] | None:
    """A URL's copy stored by this graph version (inside a tenant scope): its source_id and the
    ETag and Last-Modified it was served with; None when there is none to revalidate."""
    row = conn.execute(
        "select source_id, etag, last_modified from tortus.source "
        "where tenant_id = tortus.current_tenant() and uri = %s and raw is not null "
        "and (metadata ->> 'graph_version')::int is not distinct from %s", [uri, GRAPH_VERSION]).fetchone()
    return (int(row[0]), row[1], row[2]) if row else None


def current_source(conn: psycopg.Connection, uri: str, sha256: str) -> int | None:
    """The source_id when `uri` is stored with these bytes by this graph version (nothing to
    redo), else None: sources stored by an older version are ingested again."""
    return _current_sources(conn, [(uri, sha256)]).get(uri)


def _current_sources(conn: psycopg.Connection, stored: Sequence[tuple[str, str]]) -> dict[str, int]:
    """Of the (uri, sha256) pairs, those stored as they are by this graph version: uri -> source_id."""
    if not stored:
        return {}
    rows = conn.execute(
        "select s.uri, s.source_id from tortus.source s "
        "join unnest(%s::text[], %s::text[]) as t(uri, sha) on s.uri = t.uri and s.sha256 = t.sha "
        "where s.tenant_id = tortus.current_tenant() "
        "and (s.metadata ->> 'graph_version')::int is not distinct from %s",
        [[u for u, _ in stored], [h for _, h in stored], GRAPH_VERSION],
    ).fetchall()
    return {str(u): int(i) for u, i in rows}


def _existing_sources(conn: psycopg.Connection, uris: Sequence[str]) -> dict[str, int]:
    """Of `uris`, those stored (in any version): uri -> source_id."""
    if not uris:
        return {}
    rows = conn.execute("select uri, source_id from tortus.source "
                        "where tenant_id = tortus.current_tenant() and uri = any(%s)", [list(uris)]).fetchall()
    return {str(u): int(i) for u, i in rows}


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
    source_id = _existing_sources(conn, [uri]).get(uri)
    if source_id is None:
        return False
    _clear_derived(conn, [source_id])
    conn.execute("delete from tortus.source where source_id = %s", [source_id])
    return True


def _clear_derived(conn: psycopg.Connection, source_ids: list[int]) -> None:
    # Chunk nodes cascade to their edges, spans and BM25 postings; concept-level edges and
    # nodes are shared, so they go only once no evidence span supports them any more.
    conn.execute("delete from tortus.node where source_id = any(%s)", [source_ids])
    conn.execute("delete from tortus.evidence_span where source_id = any(%s)", [source_ids])
    conn.execute(
        "delete from tortus.edge e where e.tenant_id = tortus.current_tenant() and e.source_id is null "
        "and not exists (select 1 from tortus.evidence_span s "
        "where s.tenant_id = e.tenant_id and s.edge_id = e.edge_id)"
    )
    conn.execute(
        "delete from tortus.node n where n.tenant_id = tortus.current_tenant() and n.kind <> 'chunk' "
        "and not exists (select 1 from tortus.edge e where e.tenant_id = n.tenant_id and n.node_id in (e.src, e.dst))"
    )


_UPSERT_SOURCE = """
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
"""


def _upsert_sources(conn: psycopg.Connection, items: Sequence[Prepared], costs: dict[str, dict[str, Any]],
                    ) -> list[int]:
    """Insert or update each item's source row with its `costs` (one pipelined round trip);
    their ids, in order."""
    if not items:
        return []
    params = []
    for p in items:
        r, doc = p.record, p.doc
        metadata = {**r.metadata, "title": doc.title, "pages": len(doc.pages), "graph_version": GRAPH_VERSION,
                    "cost": costs.get(r.uri, {})}
        params.append({
            "uri": r.uri, "kind": r.kind, "sha": r.sha256, "ct": r.content_type, "etag": r.etag,
            "lm": r.last_modified, "at": r.retrieved_at, "raw": r.raw, "text": doc.text,
            "warnings": list(p.warnings), "meta": Jsonb(metadata), "subgraphs": list(r.subgraphs),
            "readers": list(r.readers) if r.readers else None, "keep_readers": r.readers is None,
        })
    ids = []
    with conn.cursor() as cur:
        cur.executemany(_UPSERT_SOURCE, params, returning=True)
        while True:
            row = cur.fetchone()
            assert row is not None
            ids.append(int(row[0]))
            if not cur.nextset():
                break
    return ids


def _ensure_subgraphs(conn: psycopg.Connection, names: Sequence[str]) -> None:
    if names:
        conn.execute(
            "insert into tortus.subgraph (tenant_id, name) select tortus.current_tenant(), unnest(%s::text[]) "
            "on conflict do nothing",
            [list(names)],
        )


def _insert_chunks(
    conn: psycopg.Connection, source_ids: Sequence[int], items: Sequence[Prepared], vectors: Sequence[np.ndarray],
    model: str, ts_config: str,
) -> list[list[int]]:
    """Each item's chunk nodes (with their `vectors`, indexed for BM25 with their context), their
    evidence spans and their reading-order edges; the chunk ids of each item."""
    rows = [(s, _title(p.record), c) for s, p in zip(source_ids, items, strict=True) for c in p.chunks]
    if not rows:
        return [[] for _ in items]
    contexts = [chunk_context(title, c) for _, title, c in rows]
    keys = [f"{s}:{c.index}" for s, _, c in rows]
    inserted = conn.execute(
        """
        insert into tortus.node (tenant_id, kind, key, label, text, source_id, embedding,
                                 embedding_model, tsv, props)
        select tortus.current_tenant(), 'chunk', k, l, x, s, v::vector, %(model)s,
               to_tsvector(%(cfg)s::regconfig, repeat(c || E'\n', %(boost)s) || x), p
        from unnest(%(keys)s::text[], %(sources)s::bigint[], %(labels)s::text[], %(texts)s::text[],
                    %(vectors)s::text[], %(props)s::jsonb[], %(contexts)s::text[]) as t(k, s, l, x, v, p, c)
        returning key, node_id
        """,
        {
            "model": model, "cfg": ts_config, "boost": HEADING_BOOST, "keys": keys,
            "sources": [s for s, _, _ in rows],
            "labels": [" > ".join((title, *map(heading_label, c.headings[-1:]))) for _, title, c in rows],
            "contexts": contexts, "texts": [c.text for _, _, c in rows],
            "vectors": ["[" + ",".join(map(repr, v.tolist())) + "]" for v in vectors],
            "props": [Jsonb({"index": c.index, "headings": list(c.headings), "page": c.page}) for _, _, c in rows],
        },
    ).fetchall()
    by_key = {k: int(i) for k, i in inserted}
    per_item, at = [], 0
    for p in items:
        per_item.append([by_key[k] for k in keys[at:at + len(p.chunks)]])
        at += len(p.chunks)
    _chunk_spans(conn, source_ids, items, per_item)
    return per_item


def _chunk_spans(
    conn: psycopg.Connection, source_ids: Sequence[int], items: Sequence[Prepared], chunk_ids: Sequence[list[int]],
) -> None:
    """Each chunk's evidence span (the chunk is where its text is read), and the reading-order
    edges between a document's consecutive chunks."""
    rows = [(s, c, i) for s, p, ids in zip(source_ids, items, chunk_ids, strict=True)
            for c, i in zip(p.chunks, ids, strict=True)]
    if not rows:
        return
    conn.execute(
        "insert into tortus.evidence_span (tenant_id, source_id, start_char, end_char, page, node_id) "
        "select tortus.current_tenant(), o, s, e, p, n "
        "from unnest(%s::bigint[], %s::int[], %s::int[], %s::int[], %s::bigint[]) as t(o, s, e, p, n)",
        [[s for s, _, _ in rows], [c.start for _, c, _ in rows], [c.end for _, c, _ in rows],
         [c.page for _, c, _ in rows], [i for _, _, i in rows]],
    )
    pairs = [(a, b, s) for s, ids in zip(source_ids, chunk_ids, strict=True)
             for a, b in zip(ids[:-1], ids[1:], strict=True)]
    if pairs:
        conn.execute(
            "insert into tortus.edge (tenant_id, src, dst, type, weight, source_id, provenance) "
            "select tortus.current_tenant(), a, b, 'next', %s, s, %s "
            "from unnest(%s::bigint[], %s::bigint[], %s::bigint[]) as t(a, b, s)",
            [NEXT_WEIGHT, Jsonb({"rule": "reading_order"}), *map(list, zip(*pairs, strict=True))],
        )


def _title(record: SourceRecord) -> str:
    return str(record.metadata.get("title") or record.uri.rsplit("/", 1)[-1])


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


def _upsert_concepts(conn: psycopg.Connection, extractions: Sequence[Extraction]) -> list[dict[str, int]]:
    """The concept nodes of every extraction (a concept already stored keeps its node and label);
    each extraction's concept keys -> node ids."""
    concepts: dict[tuple[str, str], Concept] = {}
    for e in extractions:
        for kind_key, c in {(c.kind, c.key): c for c in e.concepts}.items():
            concepts.setdefault(kind_key, c)
    if not concepts:
        return [{} for _ in extractions]
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
    return [{c.key: by_kind_key[(c.kind, c.key)] for c in e.concepts} for e in extractions]


Span = tuple[int, int, int, int]  # source id, start, end, edge id


def _insert_edges(
    conn: psycopg.Connection, source_ids: Sequence[int], items: Sequence[Prepared], chunk_ids: Sequence[list[int]],
    concept_ids: Sequence[dict[str, int]],
) -> list[int]:
    """Each item's mention and definition edges (chunk -> concept) and typed edges between
    concepts, with the evidence spans stating them; the number of spans of each item."""
    mentions: dict[tuple[int, int], tuple[int, int, int]] = {}
    defines: dict[tuple[int, int], tuple[int, int, int]] = {}
    typed: dict[tuple[int, int, str], tuple[float, str]] = {}
    stated: list[tuple[int, int, int, tuple[int, int, str]]] = []  # source, start, end, typed edge
    for s, p, chunks, concepts in zip(source_ids, items, chunk_ids, concept_ids, strict=True):
        x = p.extraction
        for concept in x.concepts:
            for m in concept.mentions:
                mentions.setdefault((chunks[m.chunk], concepts[concept.key]), (s, m.start, m.end))
        # The defining chunk is the evidence of its definition.
        defines.update({(chunks[c], concepts[key]): (s, p.chunks[c].start, p.chunks[c].end)
                        for c, key in x.defines})
        for key, (confidence, rule, start, end) in _typed(x, concepts).items():
            # As if stored one by one: the first statement's rule, the highest confidence.
            best = typed.get(key)
            typed[key] = (confidence, rule) if best is None else (max(best[0], confidence), best[1])
            stated.append((s, start, end, key))
    spans = [*_source_edges(conn, "mentions", MENTION_WEIGHT, "mention", mentions),
             *_source_edges(conn, "defines", DEFINES_WEIGHT, "title_or_clause_heading", defines),
             *_typed_edges(conn, typed, stated)]
    if spans:
        conn.execute(
            "insert into tortus.evidence_span (tenant_id, source_id, start_char, end_char, edge_id) "
            "select tortus.current_tenant(), o, s, e, i "
            "from unnest(%s::bigint[], %s::int[], %s::int[], %s::bigint[]) as t(o, s, e, i)",
            list(map(list, zip(*spans, strict=True))),
        )
    counts = Counter(x[0] for x in spans)
    return [counts[s] for s in source_ids]


def _typed(x: Extraction, concepts: dict[str, int]) -> dict[tuple[int, int, str], tuple[float, str, int, int]]:
    """One document's typed edges between its concepts' nodes, each with its most confident
    statement: (src, dst, type) -> (confidence, rule, start, end)."""
    typed: dict[tuple[int, int, str], tuple[float, str, int, int]] = {}
    for e in x.edges:
        src, dst = concepts.get(e.src), concepts.get(e.dst)
        if src is not None and dst is not None and src != dst:
            best = typed.get((src, dst, e.type))
            if best is None or e.confidence > best[0]:
                typed[(src, dst, e.type)] = (e.confidence, e.rule, e.evidence.start, e.evidence.end)
    return typed


def _typed_edges(
    conn: psycopg.Connection, typed: dict[tuple[int, int, str], tuple[float, str]],
    stated: Sequence[tuple[int, int, int, tuple[int, int, str]]],
) -> list[Span]:
    """Typed edges between concepts, which several sources may support: such an edge has no
    source_id, its evidence spans do (one per supporting document). An edge already stored
    keeps the higher confidence and weight."""
    if not typed:
        return []
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
        [[k[0] for k in typed], [k[1] for k in typed], [k[2] for k in typed],
         [v[0] for v in typed.values()], [v[1] for v in typed.values()]],
    ).fetchall()
    edge_ids = {(int(a), int(b), str(y)): int(i) for a, b, y, i in rows}
    return [(s, start, end, edge_ids[key]) for s, start, end, key in stated]


def _source_edges(
    conn: psycopg.Connection, type_: str, weight: float, rule: str,
    pairs: dict[tuple[int, int], tuple[int, int, int]],
) -> list[Span]:
    """Insert edges each of one source (`pairs`: (src, dst) -> the source and the span stating
    it); their spans."""
    if not pairs:
        return []
    rows = conn.execute(
        "insert into tortus.edge (tenant_id, src, dst, type, weight, source_id, provenance) "
        "select tortus.current_tenant(), a, b, %s, %s, s, %s from unnest(%s::bigint[], %s::bigint[], %s::bigint[]) "
        "as t(a, b, s) returning src, dst, edge_id",
        [type_, weight, Jsonb({"rule": rule}), [a for a, _ in pairs], [b for _, b in pairs],
         [v[0] for v in pairs.values()]],
    ).fetchall()
    return [(*pairs[(a, b)], i) for a, b, i in rows]


def _memberships(conn: psycopg.Connection, members: Sequence[tuple[Sequence[str], Sequence[int]]]) -> None:
    """Each group of nodes joins its subgraphs."""
    pairs = sorted({(n, s) for subgraphs, nodes in members for s in subgraphs for n in nodes})
    if pairs:
        conn.execute(
            "insert into tortus.membership (tenant_id, node_id, subgraph) "
            "select tortus.current_tenant(), n, s from unnest(%s::bigint[], %s::text[]) as t(n, s) "
            "on conflict do nothing",
            [[n for n, _ in pairs], [s for _, s in pairs]],
        )


def source_summary(conn: psycopg.Connection) -> list[dict[str, Any]]:
    """Every source of the current tenant with its counts and its cost ledger (for `tortus-pg
    sources list` and `show`)."""
    rows = conn.execute(
        """
        select s.source_id, s.uri, s.kind, s.sha256, s.subgraphs, s.readers, s.warnings, s.updated_at,
               (select count(*) from tortus.node n where n.source_id = s.source_id) as chunks,
               (select count(*) from tortus.evidence_span e where e.source_id = s.source_id) as spans,
               coalesce(s.metadata -> 'cost', '{}') as cost
        from tortus.source s order by s.uri
        """
    ).fetchall()
    keys = ("source_id", "uri", "kind", "sha256", "subgraphs", "readers", "warnings", "updated_at", "chunks", "spans",
            "cost")
    return [dict(zip(keys, r, strict=True)) for r in rows]


__all__ = ["SourceRecord", "StoreResult", "remove_source", "source_summary", "store_document"]
