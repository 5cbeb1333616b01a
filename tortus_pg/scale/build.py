"""Building a scale tenant: synthetic documents ingested until the graph holds the nodes asked
for, then indexed; what it cost (rows per second, index builds, size on disk)."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

import psycopg

from tortus_pg import tenants
from tortus_pg.db import connect, tenant_scope
from tortus_pg.embed import Embedder
from tortus_pg.errors import InvalidInput
from tortus_pg.indexing import build_index, vacuum_tenant
from tortus_pg.ingest.corpus import ingest_passages
from tortus_pg.scale.corpus import SyntheticCorpus

NODES_PER_DOCUMENT = 5  # a first guess at the batch size; the build counts the nodes it made
# The name the suite gives its tenants: it replaces or reuses no tenant without it.
SUITE_TENANT_NAME = "tortus-pg scale suite"
# Graph rows: nodes, edges, memberships, evidence spans and BM25 postings.
_COUNTS = """
select (select count(*) from tortus.node), (select count(*) from tortus.source),
       (select count(*) from tortus.edge) + (select count(*) from tortus.membership)
     + (select count(*) from tortus.evidence_span) + (select count(*) from tortus.bm25_posting)
     + (select count(*) from tortus.node)
"""
_SIZE = """
select coalesce(sum(pg_total_relation_size(c.oid)), 0) from pg_class c
where c.relispartition and pg_get_expr(c.relpartbound, c.oid) = format('FOR VALUES IN (%%L)', %s::text)
"""
_HNSW = """
select i.indexrelid::regclass::text from pg_index i join pg_class c on c.oid = i.indrelid join pg_am a
  on a.oid = (select relam from pg_class where oid = i.indexrelid)
where a.amname = 'hnsw' and c.relispartition
  and pg_get_expr(c.relpartbound, c.oid) = format('FOR VALUES IN (%%L)', %s::text)
"""


@dataclass(frozen=True)
class Built:
    """A scale tenant: its documents, nodes and graph rows; ingest and index costs (None when an
    existing tenant was reused); its size on disk."""

    tenant: str
    documents: int
    nodes: int
    rows: int
    ingest_s: float | None
    rows_per_s: float | None
    bm25_rebuild_s: float | None
    hnsw_build_s: float | None
    layout_s: float | None
    size_mb: float


def build(url: str, tenant: str, corpus: SyntheticCorpus, nodes: int, embedder: Embedder, *, reuse: bool = False,
          on_progress: Callable[[int, int], None] | None = None) -> Built:
    """The tenant with at least `nodes` nodes of `corpus`: made anew (ingest and index timed),
    or with `reuse` kept as it is when it already holds them."""
    with connect(url) as conn:
        exists = suite_tenant(conn, tenant)
        if reuse and exists and _nodes(conn, tenant) >= nodes:
            made, documents, rows = _counts(conn, tenant)
            return Built(tenant, documents, made, rows, None, None, None, None, None, _size_mb(conn, tenant))
        if exists:
            tenants.delete_tenant(conn, tenant)
        tenants.create_tenant(conn, tenant, SUITE_TENANT_NAME)
        conn.commit()
        began = time.perf_counter()
        _ingest(conn, tenant, corpus, nodes, embedder, on_progress)
        ingest_s = time.perf_counter() - began
        made, documents, rows = _counts(conn, tenant)
        began = time.perf_counter()
        build_index(conn, tenant)
        layout_s = time.perf_counter() - began
        built = Built(tenant, documents, made, rows, ingest_s, rows / ingest_s, *_rebuild_times(conn, tenant),
                      layout_s, _size_mb(conn, tenant))
        # The rebuilds rewrote every posting and vector since the index step vacuumed.
        vacuum_tenant(conn, tenant)
    return built


def _ingest(conn: psycopg.Connection, tenant: str, corpus: SyntheticCorpus, nodes: int, embedder: Embedder,
            on_progress: Callable[[int, int], None] | None) -> None:
    documents, made = 0, 0
    while made < nodes and documents < len(corpus.names):
        batch = max(50, (nodes - made) // NODES_PER_DOCUMENT // 4)
        parts = defaultdict(list)
        for subgraph, passage in corpus.passages(documents, documents + batch):
            parts[subgraph].append(passage)
        for subgraph, passages in parts.items():
            ingest_passages(conn, tenant, passages, embedder, uri_prefix="scale/", subgraph=subgraph)
        documents += batch
        made = _nodes(conn, tenant)
        if on_progress is not None:
            on_progress(min(made, nodes), nodes)


def _rebuild_times(conn: psycopg.Connection, tenant: str) -> tuple[float, float]:
    """Seconds to recompute the tenant's BM25 statistics from scratch, and to rebuild its HNSW index."""
    began = time.perf_counter()
    with conn.transaction():
        conn.execute("select tortus.bm25_rebuild(%s)", [tenant])
    bm25_s = time.perf_counter() - began
    index = conn.execute(_HNSW, [tenant]).fetchone()
    began = time.perf_counter()
    if index is not None:
        conn.execute(f"reindex index {index[0]}")
        conn.commit()
    return bm25_s, time.perf_counter() - began


def suite_tenant(conn: psycopg.Connection, tenant: str) -> bool:
    """Whether the suite made `tenant` before; a tenant of that id made otherwise is refused."""
    row = conn.execute("select name from tortus.tenant where tenant_id = %s", [tenant]).fetchone()
    conn.commit()
    if row is not None and row[0] != SUITE_TENANT_NAME:
        raise InvalidInput(f"tenant {tenant!r} exists and is not the scale suite's: the suite would replace it; "
                           "run the suite in a workspace of its own (tortus-pg --workspace DIR init)")
    return row is not None


def check_suite_tenant(url: str, tenant: str) -> None:
    """Refuse (`InvalidInput`) a tenant of this id that the suite did not make."""
    with connect(url) as conn:
        suite_tenant(conn, tenant)


def _nodes(conn: psycopg.Connection, tenant: str) -> int:
    """The tenant's nodes (counted while it is built, so the graph's other tables are not read)."""
    with tenant_scope(conn, tenant):
        row = conn.execute("select count(*) from tortus.node").fetchone()
    return int(row[0]) if row else 0


def _counts(conn: psycopg.Connection, tenant: str) -> tuple[int, int, int]:
    """The tenant's nodes, documents and graph rows."""
    with tenant_scope(conn, tenant):
        row = conn.execute(_COUNTS).fetchone()
    return (int(row[0]), int(row[1]), int(row[2])) if row else (0, 0, 0)


def _size_mb(conn: psycopg.Connection, tenant: str) -> float:
    row = conn.execute(_SIZE, [tenant]).fetchone()
    conn.commit()
    return float(row[0]) / 2**20 if row else 0.0
