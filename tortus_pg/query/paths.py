"""The reasoning path behind the evidence: a search hop for each seed, then the walk's edges,
each with the spans that state it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from tortus_pg.evidence import Evidence, Reached
from tortus_pg.query.results import PathHop, SourceSpan
from tortus_pg.query.state import Link
from tortus_pg.retrieve import Hit

SHARDS = 8  # torus cells a distributed deployment would place on separate nodes

_ALL_HOPS = """
select p.i, h.* from jsonb_to_recordset(%s) as p(i integer, path bigint[], types text[], dirs text[])
cross join lateral tortus.path_hops(p.path, p.types, p.dirs) h
order by p.i, h.hop
"""
# Each node's shard by the coordinates the walk used: the live ones, or a layout's (ablations).
_SHARDS = """
select node_id, tortus.shard_of(c.theta, c.phi, %(shards)s) from tortus.node n
cross join lateral (select case when %(layout)s::text is null then n.theta
                                else (n.props #>> array['layouts', %(layout)s, '0'])::float8 end as theta,
                           case when %(layout)s::text is null then n.phi
                                else (n.props #>> array['layouts', %(layout)s, '1'])::float8 end as phi) c
where n.tenant_id = tortus.current_tenant() and n.node_id = any(%(ids)s::bigint[]) and c.theta is not null
"""


def linked_paths(cited: Sequence[Evidence], links: Sequence[Link], reached: dict[int, Reached]) -> dict[int, Reached]:
    """The reasoning path of a cited chunk that no walk reached but that is about what another
    cited chunk names: naming chunk -> concept -> chunk about it, two hops."""
    ids = {e.node_id for e in cited}
    found = {}
    for a, b, concept, kind in links:
        if a in ids and b in ids and b not in found and not (b in reached and reached[b].edge_types):
            why = "defines it" if kind == "defines" else "is part of the document about it"
            found[b] = Reached(b, 2, [a, concept, b], ["mentions", kind], ["out", "in"],
                               ["the cited evidence names it", why], 0.0, None, 1.0, 2)
    return found


def paths(
    conn: psycopg.Connection, evidence: Sequence[Evidence], hits: Sequence[Hit], reached: dict[int, Reached],
    layout: str | None = None,
) -> list[PathHop]:
    """The hops that lead to each evidence chunk: a search hop for seeds, then the walk's edges,
    each marked when it crosses torus shards (by `layout`'s coordinates when the walk used one)."""
    seeds = {h.node_id: h for h in hits}
    out: list[PathHop] = []
    seen: set[tuple[int, int, str]] = set()
    hops = _hops(conn, [r for e in evidence if (r := reached.get(e.node_id)) is not None and r.edge_types])
    for e in evidence:
        r = reached.get(e.node_id)
        start = r.path[0] if r is not None and r.path else e.node_id
        hit = seeds.get(start)
        if hit is not None and (0, start, "search") not in seen:
            seen.add((0, start, "search"))
            out.append(PathHop(
                "question", None, hit.label, start, "search", hit.score,
                f"hybrid search rank {hit.rank} (bm25 {hit.bm25_rank or '-'}, vector {hit.vector_rank or '-'})",
                (SourceSpan(hit.uri, (hit.start_char, hit.end_char), hit.page, hit.text),),
            ))
        if r is None or not r.edge_types:
            continue
        for hop, src, src_label, dst, dst_label, edge_type, weight, items in hops.get(e.node_id, []):
            if (src, dst, edge_type) in seen:
                continue
            seen.add((src, dst, edge_type))
            out.append(PathHop(
                src_label, src, dst_label, dst, edge_type, weight,
                r.reasons[hop - 1] if hop - 1 < len(r.reasons) else None,
                tuple(SourceSpan(i["uri"], (i["start"], i["end"]), i["page"], i["text"]) for i in items),
                torus_distance=r.torus_distance if dst == r.node_id else None,
            ))
    return _mark_shard_crossings(conn, out, layout)


def _hops(conn: psycopg.Connection, walked: Sequence[Reached]) -> dict[int, list[tuple[Any, ...]]]:
    """The hops of each walked path, by the chunk it reached."""
    hops: dict[int, list[tuple[Any, ...]]] = {}
    if walked:  # one statement for all paths: each call of the SQL function is planned anew
        for ordinal, *row in conn.execute(_ALL_HOPS, [Jsonb([
            {"i": i, "path": r.path, "types": r.edge_types, "dirs": r.directions} for i, r in enumerate(walked)
        ])]).fetchall():
            hops.setdefault(walked[ordinal].node_id, []).append(tuple(row))
    return hops


def _mark_shard_crossings(conn: psycopg.Connection, hops: list[PathHop], layout: str | None) -> list[PathHop]:
    """Flag the hops whose ends lie in different torus shards (a distributed deployment pays a
    network round trip for each)."""
    ids = {n for h in hops for n in (h.source_id, h.target_id) if n is not None}
    found = conn.execute(_SHARDS, {"shards": SHARDS, "layout": layout, "ids": list(ids)}).fetchall() if ids else []
    shard: dict[int, int] = dict(found)
    marked = []
    for h in hops:
        a, b = shard.get(h.source_id or -1), shard.get(h.target_id)
        marked.append(replace(h, shard_crossing=a is not None and b is not None and a != b))
    return marked
