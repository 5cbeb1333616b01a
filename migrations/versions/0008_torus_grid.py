"""Each tenant's chunk count per cell of the torus, kept with its layout.

`tortus.local_density` counts the chunks within a radius of each seed. Up to 4,000 chunks it
counts them all; beyond, it read a fixed sample of the tenant's node pages (about a fifth of
them at 100k nodes, most of the function's 25-30 ms). The layout now stores a grid of chunk
counts (`tortus.rebuild_torus_grid`, run by `tortus-pg index`), each row as running sums, so a
large tenant's count is a few array reads per grid row whatever its size.

A grid counts every chunk of the tenant, so only callers who read every source see it (as only
they write the graph); a caller restricted to some readers' groups still counts from a sample
of the chunks it can read.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-04
"""

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

TABLE = """
create table tortus.torus_grid (
    tenant_id text not null references tortus.tenant on delete cascade,
    layout text not null default '' check (length(layout) <= 200),
    side integer not null check (side between 8 and 1024),
    chunks integer not null check (chunks >= 0),
    sums integer[] not null check (array_ndims(sums) = 2),
    built_at timestamptz not null default now(),
    primary key (tenant_id, layout)
) partition by list (tenant_id);
select tortus.add_tenant_partitions(t.tenant_id) from tortus.tenant t;
alter table tortus.torus_grid enable row level security;
alter table tortus.torus_grid force row level security;
create policy tenant_isolation on tortus.torus_grid
    using (tenant_id = current_setting('tortus.tenant', true) and (select tortus.tenant_allowed()))
    with check (tenant_id = current_setting('tortus.tenant', true) and (select tortus.tenant_allowed()));
create policy tenant_admin on tortus.torus_grid to tortus_admin using (true) with check (true);
create policy visible_evidence on tortus.torus_grid as restrictive for select
    using ((select tortus.caller_groups()) is null);
create policy writes_by_full_readers_insert on tortus.torus_grid as restrictive for insert
    with check ((select tortus.caller_groups()) is null);
create policy writes_by_full_readers_update on tortus.torus_grid as restrictive for update
    using ((select tortus.caller_groups()) is null);
create policy writes_by_full_readers_delete on tortus.torus_grid as restrictive for delete
    using ((select tortus.caller_groups()) is null);
grant select, insert, update, delete on tortus.torus_grid to tortus_app;
grant select on tortus.torus_grid to tortus_analyst;
"""

# Tenant tables in the order of their foreign keys (a table after every table it references);
# a tenant's partitions are dropped in reverse.
_BEFORE = ("source", "node", "edge", "subgraph", "membership", "portal", "evidence_span",
           "bm25_posting", "bm25_doc", "bm25_term", "bm25_corpus", "embedding_cache",
           "query_trace", "eval_run", "eval_result")

DROP_PARTITIONS = """
create or replace function tortus.drop_tenant_partitions(tenant text) returns void
language plpgsql security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    tables text[] := array[%s];
    t text;
    part text;
begin
    -- Referencing tables first, so each detach finds no rows pointing into its partition.
    for i in reverse cardinality(tables)..1 loop
        t := tables[i];
        part := tortus.tenant_partition(t, tenant);
        if to_regclass(format('tortus_tenant.%%I', part)) is not null then
            execute format('alter table tortus.%%I detach partition tortus_tenant.%%I', t, part);
            execute format('drop table tortus_tenant.%%I', part);
        end if;
    end loop;
end
$$;
"""


def _drop_partitions(tables: tuple[str, ...]) -> str:
    return DROP_PARTITIONS % ", ".join(f"'{t}'" for t in tables)


def upgrade() -> None:
    op.execute(TABLE)
    op.execute(_drop_partitions((*_BEFORE, "torus_grid")))


def downgrade() -> None:
    op.execute(_drop_partitions(_BEFORE))
    op.execute("drop table tortus.torus_grid")
