-- Search: exact Okapi BM25 over chunk nodes, pgvector HNSW search, and weighted RRF fusion.
-- Every function filters the current tenant explicitly (row-level security applies too).
-- Each is declared to return about 10 rows (its default k), not the planner's 1000 for a
-- set-returning function: a query joining its hits to nodes or spans then looks them up by
-- key instead of reading the tenant's whole tables.

drop function if exists tortus.bm25_search(text, integer, double precision, double precision, regconfig);
drop function if exists tortus.bm25_search(text, integer, double precision, double precision, regconfig, bigint[]);
create or replace function tortus.bm25_term_score(
    idf double precision, tf integer, doc_len integer, avgdl double precision, k1 double precision, b double precision
) returns double precision
language sql immutable parallel safe
-- A SQL-standard body without a SET clause, so the planner inlines it into each caller.
return idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * doc_len / avgdl));

comment on function tortus.bm25_term_score(double precision, integer, integer, double precision, double precision,
                                      double precision) is
'One lexeme''s Okapi BM25 contribution to a document''s score: idf * tf * (k1 + 1) / '
'(tf + k1 * (1 - b + b * doc_len / avgdl)).';

create or replace function tortus.bm25_search(
    query text, k integer default 10, k1 double precision default 1.2, b double precision default 0.75,
    config regconfig default 'english', within bigint[] default null
) returns table (node_id bigint, score double precision, rank integer)
language plpgsql stable parallel safe rows 10
set search_path = pg_catalog, pg_temp
-- Each statement below keeps one plan per session, its tenant's partition chosen as it starts:
-- planned anew at every call, they cost as much as they run on a small tenant.
set plan_cache_mode = force_generic_plan
as $$
#variable_conflict use_column
declare
    v_tenant constant text := tortus.current_tenant();
    v_n double precision;
    v_avgdl double precision;
    v_terms text[];
    v_idf double precision[];
    v_rare text[];
    v_common_bound double precision;
    v_candidates bigint[];
    v_found bigint;
