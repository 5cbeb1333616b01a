"""Disagreement between sources: `contradicts` edges stated inside the evidence, and `supersedes`
or `contradicts` edges against what an answer quotes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from tortus_pg.db import pinned
from tortus_pg.evidence import Evidence
from tortus_pg.query.results import Claim

_CONTRADICTIONS = """
with chunk_span as materialized (
    select c.source_id, c.start_char, c.end_char from tortus.evidence_span c
    where c.tenant_id = tortus.current_tenant() and c.node_id = any(%(chunks)s::bigint[])
)
select a.label, e.type, b.label, e.confidence,
       tortus.span_text(sp.tenant_id, sp.source_id, sp.start_char, sp.end_char), s.uri, sp.start_char, sp.end_char
from tortus.edge e
join tortus.node a on a.tenant_id = e.tenant_id and a.node_id = e.src
join tortus.node b on b.tenant_id = e.tenant_id and b.node_id = e.dst
join tortus.evidence_span sp on sp.tenant_id = e.tenant_id and sp.edge_id = e.edge_id
join tortus.source s on s.tenant_id = sp.tenant_id and s.source_id = sp.source_id
where e.tenant_id = tortus.current_tenant() and e.type = 'contradicts'
  -- The spans read are those of the chunks' own sources, found by key: whatever the planner
  -- guesses of how many edges contradict, it never reads a tenant's spans whole.
  and sp.source_id = any(array(select c.source_id from chunk_span c))
  and exists (select 1 from chunk_span c
              where c.source_id = sp.source_id and c.start_char <= sp.start_char and sp.end_char <= c.end_char)
order by e.confidence desc, a.label, b.label
limit 5
"""


def stated_in(span: dict[str, Any], item: Evidence) -> bool:
    """Whether a statement's span lies inside an evidence item."""
    return bool(span["uri"] == item.uri and item.start <= span["span"][0] and span["span"][1] <= item.end)


def contradictions(conn: psycopg.Connection, chunks: Sequence[int], tenant: str | None = None) -> list[dict[str, Any]]:
    """`contradicts` edges stated inside the selected evidence chunks (the answer notes those
    stated in the chunks its claims cite)."""
    return _statements(conn.execute(pinned(_CONTRADICTIONS, tenant), {"chunks": list(chunks)}).fetchall())


# What the claims quote, as concepts: those named inside a claim's span and the one whose
# document a claim comes from; then the edges that supersede or contradict any of them.
_SUPERSEDED = """
with claim as (
    select c.node_id, c.start_char, c.end_char, n.source_id
    from unnest(%(nodes)s::bigint[], %(starts)s::integer[], %(ends)s::integer[]) as c(node_id, start_char, end_char)
    join tortus.node n on n.tenant_id = tortus.current_tenant() and n.node_id = c.node_id
), quoted as (
    select m.dst as concept
    from claim c
    join tortus.edge m on m.tenant_id = tortus.current_tenant() and m.src = c.node_id and m.type = 'mentions'
    join tortus.evidence_span ms on ms.tenant_id = m.tenant_id and ms.edge_id = m.edge_id
    where ms.start_char >= c.start_char and ms.end_char <= c.end_char
    union
    select d.dst
    from claim c
    join tortus.node f on f.tenant_id = tortus.current_tenant() and f.source_id = c.source_id
    join tortus.edge d on d.tenant_id = f.tenant_id and d.src = f.node_id and d.type = 'defines'
)
select a.label, e.type, b.label, e.confidence,
       tortus.span_text(sp.tenant_id, sp.source_id, sp.start_char, sp.end_char), s.uri, sp.start_char, sp.end_char
from quoted q
join tortus.edge e on e.tenant_id = tortus.current_tenant() and e.dst = q.concept
                  and e.type in ('supersedes', 'contradicts')
join tortus.node a on a.tenant_id = e.tenant_id and a.node_id = e.src
join tortus.node b on b.tenant_id = e.tenant_id and b.node_id = e.dst
join tortus.evidence_span sp on sp.tenant_id = e.tenant_id and sp.edge_id = e.edge_id
join tortus.source s on s.tenant_id = sp.tenant_id and s.source_id = sp.source_id
order by e.confidence desc, a.label, e.type, b.label
limit 5
"""


def superseded(conn: psycopg.Connection, claims: Sequence[Claim],
                evidence: Sequence[Evidence], tenant: str | None = None) -> list[dict[str, Any]]:
    """`supersedes` and `contradicts` edges against what the claims quote: a runbook a newer
    decision overrides, a record another one disputes, wherever that edge is stated."""
    cited = [(c.evidence, c.span) for c in claims if c.evidence is not None and c.span is not None]
    if not cited:
        return []
    return _statements(conn.execute(pinned(_SUPERSEDED, tenant), {
        "nodes": [evidence[i].node_id for i, _ in cited], "starts": [span[0] for _, span in cited],
        "ends": [span[1] for _, span in cited]}).fetchall())


def _statements(rows: Sequence[tuple[Any, ...]]) -> list[dict[str, Any]]:
    return [
        {"statement": f"{a} {t.replace('_', ' ')} {b}", "confidence": conf,
         "evidence": {"uri": uri, "span": [start, end], "text": text}}
        for a, t, b, conf, text, uri, start, end in rows
    ]
