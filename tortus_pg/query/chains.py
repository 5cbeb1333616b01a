"""Evidence chains: which evidence chunks may answer together, and the links that tie a chunk
naming a concept to the chunk about it."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import psycopg

from tortus_pg.db import pinned
from tortus_pg.evidence import Evidence, Reached
from tortus_pg.query.state import Link, State

# A chunk that names a concept, and a chunk that defines it or belongs to the document that
# does (the document about the concept), with the edge type that ties the latter to it.
_DEFINED_BY = """
select m.src, o.src, m.dst, o.type from tortus.edge m
join tortus.edge o on o.tenant_id = m.tenant_id and o.dst = m.dst and o.type in ('defines', 'mentions')
join tortus.node b on b.tenant_id = o.tenant_id and b.node_id = o.src
where m.tenant_id = tortus.current_tenant() and m.type = 'mentions'
  and m.src = any(%(ids)s::bigint[]) and o.src = any(%(ids)s::bigint[]) and o.src <> m.src
  and (o.type = 'defines'
       or exists (select 1 from tortus.edge d
                  join tortus.node dn on dn.tenant_id = d.tenant_id and dn.node_id = d.src
                  where d.tenant_id = m.tenant_id and d.dst = m.dst and d.type = 'defines'
                    and dn.source_id = b.source_id))
"""


def link(conn: psycopg.Connection, state: State) -> None:
    """Stage `links`: the links among the evidence (`definitions`); the earlier ones stay when
    the time runs out."""
    state.links = state.clock.attempt("links", partial(definitions, conn, state.evidence, state.tenant), state.links)


def definitions(conn: psycopg.Connection, evidence: Sequence[Evidence], tenant: str | None = None) -> list[Link]:
    """(naming chunk, chunk about the concept, concept, edge type of the latter) among the
    evidence: a chunk that names a concept and one that defines it or is part of the document
    about it (the clause a chunk cites, the handbook of the service it names)."""
    return conn.execute(pinned(_DEFINED_BY, tenant), {"ids": [e.node_id for e in evidence]}).fetchall()


def chains(evidence: Sequence[Evidence], reached: dict[int, Reached], links: Sequence[Link]) -> list[list[int]]:
    """Evidence grouped into chains that can answer together: a chunk with the chunks the walk
    reached from it, chunks of one document, and a chunk with the chunk defining what it names
    (`links`). An answer must come from one chain, so two unrelated chunks cannot be stitched
    into an answer neither supports."""
    parent = list(range(len(evidence)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[object, int] = {}
    for i, e in enumerate(evidence):
        r = reached.get(e.node_id)
        keys: list[object] = [("node", e.node_id), ("uri", e.uri)]
        if r is not None and r.path:
            keys.append(("node", r.path[0]))
        keys += [("link", n) for n, (a, b, *_) in enumerate(links) if e.node_id in (a, b)]
        for key in keys:
            if key in owner:
                parent[find(i)] = find(owner[key])
            else:
                owner[key] = i
    groups: dict[int, list[int]] = {}
    for i in range(len(evidence)):
        groups.setdefault(find(i), []).append(i)
    return list(groups.values())
