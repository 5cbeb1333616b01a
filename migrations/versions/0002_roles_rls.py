"""Roles and tenant isolation: application, analyst and admin roles; forced RLS everywhere.

Roles are cluster-wide, so downgrade revokes this database's grants but keeps the roles
(other databases on the same server may use them).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

TABLES = (
    "tenant",
    "api_key",
    "source",
    "node",
    "edge",
    "subgraph",
    "membership",
    "portal",
    "evidence_span",
    "bm25_posting",
    "bm25_doc",
    "bm25_term",
    "bm25_corpus",
    "embedding_cache",
    "query_trace",
    "eval_run",
    "eval_result",
)
APP_WRITES = tuple(t for t in TABLES if t not in ("tenant", "api_key"))
ANALYST_READS = tuple(t for t in TABLES if t != "api_key")

ROLES = """
do $$
declare
    r text;
begin
    foreach r in array array['tortus_app', 'tortus_analyst', 'tortus_admin'] loop
        if not exists (select 1 from pg_roles where rolname = r) then
            execute format('create role %I nologin nobypassrls', r);
        end if;
    end loop;
    -- The migrating role administers tenants (through the admin policy, not BYPASSRLS)
    -- and may step down into the application and analyst roles with SET LOCAL ROLE.
    if not pg_has_role(current_user, 'tortus_admin', 'usage') then
        execute format('grant tortus_admin to %I', current_user);
    end if;
    if not pg_has_role(current_user, 'tortus_app', 'usage') then
        execute format('grant tortus_app to %I', current_user);
    end if;
    if not pg_has_role(current_user, 'tortus_analyst', 'usage') then
        execute format('grant tortus_analyst to %I', current_user);
    end if;
end
$$;
grant usage on schema tortus to tortus_app, tortus_analyst, tortus_admin;
"""


def upgrade() -> None:
    op.execute(ROLES)
    op.execute(f"grant select on {', '.join('tortus.' + t for t in ('tenant',) + APP_WRITES)} to tortus_app")
    op.execute(f"grant insert, update, delete on {', '.join('tortus.' + t for t in APP_WRITES)} to tortus_app")
    op.execute(f"grant select on {', '.join('tortus.' + t for t in ANALYST_READS)} to tortus_analyst")
    for table in TABLES:
        op.execute(f"alter table tortus.{table} enable row level security")
        op.execute(f"alter table tortus.{table} force row level security")
        op.execute(
            f"create policy tenant_isolation on tortus.{table} "
            "using (tenant_id = current_setting('tortus.tenant', true)) "
            "with check (tenant_id = current_setting('tortus.tenant', true))"
        )
        op.execute(f"create policy tenant_admin on tortus.{table} to tortus_admin using (true) with check (true)")


def downgrade() -> None:
    for table in TABLES:
        op.execute(f"drop policy tenant_admin on tortus.{table}")
        op.execute(f"drop policy tenant_isolation on tortus.{table}")
        op.execute(f"alter table tortus.{table} no force row level security")
        op.execute(f"alter table tortus.{table} disable row level security")
    op.execute("revoke all on all tables in schema tortus from tortus_app, tortus_analyst")
    op.execute("revoke usage on schema tortus from tortus_app, tortus_analyst, tortus_admin")
