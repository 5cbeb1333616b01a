"""Each tenant's rows in partitions of their own.

Every table keyed by tenant becomes a table partitioned by list of `tenant_id`, with one
partition per tenant in schema `tortus_tenant` (no role but the owner may use it; callers
reach the rows through the parent tables and their policies). A statement under a tenant's
policy prunes every other tenant's partition before it runs, so other tenants' rows never
enter a plan: `EXPLAIN ANALYZE` no longer counts them ("Rows Removed by Filter"), and an
index scan, an HNSW neighbourhood included, holds the tenant's rows only.

Creating a tenant creates its partitions (a trigger on `tortus.tenant`); deleting a tenant
drops them. The conversion keeps every row, identity counters, constraint and index names,
policies and grants; downgrade converts back.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02
"""

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

# In the order of their foreign keys: a table comes after every table it references.
TABLES = (
    "source", "node", "edge", "subgraph", "membership", "portal", "evidence_span",
    "bm25_posting", "bm25_doc", "bm25_term", "bm25_corpus", "embedding_cache",
    "query_trace", "eval_run", "eval_result",
)
_ARRAY = "array[" + ", ".join(f"'{t}'" for t in TABLES) + "]"

FUNCTIONS = f"""
create schema tortus_tenant;
revoke all on schema tortus_tenant from public;

create function tortus.tenant_partition(tbl text, tenant text) returns text
language sql immutable
set search_path = pg_catalog, pg_temp
as $$ select tbl || '_' || left(md5(tenant), 12) $$;
comment on function tortus.tenant_partition(text, text) is
'The name, in schema tortus_tenant, of the partition holding one tenant''s rows of a table.';

create function tortus.add_tenant_partitions(tenant text) returns void
language plpgsql security definer
set search_path = pg_catalog, pg_temp
as $$
declare t text;
begin
    foreach t in array {_ARRAY} loop
        execute format('create table if not exists tortus_tenant.%I partition of tortus.%I for values in (%L)',
                       tortus.tenant_partition(t, tenant), t, tenant);
    end loop;
end
$$;
revoke all on function tortus.add_tenant_partitions(text) from public;
comment on function tortus.add_tenant_partitions(text) is
'Create a tenant''s partition of every tenant table (run by the trigger on tortus.tenant). Owner only.';

create function tortus.drop_tenant_partitions(tenant text) returns void
language plpgsql security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    tables text[] := {_ARRAY};
    t text;
    part text;
begin
    -- Referencing tables first, so each detach finds no rows pointing into its partition.
    for i in reverse cardinality(tables)..1 loop
        t := tables[i];
        part := tortus.tenant_partition(t, tenant);
        if to_regclass(format('tortus_tenant.%I', part)) is not null then
            execute format('alter table tortus.%I detach partition tortus_tenant.%I', t, part);
            execute format('drop table tortus_tenant.%I', part);
        end if;
    end loop;
end
$$;
revoke all on function tortus.drop_tenant_partitions(text) from public;
comment on function tortus.drop_tenant_partitions(text) is
'Drop a tenant''s partitions with their rows (run by the trigger on tortus.tenant). Owner only.';

create function tortus.tenant_partitions_follow() returns trigger
language plpgsql security definer
set search_path = pg_catalog, pg_temp
as $$
begin
    if tg_op = 'INSERT' then
        perform tortus.add_tenant_partitions(new.tenant_id);
        return new;
    end if;
    perform tortus.drop_tenant_partitions(old.tenant_id);
    return old;
end
$$;
revoke all on function tortus.tenant_partitions_follow() from public;
comment on function tortus.tenant_partitions_follow() is
'Trigger on tortus.tenant: a new tenant gets its partitions, a deleted one loses them.';
"""

TRIGGERS = """
create trigger tenant_partitions_add after insert on tortus.tenant
    for each row execute function tortus.tenant_partitions_follow();
create trigger tenant_partitions_drop before delete on tortus.tenant
    for each row execute function tortus.tenant_partitions_follow();
"""

