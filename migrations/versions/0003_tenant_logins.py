"""Logins bound to tenants: setting `tortus.tenant` is no longer enough to read a tenant.

Every tenant table's policy also asks `tortus.tenant_allowed()`: the session's login may enter
the tenant it set when it administers tenants (a member of tortus_admin, such as the migrating
role), when it is bound to that tenant (`tortus.tenant_login`, managed with `tortus-pg tenant
grant-login`), or when the tenant was entered in this transaction through `tortus.enter_tenant`
with a valid API key (the proof is a hash of a server secret, the tenant, the backend and the
transaction's start, which the caller cannot compute). The check runs once per statement (a
scalar subquery), not per row.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-02
"""

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

TABLES = """
create table tortus.tenant_login (
    login text not null,
    tenant_id text not null references tortus.tenant on delete cascade,
    granted_at timestamptz not null default now(),
    primary key (login, tenant_id)
);
create table tortus.tenant_secret (
    only_row boolean primary key default true check (only_row),
    secret text not null
);
insert into tortus.tenant_secret (secret)
    values (encode(sha256(convert_to(gen_random_uuid()::text || gen_random_uuid()::text, 'UTF8')), 'hex'));
revoke all on tortus.tenant_login, tortus.tenant_secret from public;
"""

FUNCTIONS = """
create function tortus.tenant_proof(tenant text) returns text
language sql stable security definer
set search_path = pg_catalog, pg_temp
as $$
    select encode(sha256(convert_to(
        (select s.secret from tortus.tenant_secret s) || ':' || tenant || ':' || pg_backend_pid()::text || ':'
        || extract(epoch from transaction_timestamp())::text, 'UTF8')), 'hex')
$$;
revoke all on function tortus.tenant_proof(text) from public;
comment on function tortus.tenant_proof(text) is
'The proof tortus.enter_tenant leaves that this transaction entered a tenant with an API key: a '
'hash of the server''s secret, the tenant, the backend and the transaction''s start. Owner only.';

create function tortus.tenant_allowed() returns boolean
language sql stable security definer
set search_path = pg_catalog, pg_temp
as $$
    select coalesce(current_setting('tortus.tenant', true), '') <> '' and (
        pg_has_role(session_user, 'tortus_admin', 'member')
        or exists (select 1 from tortus.tenant_login l
                   where l.login = session_user::text and l.tenant_id = current_setting('tortus.tenant', true))
        or current_setting('tortus.tenant_proof', true) = tortus.tenant_proof(current_setting('tortus.tenant', true)))
$$;
revoke all on function tortus.tenant_allowed() from public;
comment on function tortus.tenant_allowed() is
'Whether this session may see the tenant set in tortus.tenant: its login administers tenants, is '
'bound to that tenant (tortus.tenant_login), or entered it with an API key (tortus.enter_tenant). '
'Every tenant table''s policy asks it, once per statement.';
grant execute on function tortus.tenant_allowed() to tortus_app, tortus_analyst, tortus_admin;
"""

_POLICY = """
do $$
declare t text;
begin
    for t in select tablename from pg_policies where schemaname = 'tortus' and policyname = 'tenant_isolation' loop
        execute format('alter policy tenant_isolation on tortus.%%I using (%(check)s) with check (%(check)s)', t);
    end loop;
end
$$;
"""
BOUND = "tenant_id = current_setting(''tortus.tenant'', true) and (select tortus.tenant_allowed())"
SETTING = "tenant_id = current_setting(''tortus.tenant'', true)"


def upgrade() -> None:
    op.execute(TABLES)
    op.execute(FUNCTIONS)
    op.execute(_POLICY % {"check": BOUND})


def downgrade() -> None:
    op.execute(_POLICY % {"check": SETTING})
    op.execute("drop function tortus.tenant_allowed(); drop function tortus.tenant_proof(text)")
    op.execute("drop table tortus.tenant_secret; drop table tortus.tenant_login")
