-- Search: exact Okapi BM25 over chunk nodes, pgvector HNSW search, and weighted RRF fusion.
-- Every function filters the current tenant explicitly (row-level security applies too).

drop function if exists tortus.bm25_search(text, integer, double precision, double precision, regconfig);
drop function if exists tortus.bm25_search(text, integer, double precision, double precision, regconfig, bigint[]);
create or replace function tortus.bm25_search(
    query text, k integer default 10, k1 double precision default 1.2, b double precision default 0.75,
    config regconfig default 'english', within bigint[] default null
) returns table (node_id bigint, score double precision, rank integer)
language sql stable parallel safe
set search_path = pg_catalog, pg_temp
as $$
    with terms as (
        select array_agg(distinct t.lexeme) as lexemes
        from unnest(to_tsvector(config, left(query, 10000))) as t
    ), corpus as (
        select c.n_docs::float8 as n, c.total_len::float8 / greatest(c.n_docs, 1) as avgdl
        from tortus.bm25_corpus c where c.tenant_id = tortus.current_tenant()
    ), idf as (
        -- Lucene's non-negative IDF: ln(1 + (N - df + 0.5) / (df + 0.5)).
        select t.lexeme, ln(1 + (corpus.n - t.df + 0.5) / (t.df + 0.5)) as w
        from tortus.bm25_term t, corpus, terms
        where t.tenant_id = tortus.current_tenant() and t.lexeme = any(terms.lexemes)
    ), scored as (
        -- The lexeme predicate sits on the postings themselves (text = any() is leakproof, so
        -- the index serves it under row-level security).
        select p.node_id,
               sum(idf.w * p.tf * (k1 + 1) / (p.tf + k1 * (1 - b + b * d.doc_len / corpus.avgdl))) as score
        from tortus.bm25_posting p
        join idf on idf.lexeme = p.lexeme
        join tortus.bm25_doc d on d.tenant_id = p.tenant_id and d.node_id = p.node_id
        cross join corpus, terms
        where p.tenant_id = tortus.current_tenant() and p.lexeme = any(terms.lexemes)
          and (within is null or p.node_id = any(within))
        group by p.node_id
    )
    select s.node_id, s.score, (row_number() over (order by s.score desc, s.node_id))::integer
    from scored s
    order by s.score desc, s.node_id
    limit greatest(k, 0)
$$;

comment on function tortus.bm25_search(text, integer, double precision, double precision, regconfig, bigint[]) is
'Exact Okapi BM25 over the current tenant''s chunk nodes: score = sum over query lexemes of '
'idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * doclen / avgdl)) with idf = ln(1 + (N - df + 0.5) / (df + 0.5)). '
'The query is tokenized by the text search configuration (default english; exact tokens such as '
'7.3.2, E-1042 and 4.2 survive as lexemes); statistics come from tortus.bm25_* tables kept exact '
'by triggers. Returns the top k (node_id, score, rank); with `within`, the top k among those chunks '
'(statistics stay the whole corpus''s).';

drop function if exists tortus.vector_search(vector, integer, integer);
create or replace function tortus.vector_search(query vector, k integer default 10, ef_search integer default 100)
returns table (node_id bigint, distance double precision, score double precision, rank integer)
language plpgsql volatile
set search_path = pg_catalog, pg_temp
as $$
declare
    ext text := (select extnamespace::regnamespace::text from pg_extension where extname = 'vector');
    dim integer;
    old_ef text;
    old_scan text;
begin
    if query is null or k <= 0 then
        return;
    end if;
    execute format('select %s.vector_dims($1)', ext) into dim using query;
    -- Index-scan options for this call only: set here, put back before returning. (A SET
    -- clause on the function would need pgvector loaded when the function is created.)
    old_ef := current_setting('hnsw.ef_search');
    old_scan := current_setting('hnsw.iterative_scan');
    perform set_config('hnsw.ef_search', greatest(ef_search, k, 1)::text, true);
    perform set_config('hnsw.iterative_scan', 'relaxed_order', true);
    -- The HNSW index is an expression index per dimension (tortus.ensure_vector_index), so
    -- the dimension must appear as a literal for the planner to use it. Iterative scans keep
    -- reading the index until k rows survive the tenant filter.
    return query execute format(
        'select h.node_id, h.distance, 1 - h.distance, (row_number() over (order by h.distance, h.node_id))::integer '
        'from (select n.node_id, (n.embedding::%1$s.vector(%2$s) operator(%1$s.<=>) $1) as distance '
        '      from tortus.node n '
        '      where n.tenant_id = tortus.current_tenant() and n.kind = ''chunk'' '
        '        and %1$s.vector_dims(n.embedding) = %2$s '
        '      order by n.embedding::%1$s.vector(%2$s) operator(%1$s.<=>) $1 limit $2) h '
        'order by h.distance, h.node_id', ext, dim)
    using query, k;
    perform set_config('hnsw.ef_search', old_ef, true);
    perform set_config('hnsw.iterative_scan', old_scan, true);
