"""A new tenant's partitions are attached, not created in place, so queries never hold it up.

`create table … partition of` takes an ACCESS EXCLUSIVE lock on each tenant table, which
waits for every query running on any tenant and blocks every query behind it: on a server
answering questions back to back, a new tenant could wait indefinitely. Now each partition is
created on its own (like its parent) and attached, which takes a SHARE UPDATE EXCLUSIVE lock
on the parent: readers and the new tenant no longer wait for each other. A write in progress
on a table whose foreign keys point at one being attached still holds the attach up briefly.
Dropping a tenant still detaches and drops (an exclusive lock); `tenants` retries both.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03
"""

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

_BODY = """
create or replace function tortus.add_tenant_partitions(tenant text) returns void
language plpgsql security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    t text;
    part text;
begin
    for t in select c.relname from pg_partitioned_table p join pg_class c on c.oid = p.partrelid
             where c.relnamespace = 'tortus'::regnamespace order by c.relname loop
        part := tortus.tenant_partition(t, tenant);
        continue when to_regclass(format('tortus_tenant.%%I', part)) is not null;
        %s
    end loop;
end
$$;
"""

ATTACH = _BODY % """execute format('create table tortus_tenant.%I (like tortus.%I including defaults '
                       'including constraints including generated including storage including compression)',
                       part, t);
        execute format('alter table tortus.%I attach partition tortus_tenant.%I for values in (%L)',
                       t, part, tenant);"""

CREATE = _BODY % """execute format('create table tortus_tenant.%I partition of tortus.%I for values in (%L)',
                       part, t, tenant);"""


def upgrade() -> None:
    op.execute(ATTACH)


def downgrade() -> None:
    op.execute(CREATE)
