"""What a thing the question names implements (a standard, a clause, a decision): its
requirements apply to the thing named."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import psycopg

_IMPLEMENTED = """
select e.src, x.label, e.dst, y.label,
       exists (select 1 from tortus.edge d where d.tenant_id = y.tenant_id and d.dst = y.node_id
               and d.type = 'defines')
from tortus.edge e
join tortus.node x on x.tenant_id = e.tenant_id and x.node_id = e.src
join tortus.node y on y.tenant_id = e.tenant_id and y.node_id = e.dst
where e.tenant_id = tortus.current_tenant() and e.type = 'implements' and e.src = any(%s::bigint[])
order by e.src, e.dst
"""


class Implemented(NamedTuple):
    """A named thing's `implements` edge: what it implements."""

    label: str
    standard: int
    standard_label: str
    defined: bool  # some chunk defines the standard


def implemented(conn: psycopg.Connection, nodes: Sequence[int]) -> list[Implemented]:
    """The `implements` edges leaving `nodes`."""
    rows = conn.execute(_IMPLEMENTED, [list(nodes)]).fetchall()
    return [Implemented(x, b, y, bool(d)) for _, x, b, y, d in rows]
