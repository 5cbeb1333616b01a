"""`tortus-pg index`: torus coordinates, concept placement, portals and the vector index."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import psycopg
from psycopg import sql

from tortus_pg import age, progress
from tortus_pg.db import require_idle, tenant_scope
from tortus_pg.errors import InvalidInput
from tortus_pg.layout import coordinates


@dataclass(frozen=True)
class IndexReport:
    layout: str
    chunks_placed: int
    concepts_placed: int
    portals: int
    vector_index: str | None


INDEX_STAGES = 6  # statistics, layout, concepts, portals, the HNSW index, vacuum

# The tenant's own partitions of the tenant tables (revision 0004: one per table and tenant).
_PARTITIONS = """
select n.nspname, c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace
where c.relispartition and c.relkind = 'r'
  and pg_get_expr(c.relpartbound, c.oid) = format('FOR VALUES IN (%%L)', %s::text)
order by c.relname
"""


def build_index(conn: psycopg.Connection, tenant: str, *, layout: str = "torus", seed: int = 0) -> IndexReport:
    """Lay out the tenant's graph, rebuild its portals and ensure the HNSW index (owner
    connection); then vacuum the tenant's partitions, unless a transaction of the caller's is
    still open (its rows are not committed yet: autovacuum sees to them after the commit)."""
    # Fresh statistics first: after a bulk ingest the planner would otherwise plan the
    # placement's per-node aggregates for the tables as they were (nested loops over thousands).
    progress.report("index: statistics", 0, INDEX_STAGES)
    with conn.transaction():
        conn.execute("analyze tortus.node, tortus.edge, tortus.membership, tortus.evidence_span")
    with tenant_scope(conn, tenant):
        rows = conn.execute(
            "select node_id, embedding from tortus.node "
            "where tenant_id = tortus.current_tenant() and kind = 'chunk' and embedding is not null order by node_id"
        ).fetchall()
        vectors = [v.to_numpy() for _, v in rows]
        dims = sorted({len(v) for v in vectors})
        if len(dims) > 1:
            raise InvalidInput(f"chunks have embeddings of several dimensions {dims}; re-ingest with one embedder")
        progress.report(f"index: {layout} layout of {len(vectors)} chunks", 1, INDEX_STAGES)
        coords = coordinates(np.array(vectors), layout, seed) if vectors else np.zeros((0, 2))
        conn.execute(
            "update tortus.node n set theta = t.theta, phi = t.phi "
            "from unnest(%s::bigint[], %s::float8[], %s::float8[]) as t(id, theta, phi) "
            "where n.tenant_id = tortus.current_tenant() and n.node_id = t.id",
            [[r[0] for r in rows], coords[:, 0].tolist(), coords[:, 1].tolist()],
        )
        progress.report("index: placing concepts", 2, INDEX_STAGES)
        concepts = conn.execute("select tortus.place_concepts()").fetchone()
        conn.execute("select tortus.rebuild_torus_grid()")
        progress.report("index: portals", 3, INDEX_STAGES)
        portals = conn.execute("select tortus.rebuild_portals()").fetchone()
    progress.report("index: HNSW index", 4, INDEX_STAGES)
    index = None
    if dims:
        # Index DDL needs the table owner, so it runs outside the application-role scope.
        with conn.transaction():
            row = conn.execute("select tortus.ensure_vector_index(%s)", [dims[0]]).fetchone()
        index = row[0] if row else None
    assert concepts is not None and portals is not None
    age.follow(conn, tenant)  # the portals are new
    progress.report("index: vacuum", 5, INDEX_STAGES)
    if conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
        vacuum_tenant(conn, tenant)
    progress.report("index: done", INDEX_STAGES, INDEX_STAGES)
    return IndexReport(layout, len(rows), int(concepts[0]), int(portals[0]), index)


def vacuum_tenant(conn: psycopg.Connection, tenant: str) -> None:
    """VACUUM (ANALYZE) the tenant's partitions, as autovacuum would a minute or two after a bulk
    load (owner connection, no open transaction). Until the visibility map is set again, the
    index-only scans that score BM25 postings and read edges by strength visit the table as
    well: at 100k nodes `bm25_search` took 3.6 to 4.2 ms at p50 straight after an ingest and 1.5
    once vacuumed. Other tenants' partitions are left alone."""
    require_idle(conn, "vacuuming a tenant")
    autocommit, conn.autocommit = conn.autocommit, True  # VACUUM cannot run inside a transaction
    try:
        for schema, table in conn.execute(_PARTITIONS, [tenant]).fetchall():
            conn.execute(sql.SQL("vacuum (analyze) {}").format(sql.Identifier(schema, table)))
    finally:
        conn.autocommit = autocommit


def index_stale(conn: psycopg.Connection, tenant: str) -> bool:
    """Whether the tenant has chunks the index step has not placed (it was interrupted, or never
    ran): the next ingest then indexes even when every source is unchanged."""
    with tenant_scope(conn, tenant):
        row = conn.execute("select exists (select 1 from tortus.node where kind = 'chunk' "
                           "and embedding is not null and theta is null)").fetchone()
    return bool(row and row[0])


_MENTIONS = """
select e.src, e.dst from tortus.edge e
where e.tenant_id = tortus.current_tenant() and e.type = 'mentions'
"""
_STORE_LAYOUT = """
update tortus.node n
set props = n.props || jsonb_build_object('layouts', coalesce(n.props -> 'layouts', '{}')
                                           || jsonb_build_object(%(name)s::text, jsonb_build_array(t.theta, t.phi)))
from unnest(%(ids)s::bigint[], %(theta)s::float8[], %(phi)s::float8[]) as t(id, theta, phi)
where n.tenant_id = tortus.current_tenant() and n.node_id = t.id
"""


def store_layout(conn: psycopg.Connection, layout: str, *, seed: int = 0) -> int:
    """Store a layout's coordinates beside the live ones, in props.layouts[layout] of every chunk
    and mentioned concept (inside a tenant scope), so evaluation can walk with it through the
    traverse policy's `layout` key; concepts sit at the circular mean of their chunks, as
    `tortus.place_concepts` places them. Returns how many nodes were placed."""
    rows = conn.execute(
        "select node_id, embedding from tortus.node "
        "where tenant_id = tortus.current_tenant() and kind = 'chunk' and embedding is not null order by node_id"
    ).fetchall()
    if not rows:
        return 0
    coords = coordinates(np.array([v.to_numpy() for _, v in rows]), layout, seed)
    index = {node_id: i for i, (node_id, _) in enumerate(rows)}
    members: dict[int, list[int]] = {}
    for chunk, concept in conn.execute(_MENTIONS).fetchall():
        if chunk in index:
            members.setdefault(concept, []).append(index[chunk])
    ids = [r[0] for r in rows] + list(members)
    placed = [coords] + [_circular_mean(coords[m])[None, :] for m in members.values()]
    all_coords = np.vstack(placed)
    conn.execute(_STORE_LAYOUT, {"name": layout, "ids": ids, "theta": all_coords[:, 0].tolist(),
                                 "phi": all_coords[:, 1].tolist()})
    conn.execute("select tortus.rebuild_torus_grid(%s)", [layout])
    return len(ids)


def _circular_mean(angles: np.ndarray) -> np.ndarray:
    """Per-column circular mean in [0, 2*pi)."""
    mean = np.arctan2(np.sin(angles).mean(axis=0), np.cos(angles).mean(axis=0))
    wrapped: np.ndarray = np.mod(mean, 2 * np.pi)
    return wrapped
