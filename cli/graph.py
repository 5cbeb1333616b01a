"""`tortus-pg graph …`: the tenant's graph in Apache AGE."""

from __future__ import annotations

import typer

from tortus_pg import age

from .context import console, owner_connection, settings

graph_app = typer.Typer(help="Mirror the tenant's graph into Apache AGE, for Cypher and the walk.",
                        no_args_is_help=True)


@graph_app.command("sync-age")
def sync_age(ctx: typer.Context) -> None:
    """Create or update the tenant's Apache AGE graph (vertices Node, an edge label per edge type,
    portal). Ingest, update, removal and `index` keep it in step afterwards; query it with
    `select * from tortus.cypher('MATCH ...')`, walk it with `query --traversal age`."""
    tenant = settings(ctx).tenant
    with owner_connection(ctx) as conn:
        done = age.sync(conn, tenant)
        graph = conn.execute("select tortus.age_graph(%s)", [tenant]).fetchone()
    assert graph is not None
    console.print(f"tenant {tenant}: AGE graph {graph[0]} mirrors {done.nodes} nodes and {done.edges} edges "
                  f"({done.added} rows added, {done.removed} removed, {done.changed} changed)")