begin
    select c.n_docs, c.total_len::float8 / greatest(c.n_docs, 1) into v_n, v_avgdl
    from tortus.bm25_corpus c where c.tenant_id = v_tenant;
    if v_n is null or k <= 0 then
        return;
    end if;
    -- The query's lexemes the corpus has, with Lucene's non-negative IDF ln(1 + (N - df + 0.5) / (df + 0.5)).
    -- A lexeme in more than a twentieth of the documents is common; the others are rare. A
    -- document's score from common lexemes alone is below the sum of their bounds idf * (k1 + 1).
    select array_agg(t.lexeme), array_agg(ln(1 + (v_n - t.df + 0.5) / (t.df + 0.5))),
           array_agg(t.lexeme) filter (where t.df <= v_n / 20),
           coalesce(sum(ln(1 + (v_n - t.df + 0.5) / (t.df + 0.5)) * (k1 + 1)) filter (where t.df > v_n / 20), 0)
      into v_terms, v_idf, v_rare, v_common_bound
    from tortus.bm25_term t
    where t.tenant_id = v_tenant
      and t.lexeme = any(array(select distinct l.lexeme from unnest(to_tsvector(config, left(query, 10000))) l));
    if v_terms is null then
        return;
    end if;
    -- MaxScore: score only the documents holding a rare lexeme (on every lexeme). When k of them
    -- score above what common lexemes alone could give, no other document can enter the top k:
    -- the result is exact without reading the common lexemes' long posting lists. Nor can a
    -- document whose rare lexemes' score plus every common lexeme's bound stays below the k-th
    -- best rare lexemes' score, so it is not scored in full. `within` names the documents to
    -- score outright.
    if within is not null then
        v_candidates := within;
        v_common_bound := '-infinity';
    elsif v_rare is not null and v_common_bound > 0 then
        with partial as (
            select p.node_id,
                   sum(tortus.bm25_term_score(w.idf, p.tf, p.doc_len, v_avgdl, k1, b)) as score
            from tortus.bm25_posting p
            join unnest(v_terms, v_idf) as w(lexeme, idf) on w.lexeme = p.lexeme
            where p.tenant_id = v_tenant and p.lexeme = any(v_rare)
            group by p.node_id
        ), kth as (
            select x.score from partial x order by x.score desc offset greatest(k, 1) - 1 limit 1
        )
        select coalesce(array_agg(x.node_id), '{}') into v_candidates
        from partial x
        where x.score + v_common_bound >= coalesce((select kth.score from kth), '-infinity');
    end if;
    if within is not null or cardinality(v_candidates) >= k then
        -- Both predicates on the postings' key: a lookup per (lexeme, candidate), not a scan
        -- of the common lexemes' postings. The key's index holds tf and the document's length,
        -- so scoring reads nothing else.
        return query
        with scored as (
            select p.node_id,
                   sum(tortus.bm25_term_score(w.idf, p.tf, p.doc_len, v_avgdl, k1, b)) as score
            from tortus.bm25_posting p
            join unnest(v_terms, v_idf) as w(lexeme, idf) on w.lexeme = p.lexeme
            where p.tenant_id = v_tenant and p.lexeme = any(v_terms) and p.node_id = any(v_candidates)
            group by p.node_id
        ), top as (
            select s.node_id, s.score from scored s order by s.score desc, s.node_id limit k
        )
        select t.node_id, t.score, (row_number() over (order by t.score desc, t.node_id))::integer
        from top t
        where (select min(x.score) > v_common_bound from top x)
        order by t.score desc, t.node_id;
        get diagnostics v_found = row_count;
        if v_found > 0 or within is not null then
            return;
        end if;
    end if;
    -- Every posting of every lexeme (the lexeme predicate sits on the postings themselves, so
    -- the index serves it under row-level security).
    return query
    with scored as (
        select p.node_id, sum(tortus.bm25_term_score(w.idf, p.tf, p.doc_len, v_avgdl, k1, b)) as score
        from tortus.bm25_posting p
        join unnest(v_terms, v_idf) as w(lexeme, idf) on w.lexeme = p.lexeme
        where p.tenant_id = v_tenant and p.lexeme = any(v_terms)
        group by p.node_id
    )
    select s.node_id, s.score, (row_number() over (order by s.score desc, s.node_id))::integer
    from scored s
    order by s.score desc, s.node_id
    limit greatest(k, 0);
end
$$;

comment on function tortus.bm25_search(text, integer, double precision, double precision, regconfig, bigint[]) is
'Exact Okapi BM25 over the current tenant''s chunk nodes: score = sum over query lexemes of '
'idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * doclen / avgdl)) with idf = ln(1 + (N - df + 0.5) / (df + 0.5)). '
'The query is tokenized by the text search configuration (default english; exact tokens such as '
'7.3.2, E-1042 and 4.2 survive as lexemes); statistics come from tortus.bm25_* tables kept exact '
'by triggers. Returns the top k (node_id, score, rank); with `within`, the top k among those chunks '
'(statistics stay the whole corpus''s). Exact, but a query mixing rare and common lexemes scores '
'only the documents holding a rare one when that provably decides the top k (MaxScore pruning).';

drop function if exists tortus.vector_search(vector, integer, integer);
create or replace function tortus.vector_search(query vector, k integer default 10, ef_search integer default 100)
returns table (node_id bigint, distance double precision, score double precision, rank integer)
language plpgsql volatile rows 10
set search_path = pg_catalog, pg_temp
as $$
declare
    ext text := (select extnamespace::regnamespace::text from pg_extension where extname = 'vector');
    dim integer;
    kind text;
    old_ef text;
    old_scan text;