# Rebuild every tenant table as partitioned (or, going down, as a plain table): move the
# old table aside with its indexes, create the new one with the same columns, constraints
# and index names, copy the rows, then restore foreign keys, counters, policies and grants.
# Views and SQL-bodied functions over the old tables go with them; sql/ is re-applied after
# every migration and brings them back.
REBUILD = """
do $$
declare
    tables text[] := %(tables)s;
    t text;
    stmt text;
    rec record;
    fks text[] := '{}';
    later text[] := '{}';
begin
    create schema tortus_rebuild;
    for rec in select c.conrelid::regclass::text as tbl, c.conname, pg_get_constraintdef(c.oid) as def
               from pg_constraint c join pg_class r on r.oid = c.conrelid
               where c.contype = 'f' and c.conparentid = 0 and r.relnamespace = 'tortus'::regnamespace
                 and r.relname = any(tables) loop
        fks := fks || format('alter table %%s add constraint %%I %%s', rec.tbl, rec.conname, rec.def);
        execute format('alter table %%s drop constraint %%I', rec.tbl, rec.conname);
    end loop;
    foreach t in array tables loop
        for rec in select c.conname, pg_get_constraintdef(c.oid) as def from pg_constraint c
                   where c.conrelid = format('tortus.%%I', t)::regclass and c.contype in ('p', 'u') loop
            later := later || format('alter table tortus.%%I add constraint %%I %%s', t, rec.conname, rec.def);
        end loop;
        for rec in select pg_get_indexdef(i.indexrelid) as def from pg_index i
                   where i.indrelid = format('tortus.%%I', t)::regclass
                     and not exists (select 1 from pg_constraint c where c.conindid = i.indexrelid) loop
            later := later || replace(rec.def, ' ON ONLY tortus.', ' ON tortus.');
        end loop;
        execute format('alter table tortus.%%I set schema tortus_rebuild', t);
        execute format('create table tortus.%%I (like tortus_rebuild.%%I including defaults including identity '
                       'including constraints including generated including storage including comments) %(partition)s',
                       t, t);
    end loop;
    foreach stmt in array later loop
        execute stmt;
    end loop;
    %(partitions)s
    foreach t in array tables loop
        execute format('insert into tortus.%%I overriding system value select * from tortus_rebuild.%%I', t, t);
        for rec in select a.attname from pg_attribute a
                   where a.attrelid = format('tortus.%%I', t)::regclass and a.attidentity <> '' loop
            execute format('select setval(pg_get_serial_sequence(%%L, %%L), coalesce(max(%%I), 0) + 1, false) '
                           'from tortus.%%I', 'tortus.' || t, rec.attname, rec.attname, t);
        end loop;
        execute format('alter table tortus.%%I enable row level security', t);
        execute format('alter table tortus.%%I force row level security', t);
        execute format('create policy tenant_isolation on tortus.%%I using (%(check)s) with check (%(check)s)', t);
        execute format('create policy tenant_admin on tortus.%%I to tortus_admin using (true) with check (true)', t);
        execute format('grant select, insert, update, delete on tortus.%%I to tortus_app', t);
        execute format('grant select on tortus.%%I to tortus_analyst', t);
    end loop;
    foreach stmt in array fks loop
        execute stmt;
    end loop;
    drop schema tortus_rebuild cascade;
end
$$;
"""
CHECK = "tenant_id = current_setting(''tortus.tenant'', true) and (select tortus.tenant_allowed())"
ADD_PARTITIONS = "perform tortus.add_tenant_partitions(x.tenant_id) from tortus.tenant x;"


def upgrade() -> None:
    op.execute(FUNCTIONS)
    op.execute(REBUILD % {"tables": _ARRAY, "partition": "partition by list (tenant_id)",
                          "partitions": ADD_PARTITIONS, "check": CHECK})
    op.execute(TRIGGERS)


def downgrade() -> None:
    op.execute("drop trigger tenant_partitions_drop on tortus.tenant")
    op.execute("drop trigger tenant_partitions_add on tortus.tenant")
    op.execute(REBUILD % {"tables": _ARRAY, "partition": "", "partitions": "", "check": CHECK})
    op.execute("""
drop function tortus.tenant_partitions_follow();
drop function tortus.drop_tenant_partitions(text);
drop function tortus.add_tenant_partitions(text);
drop function tortus.tenant_partition(text, text);
drop schema tortus_tenant;
""")
