"""Rows a tenant test needs: a source and concept nodes, written inside the tenant's scope."""

from collections.abc import Sequence

import psycopg

from tortus_pg.db import tenant_scope

SOURCE = ("insert into tortus.source (tenant_id, uri, kind, sha256, text) "
          "values (tortus.current_tenant(), %s, 'markdown', repeat('0', 64), 'text') returning source_id")
NODE = ("insert into tortus.node (tenant_id, kind, key, label, source_id) "
        "values (tortus.current_tenant(), 'concept', %s, %s, %s) returning node_id")


def seed_nodes(conn: psycopg.Connection, tenant: str, labels: Sequence[str]) -> None:
    """A source `<tenant>.md` in `tenant` with a concept node of each label (keys k0, k1, …)."""
    with tenant_scope(conn, tenant):
        source = conn.execute(SOURCE, [f"{tenant}.md"]).fetchone()[0]  # type: ignore[index]
        for i, label in enumerate(labels):
            conn.execute(NODE, [f"k{i}", label, source])