begin
    if query is null or k <= 0 then
        return;
    end if;
    execute format('select %s.vector_dims($1)', ext) into dim using query;
    kind := tortus.vector_index_type(dim);
    -- Index-scan options for this call only: set here, put back before returning. (A SET
    -- clause on the function would need pgvector loaded when the function is created.)
    old_ef := current_setting('hnsw.ef_search');
    old_scan := current_setting('hnsw.iterative_scan');
    perform set_config('hnsw.ef_search', greatest(ef_search, k, 1)::text, true);
    perform set_config('hnsw.iterative_scan', 'relaxed_order', true);
    -- The HNSW index is an expression index per dimension (tortus.ensure_vector_index), so
    -- the dimension must appear as a literal for the planner to use it. So does the tenant, so
    -- that the plan holds its partition alone (pruned while planning, not at run time: a
    -- fifth of the planning time). Iterative scans keep reading the index until k rows
    -- survive the filters (row-level security applies as always).
    return query execute format(
        'select h.node_id, h.distance, 1 - h.distance, (row_number() over (order by h.distance, h.node_id))::integer '
        'from (select n.node_id, (n.embedding::%1$s.%4$s(%2$s) operator(%1$s.<=>) $1::%1$s.%4$s(%2$s)) as distance '
        '      from tortus.node n '
        '      where n.tenant_id = %3$L and n.kind = ''chunk'' '
        '        and %1$s.vector_dims(n.embedding) = %2$s '
        '      order by n.embedding::%1$s.%4$s(%2$s) operator(%1$s.<=>) $1::%1$s.%4$s(%2$s) limit $2) h '
        'order by h.distance, h.node_id', ext, dim, tortus.current_tenant(), kind)
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
      -- The second number of a range ("1945-1949", "the 2003-04 season") names nothing.
      and not (t.lexeme ~ '^-[0-9]+$'
               and left(query, 10000) ~ ('(^|[^[:alnum:]_.-])[0-9]+' || t.lexeme || '($|[^[:alnum:]_.-])'))
);

comment on function tortus.identifier_lexemes(text, regconfig) is
'The identifier-like lexemes of a query: tokens with at least two digits and a separator (. - _ /): '
'clause numbers such as 7.3.2, versions such as 4.2, the -1042 of error code E-1042. Plain numbers '
'such as years, ranges of numbers such as 1945-1949, and names such as p53 are not identifiers '
'(titles carrying a gene name are not definitions of it).';

create or replace function tortus.hybrid_search(
    query text, query_vector vector, k integer default 10,
    bm25_weight double precision default 1, vector_weight double precision default 1,
    rrf_k integer default 60, candidates integer default 100, config regconfig default 'english'
) returns table (
    node_id bigint, score double precision, bm25_rank integer, vector_rank integer, rank integer,
    heading_match boolean
)
language sql volatile rows 10
set search_path = pg_catalog, pg_temp
as $$
    with lexical as (
        select l.node_id, l.rank from tortus.bm25_search(query, greatest(candidates, k), config => config) l
    ), dense as (
        select v.node_id, v.rank from tortus.vector_search(query_vector, greatest(candidates, k)) v
    ), ids as materialized (
        -- Once per search: inlined, the call ran again for every fused row.
        select tortus.identifier_lexemes(query, config) as lexemes
    ), fused as (
        -- tortus.rrf of the two ranks, written out: a call of it per fused row is a statement
        -- of its own (its body aggregates): about a tenth of a search's time.
        select coalesce(l.node_id, d.node_id) as node_id,
               coalesce(bm25_weight / (rrf_k + l.rank), 0) + coalesce(vector_weight / (rrf_k + d.rank), 0) as score,
               l.rank as bm25_rank, d.rank as vector_rank
        from lexical l full join dense d on d.node_id = l.node_id
    ), labels as (
        -- The fused chunks' labels, looked up by key (a join would let the planner read every
        -- node of the tenant, not knowing how few rows the searches return).
        select n.node_id, n.label from tortus.node n
        where n.tenant_id = tortus.current_tenant() and n.node_id = any(array(select f.node_id from fused f))
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
        join labels n on n.node_id = f.node_id
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
