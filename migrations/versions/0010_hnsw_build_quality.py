"""The HNSW indexes are built with ef_construction 256 instead of pgvector's default 64.

On the scale suite's 100k-node tenant (19,948 chunks, hashed vectors) a graph built with 64
candidates per insert found 0.69 of the exact ten nearest chunks at ef_search 100 and 0.89 at
400; built with 256 it finds 0.82 and 0.95, for twice the build time (3 s to 6 s). Every HNSW
index on tortus.node (one per embedding dimension, `tortus.ensure_vector_index`) is rebuilt
here with the new setting, each tenant's partition with it; this reads every embedding once.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-05
"""

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

# Each index as `tortus.ensure_vector_index` makes it at this revision, with `options` for its build.
REBUILD = """
do $$
declare
    ext text := (select extnamespace::regnamespace::text from pg_extension where extname = 'vector');
    idx record;
    kind text;
begin
    for idx in
        select c.relname as name, substring(c.relname from '^node_embedding_([0-9]+)_hnsw$')::integer as dim
        from pg_class c join pg_index i on i.indexrelid = c.oid
        where i.indrelid = 'tortus.node'::regclass and c.relname ~ '^node_embedding_[0-9]+_hnsw$'
    loop
        kind := case when idx.dim <= 2000 then 'vector' else 'halfvec' end;
        execute format('drop index tortus.%I', idx.name);
        execute format(
            'create index %I on tortus.node using hnsw ((embedding::%s.%s(%s)) %s.%s_cosine_ops) '
            '{options}where %s.vector_dims(embedding) = %s', idx.name, ext, kind, idx.dim, ext, kind, ext, idx.dim);
    end loop;
end
$$
"""


def upgrade() -> None:
    op.execute(REBUILD.format(options="with (m = 16, ef_construction = 256) "))


def downgrade() -> None:
    op.execute(REBUILD.format(options=""))  # pgvector's defaults
