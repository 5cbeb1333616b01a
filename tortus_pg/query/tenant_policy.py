"""The policy of a question as the tenant it runs on takes it: checked against what the tenant
has, with the tenant's own defaults where the caller set none."""

from __future__ import annotations

from dataclasses import replace

import psycopg

from tortus_pg import age
from tortus_pg.errors import InvalidInput
from tortus_pg.policy import TraversalPolicy
from tortus_pg.query.support import tenant_threshold


def for_tenant(conn: psycopg.Connection, policy: TraversalPolicy) -> TraversalPolicy:
    """`policy` for the current tenant: a semantic group must be one of its subgraphs (a misspelt
    one would restrict the walk to nothing and pass for an unanswerable question), the Apache AGE
    traversal needs its mirror, and the support an answer needs is its own when the caller set
    none (`query.support.tenant_threshold`)."""
    if policy.semantic_group is not None:
        names = [r[0] for r in conn.execute("select name from tortus.subgraph order by name").fetchall()]
        if policy.semantic_group not in names:
            raise InvalidInput(f"no subgraph {policy.semantic_group!r}; this tenant has: {', '.join(names) or 'none'}")
    if policy.traversal == "age":
        age.require_mirror(conn)
    if policy.min_support is None:
        policy = replace(policy, min_support=tenant_threshold(conn))
    return policy
