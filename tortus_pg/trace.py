"""Persist what the engine did for one question in `tortus.query_trace` (views in sql/09_engine.sql)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import psycopg
from psycopg.types.json import Jsonb

from tortus_pg.policy import TraversalPolicy

if TYPE_CHECKING:
    from tortus_pg.engine import Answer

_INSERT = """
insert into tortus.query_trace (tenant_id, query, mode, policy, seeds, hops, pruned, portals, evidence, claims,
                                answer, withheld, confidence, warnings, timings)
values (tortus.current_tenant(), %(query)s, 'tortus', %(policy)s, %(seeds)s, %(hops)s, %(pruned)s, %(portals)s,
        %(evidence)s, %(claims)s, %(answer)s, %(withheld)s, %(confidence)s, %(warnings)s, %(timings)s)
returning trace_id
"""


def store_trace(conn: psycopg.Connection, answer: Answer, policy: TraversalPolicy) -> int:
    """Insert the answer's trace (inside the caller's tenant scope); return its trace_id."""
    d, shown = answer.diagnostics, answer.to_json()
    row = conn.execute(_INSERT, {
        "query": answer.question,
        "policy": Jsonb({**policy.to_json(), "budget": shown["budget"]}),
        "seeds": Jsonb(d.get("seeds", [])),
        "hops": Jsonb(shown["path"]),
        "pruned": Jsonb(d.get("pruned", [])),
        "portals": Jsonb(d.get("portals", [])),
        "evidence": Jsonb(shown["evidence"]),
        "claims": Jsonb(shown["claims"]),
        "answer": answer.answer,
        "withheld": answer.withheld,
        "confidence": min(max(answer.confidence, 0.0), 1.0),
        "warnings": answer.warnings,
        "timings": Jsonb(d.get("timings", {})),
    }).fetchone()
    assert row is not None
    return int(row[0])
