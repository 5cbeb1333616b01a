-- Vector indexes: one HNSW index per embedding dimension in use. pgvector indexes vectors of up
-- to 2,000 dimensions; wider ones (up to 4,000, e.g. OpenAI's 3,072-dimensional model) are
-- indexed as half-precision vectors (halfvec), and searched the same way.

create or replace function tortus.vector_index_type(dim integer) returns text
language plpgsql immutable
set search_path = pg_catalog, pg_temp
as $$
begin
    if dim between 1 and 2000 then
        return 'vector';
    elsif dim between 2001 and 4000 then
        return 'halfvec';
    end if;
    raise exception 'HNSW indexes support 1 to 4000 dimensions (halfvec above 2000), got %', dim
        using errcode = '22023';
end
$$;

comment on function tortus.vector_index_type(integer) is
'The pgvector type embeddings of this dimension are indexed and searched as: vector up to 2000 '
'dimensions, halfvec (half precision) from 2001 to 4000; an error beyond.';

create or replace function tortus.ensure_vector_index(dim integer) returns text
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
declare
    name text := format('node_embedding_%s_hnsw', dim);
    ext text := (select extnamespace::regnamespace::text from pg_extension where extname = 'vector');
    kind text := tortus.vector_index_type(dim);
begin
    -- search_path is pinned to pg_catalog, so pgvector's objects are named by their schema.
    -- ef_construction 256 (pgvector's default is 64): at 20,000 chunks of the scale suite,
    -- recall@10 at ef_search 100 rose from 0.69 to 0.82 for twice the build time (docs/benchmarks.md).
    execute format(
        'create index if not exists %I on tortus.node using hnsw ((embedding::%s.%s(%s)) %s.%s_cosine_ops) '
        'with (m = 16, ef_construction = 256) where %s.vector_dims(embedding) = %s',
        name, ext, kind, dim, ext, kind, ext, dim);
    return name;
end
$$;

comment on function tortus.ensure_vector_index(integer) is
'Create (if missing) the HNSW cosine index (m 16, ef_construction 256) for nodes whose '
'embeddings have this dimension; returns the index name. Queries must use embedding::vector(dim) '
'(halfvec(dim) above 2000 dimensions, tortus.vector_index_type) and the same predicate.';
