"""`tortus-pg tenant …` and `tortus-pg key …`."""

from __future__ import annotations

import typer
from rich.table import Table

from tortus_pg import tenants
from tortus_pg.query.support import THRESHOLD

from .context import console, owner_connection

tenant_app = typer.Typer(help="Create, list and delete tenants.", no_args_is_help=True)
key_app = typer.Typer(help="Create and revoke API keys.", no_args_is_help=True)


@tenant_app.command("create")
def tenant_create(
    ctx: typer.Context,
    tenant_id: str = typer.Argument(..., help="Lowercase id: letters, digits, '-' and '_'."),
    name: str = typer.Option(None, help="Display name (defaults to the id)."),
) -> None:
    """Create a tenant (no-op if it exists)."""
    with owner_connection(ctx) as conn:
        created = tenants.create_tenant(conn, tenant_id, name)
        conn.commit()
    console.print(f"tenant {tenant_id} {'created' if created else 'already exists'}")


@tenant_app.command("list")
def tenant_list(ctx: typer.Context) -> None:
    """List tenants with their source and node counts."""
    with owner_connection(ctx) as conn:
        rows = tenants.list_tenants(conn)
    table = Table("tenant", "name", "sources", "nodes", "support needed", "created")
    for t in rows:
        needed = "default" if t.min_support is None else f"{t.min_support:.2f}"
        table.add_row(t.tenant_id, t.name, str(t.sources), str(t.nodes), needed, f"{t.created_at:%Y-%m-%d %H:%M}")
    console.print(table)


@tenant_app.command("min-support")
def tenant_min_support(
    ctx: typer.Context,
    tenant_id: str = typer.Argument(...),
    value: float = typer.Argument(None, help="The support (0 to 1) an answer needs; leave out with --default."),
    default: bool = typer.Option(False, "--default", help=f"Use the engine's default ({THRESHOLD}) again."),
) -> None:
    """Set the support the tenant's answers need when a question does not say (choose it on the
    abstention curve `tortus-pg eval` prints for a golden set of the tenant's documents)."""
    if (value is None) == (not default):
        raise typer.BadParameter("give a value from 0 to 1, or --default")
    with owner_connection(ctx) as conn:
        tenants.set_min_support(conn, tenant_id, value)
        conn.commit()
    needed = f"{THRESHOLD:.2f} (the default)" if default else f"{value:.2f}"
    console.print(f"tenant {tenant_id}: answers need support {needed}")


@tenant_app.command("grant-login")
def tenant_grant_login(
    ctx: typer.Context,
    login: str = typer.Argument(..., help="An existing login role (create role … login password …)."),
    tenant_id: str = typer.Argument(...),
    app_role: bool = typer.Option(False, "--app", help="Grant the application role instead of the analyst's."),
    group: list[str] = typer.Option(None, "--group", help="Read only sources open to this group (or to all); "
                                    "repeat for several. Default: every source."),
) -> None:
    """Bind a database login to a tenant: it sees that tenant's rows and no other's, whatever
    it sets tortus.tenant to; with --group, only what sources open to its groups support."""
    with owner_connection(ctx) as conn:
        tenants.grant_login(conn, login, tenant_id, "app" if app_role else "analyst", group or None)
        conn.commit()
    groups = f" (groups: {', '.join(group)})" if group else ""
    console.print(f"login {login} bound to tenant {tenant_id}{groups}")


@tenant_app.command("revoke-login")
def tenant_revoke_login(ctx: typer.Context, login: str = typer.Argument(...),
                        tenant_id: str = typer.Argument(...)) -> None:
    """Unbind a login from a tenant."""
    with owner_connection(ctx) as conn:
        tenants.revoke_login(conn, login, tenant_id)
        conn.commit()
    console.print(f"login {login} no longer bound to tenant {tenant_id}")


@tenant_app.command("delete")
def tenant_delete(
    ctx: typer.Context,
    tenant_id: str = typer.Argument(...),
    yes: bool = typer.Option(False, "--yes", help="Do not ask for confirmation."),
) -> None:
    """Delete a tenant and everything it owns."""
    if not yes:
        typer.confirm(f"Delete tenant {tenant_id} and all its data?", abort=True)
    with owner_connection(ctx) as conn:
        tenants.delete_tenant(conn, tenant_id)
        conn.commit()
    console.print(f"tenant {tenant_id} deleted")


@key_app.command("create")
def key_create(
    ctx: typer.Context,
    tenant_id: str = typer.Argument(...),
    scope: list[str] = typer.Option(["query"], "--scope", help="query, ingest or admin; repeat for several."),
    label: str = typer.Option("", help="A note to recognise the key by."),
    group: list[str] = typer.Option(None, "--group", help="Read only sources open to this group (or to all); "
                                    "repeat for several. Such a key may only query."),
) -> None:
    """Create an API key; it is shown once, only its hash is stored."""
    with owner_connection(ctx) as conn:
        new = tenants.create_key(conn, tenant_id, scope, label, group or None)
        conn.commit()
    console.print(
        f"key {new.key_id} for {new.tenant_id} (scopes: {', '.join(new.scopes)}); store it now, it is not shown again:"
    )
    print(new.key)


@key_app.command("revoke")
def key_revoke(ctx: typer.Context, tenant_id: str = typer.Argument(...), key_id: int = typer.Argument(...)) -> None:
    """Revoke an API key by id."""
    with owner_connection(ctx) as conn:
        tenants.revoke_key(conn, tenant_id, key_id)
        conn.commit()
    console.print(f"key {key_id} of {tenant_id} revoked")