end
$$;

comment on function tortus.vector_search(vector, integer, integer) is
'Nearest chunk nodes of the current tenant by cosine distance, through the HNSW index for the '
'query''s dimension, with pgvector iterative index scans (relaxed order, re-sorted) so the tenant '
'filter cannot starve results. ef_search trades recall for speed. Returns (node_id, distance, '
'score = 1 - distance, rank). Volatile because it sets (and restores) index-scan options.';

create or replace function tortus.rrf(ranks integer[], weights double precision[], rrf_k integer default 60)
returns double precision
language sql immutable parallel safe
return (select coalesce(sum(w / (rrf_k + r)), 0) from unnest(ranks, weights) as t(r, w) where r is not null);

comment on function tortus.rrf(integer[], double precision[], integer) is
'Weighted Reciprocal Rank Fusion score of one item: sum of weight / (rrf_k + rank) over the '
'lists it appears in (a NULL rank means absent from that list and contributes nothing).';

drop function if exists tortus.hybrid_search(text, vector, integer, double precision, double precision, integer, integer);
drop function if exists tortus.hybrid_search(
    text, vector, integer, double precision, double precision, integer, integer, regconfig);
create or replace function tortus.identifier_lexemes(query text, config regconfig default 'english')
returns text[]
language sql stable parallel safe
set search_path = pg_catalog, pg_temp
return (
    select coalesce(array_agg(distinct t.lexeme), '{}')
    from unnest(to_tsvector(config, left(query, 10000))) as t
    where t.lexeme ~ '[0-9]' and t.lexeme ~ '[.\-_/]' and t.lexeme ~ '[0-9][^0-9]*[0-9]'
);

comment on function tortus.identifier_lexemes(text, regconfig) is
'The identifier-like lexemes of a query: tokens with at least two digits and a separator (. - _ /): '
'clause numbers such as 7.3.2, versions such as 4.2, the -1042 of error code E-1042. Plain numbers '
'such as years and names such as p53 are not identifiers (titles carrying a gene name are not '
'definitions of it).';

create or replace function tortus.hybrid_search(
    query text, query_vector vector, k integer default 10,
    bm25_weight double precision default 1, vector_weight double precision default 1,
    rrf_k integer default 60, candidates integer default 100, config regconfig default 'english'
) returns table (
    node_id bigint, score double precision, bm25_rank integer, vector_rank integer, rank integer,
    heading_match boolean
)
language sql volatile
set search_path = pg_catalog, pg_temp
as $$
    with lexical as (
        select l.node_id, l.rank from tortus.bm25_search(query, greatest(candidates, k), config => config) l
    ), dense as (
        select v.node_id, v.rank from tortus.vector_search(query_vector, greatest(candidates, k)) v
    ), ids as (
        select tortus.identifier_lexemes(query, config) as lexemes
    ), fused as (
        select coalesce(l.node_id, d.node_id) as node_id,
               tortus.rrf(array[l.rank, d.rank], array[bm25_weight, vector_weight], rrf_k) as score,
               l.rank as bm25_rank, d.rank as vector_rank
        from lexical l full join dense d on d.node_id = l.node_id
    ), marked as (
        -- A chunk whose own heading (the last part of its label) carries every identifier of
        -- the query is where that identifier is defined: "clause 7.3.2" is answered by the
        -- clause headed 7.3.2, not by a passage that cites it. Such chunks go first.
        select f.*,
               cardinality(ids.lexemes) > 0 and f.bm25_rank is not null
               and tsvector_to_array(to_tsvector(config, regexp_replace(n.label, '^.* > ', ''))) @> ids.lexemes
                   as heading_match
        from fused f
        cross join ids
        join tortus.node n on n.tenant_id = tortus.current_tenant() and n.node_id = f.node_id
    )
    select m.node_id, m.score, m.bm25_rank, m.vector_rank,
           (row_number() over (order by m.heading_match desc, m.score desc, m.node_id))::integer, m.heading_match
    from marked m
    order by m.heading_match desc, m.score desc, m.node_id
    limit greatest(k, 0)
$$;

comment on function tortus.hybrid_search(text, vector, integer, double precision, double precision, integer, integer, regconfig) is
'Weighted Reciprocal Rank Fusion of tortus.bm25_search and tortus.vector_search: score = '
'bm25_weight / (rrf_k + bm25_rank) + vector_weight / (rrf_k + vector_rank), each leg taking its '
'top `candidates` (a missing rank contributes 0). When the query names identifiers '
'(tortus.identifier_lexemes), lexical hits whose own heading carries all of them are ranked first '
'(heading_match). Returns both component ranks; ties break by node_id.';
