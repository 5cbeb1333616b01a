-- Vector indexes: one HNSW index per embedding dimension in use.

create or replace function tortus.ensure_vector_index(dim integer) returns text
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
declare
    name text := format('node_embedding_%s_hnsw', dim);
    ext text := (select extnamespace::regnamespace::text from pg_extension where extname = 'vector');
begin
    if dim < 1 or dim > 2000 then
        raise exception 'HNSW indexes support 1 to 2000 dimensions, got %', dim using errcode = '22023';
    end if;
    -- search_path is pinned to pg_catalog, so pgvector's objects are named by their schema.
    execute format(
        'create index if not exists %I on tortus.node using hnsw ((embedding::%s.vector(%s)) %s.vector_cosine_ops) '
        'where %s.vector_dims(embedding) = %s', name, ext, dim, ext, ext, dim);
    return name;
end
$$;

comment on function tortus.ensure_vector_index(integer) is
'Create (if missing) the HNSW cosine index for nodes whose embeddings have this dimension; '
'returns the index name. Queries must use embedding::vector(dim) and the same predicate.';
