-- Exact BM25 statistics, kept consistent with tortus.node inside the writing transaction.
--
-- Every chunk node with a tsvector is one BM25 document. For each we keep one posting per
-- distinct lexeme (tf = number of positions of the lexeme, 1 for a lexeme stored without
-- positions), the document length (sum of tf), the document frequency of each lexeme and the
-- per-tenant corpus totals. Each posting also carries its document's length, so scoring reads
-- the postings' key index alone. Triggers on tortus.node maintain them; tortus.bm25_rebuild()
-- recomputes them from scratch.
--
-- The functions run as the invoker: the application role writes its own tenant's rows under
-- row-level security (its grants cover the bm25 tables), so nothing here is SECURITY DEFINER.
--
-- Concurrency: every writer of a tenant's statistics locks (or creates) that tenant's
-- bm25_corpus row before any bm25_term row. Two transactions ingesting into one tenant
-- therefore queue on the corpus row instead of deadlocking on term rows locked in different
-- orders; term rows are also touched in (tenant_id, lexeme) order within each statement.
-- The corpus row lock is held until commit, so keep slow work (embedding) before the first
-- chunk is written.

create or replace function tortus.bm25_terms(tsv tsvector)
returns table (lexeme text, tf integer)
language sql immutable parallel safe
begin atomic
    select l.lexeme, coalesce(array_length(l.positions, 1), 1)
    from unnest(tsv) as l;
end;

comment on function tortus.bm25_terms(tsvector) is
'The BM25 terms of a tsvector: one row per distinct lexeme with its term frequency (the number '
'of positions, or 1 for a lexeme stored without positions, e.g. after strip()). A tsvector '
'keeps at most 255 positions per lexeme, and all positions past 16383 collapse into one, so '
'tf is exact for chunk-sized texts, not for whole books.';

create or replace function tortus.bm25_doc_len(tsv tsvector)
returns integer
language sql immutable parallel safe
return (select coalesce(sum(coalesce(array_length(l.positions, 1), 1)), 0)::integer
        from unnest(tsv) as l);

comment on function tortus.bm25_doc_len(tsvector) is
'BM25 document length of a tsvector: the sum of tf over its lexemes (see tortus.bm25_terms).';

create or replace function tortus.bm25_apply(
    p_tenant text[], p_node bigint[], p_old tsvector[], p_new tsvector[]
) returns void
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
declare
    c record;
begin
    -- Corpus rows first (see the file header): they serialize a tenant's writers.
    for c in
        select x.tenant_id,
               count(x.new_tsv) - count(x.old_tsv) as n,
               coalesce(sum(tortus.bm25_doc_len(x.new_tsv)), 0)
                 - coalesce(sum(tortus.bm25_doc_len(x.old_tsv)), 0) as len
        from unnest(p_tenant, p_old, p_new) as x (tenant_id, old_tsv, new_tsv)
        group by x.tenant_id
        order by x.tenant_id
    loop
        if c.n >= 0 and c.len >= 0 then
            insert into tortus.bm25_corpus as k (tenant_id, n_docs, total_len)
            values (c.tenant_id, c.n, c.len)
            on conflict (tenant_id) do update
                set n_docs = k.n_docs + excluded.n_docs, total_len = k.total_len + excluded.total_len;
        else
            -- Removals only shrink an existing row. No upsert here: when a tenant is deleted,
            -- its corpus row may already be gone, and re-creating it would break its foreign key.
            update tortus.bm25_corpus k
            set n_docs = k.n_docs + c.n, total_len = k.total_len + c.len
            where k.tenant_id = c.tenant_id;
        end if;
    end loop;

    -- Postings and lengths: the old contribution goes (after a delete the foreign-key cascade
    -- has already removed it), the new one comes in. Lookups are written as
    -- `tenant_id = $1 and key = any($2)`, so that even a plan cached while the tables were
    -- small keeps using the primary keys as they grow within the transaction.
    for c in
        select x.tenant_id, array_agg(x.node_id) as node_ids
        from unnest(p_tenant, p_node, p_old) as x (tenant_id, node_id, tsv)
        where x.tsv is not null
        group by x.tenant_id
        order by x.tenant_id
    loop
        delete from tortus.bm25_posting p where p.tenant_id = c.tenant_id and p.node_id = any(c.node_ids);
        delete from tortus.bm25_doc d where d.tenant_id = c.tenant_id and d.node_id = any(c.node_ids);
    end loop;
    insert into tortus.bm25_posting (tenant_id, lexeme, node_id, tf, doc_len)
    select x.tenant_id, t.lexeme, x.node_id, t.tf, (sum(t.tf) over (partition by x.tenant_id, x.node_id))::integer
    from unnest(p_tenant, p_node, p_new) as x (tenant_id, node_id, tsv),
         tortus.bm25_terms(x.tsv) as t
    where x.tsv is not null;
    insert into tortus.bm25_doc (tenant_id, node_id, doc_len)
    select x.tenant_id, x.node_id, tortus.bm25_doc_len(x.tsv)
    from unnest(p_tenant, p_node, p_new) as x (tenant_id, node_id, tsv)
    where x.tsv is not null;

    -- Document frequencies: the net change per term is +1 per new document holding it and -1
    -- per old one. Term rows are touched in lexeme order: increments by upsert, then
    -- decrements, whose rows are locked in order first (UPDATE ... FROM locks in join order).
    for c in
        select s.tenant_id,
               array_agg(s.lexeme order by s.lexeme) filter (where s.delta > 0) as up_lexemes,
               array_agg(s.delta order by s.lexeme) filter (where s.delta > 0) as up,
               array_agg(s.lexeme order by s.lexeme) filter (where s.delta < 0) as down_lexemes,
               array_agg(s.delta order by s.lexeme) filter (where s.delta < 0) as down
        from (
            select v.tenant_id, v.lexeme, sum(v.sign)::integer as delta
            from (
                select x.tenant_id, l.lexeme, 1 as sign
                from unnest(p_tenant, p_new) as x (tenant_id, tsv), unnest(x.tsv) as l
                union all
                select x.tenant_id, l.lexeme, -1
                from unnest(p_tenant, p_old) as x (tenant_id, tsv), unnest(x.tsv) as l
            ) v
            group by v.tenant_id, v.lexeme
        ) s
        where s.delta <> 0
        group by s.tenant_id
        order by s.tenant_id
    loop
        if c.up_lexemes is not null then
            insert into tortus.bm25_term as t (tenant_id, lexeme, df)
            select c.tenant_id, d.lexeme, d.delta
            from unnest(c.up_lexemes, c.up) with ordinality as d (lexeme, delta, i)
            order by d.i
            on conflict (tenant_id, lexeme) do update set df = t.df + excluded.df;
        end if;
        if c.down_lexemes is not null then
            perform from tortus.bm25_term t
            where t.tenant_id = c.tenant_id and t.lexeme = any(c.down_lexemes)
            order by t.lexeme
            for update;
            -- A term whose df reaches 0 goes. A df below 0 would mean the statistics had drifted
            -- from tortus.node; the check constraint then fails (repair: tortus.bm25_rebuild).
            delete from tortus.bm25_term t
            using unnest(c.down_lexemes, c.down) as d (lexeme, delta)
            where t.tenant_id = c.tenant_id and t.lexeme = any(c.down_lexemes)
              and t.lexeme = d.lexeme and t.df + d.delta = 0;
            update tortus.bm25_term t
            set df = t.df + d.delta
            from unnest(c.down_lexemes, c.down) as d (lexeme, delta)
            where t.tenant_id = c.tenant_id and t.lexeme = any(c.down_lexemes)
              and t.lexeme = d.lexeme;
        end if;
    end loop;
end
$$;

comment on function tortus.bm25_apply(text[], bigint[], tsvector[], tsvector[]) is
'Apply a batch of document changes to the BM25 statistics. Element i of the parallel arrays '
'is one node: its tenant, its id, the tsvector it was counted with (NULL if it was not a BM25 '
'document) and the one it counts with now (NULL if it no longer is one). Called by the '
'triggers on tortus.node; runs as the invoker, under row-level security.';

create or replace function tortus.bm25_node_changes() returns trigger
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
    if tg_op = 'INSERT' then
        perform tortus.bm25_apply(array_agg(n.tenant_id), array_agg(n.node_id),
                                  array_agg(null::tsvector), array_agg(n.tsv))
        from new_rows n
        where n.kind = 'chunk' and n.tsv is not null
        having count(*) > 0;
    elsif tg_op = 'DELETE' then
        perform tortus.bm25_apply(array_agg(o.tenant_id), array_agg(o.node_id),
                                  array_agg(o.tsv), array_agg(null::tsvector))
        from old_rows o
        where o.kind = 'chunk' and o.tsv is not null
        having count(*) > 0;
    end if;
    return null;
end
$$;

comment on function tortus.bm25_node_changes() is
'Statement trigger on tortus.node (inserts and deletes, with transition tables new_rows / '
'old_rows): adds or removes the BM25 statistics of the chunk nodes written, in one batch.';

create or replace function tortus.bm25_node_update() returns trigger
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
    perform tortus.bm25_apply(array_agg(n.tenant_id), array_agg(n.node_id),
                              array_agg(case when o.kind = 'chunk' then o.tsv end),
                              array_agg(case when n.kind = 'chunk' then n.tsv end))
    from old_rows o
    join new_rows n on n.tenant_id = o.tenant_id and n.node_id = o.node_id
    where (o.kind = 'chunk' or n.kind = 'chunk')
      and (o.kind is distinct from n.kind or o.tsv is distinct from n.tsv)
    having count(*) > 0;
    return null;
end
$$;

comment on function tortus.bm25_node_update() is
'Statement trigger on tortus.node updates (transition tables old_rows / new_rows): replaces the '
'BM25 contribution of every node whose tsv or kind changed, in one batch; a node turning into '
'or out of a chunk is added or removed.';

-- All three triggers work per statement, on transition tables. Per row, every chunk would
-- update the same corpus row and the same common-term rows once more; PostgreSQL keeps each
-- version of a row until the transaction ends, so every update walks a longer chain and a bulk
-- write turns quadratic (measured: 5,000 chunks of 80 words in one INSERT took 70 s with row
-- triggers, 5 s with these; re-tokenizing 1,000 chunks in one UPDATE, 39 s against 5 s).
-- For the same reason, write chunks with multi-row statements (INSERT ... SELECT, COPY), not
-- thousands of single-row INSERTs in one transaction. The update trigger may not name columns
-- (transition tables forbid it), so it also sees updates that leave tsv and kind alone, such
-- as a layout pass; those cost a join over the transition tables, about 25 us per row.
create or replace trigger bm25_node_insert
    after insert on tortus.node
    referencing new table as new_rows
    for each statement execute function tortus.bm25_node_changes();

create or replace trigger bm25_node_delete
    after delete on tortus.node
    referencing old table as old_rows
    for each statement execute function tortus.bm25_node_changes();

create or replace trigger bm25_node_update
    after update on tortus.node
    referencing old table as old_rows new table as new_rows
    for each statement execute function tortus.bm25_node_update();

create or replace function tortus.bm25_rebuild(p_tenant text) returns bigint
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
declare
    n bigint;
begin
    if not exists (select from tortus.tenant t where t.tenant_id = p_tenant) then
        raise exception 'no tenant %', p_tenant using errcode = '22023';
    end if;
    -- Lock the corpus row first, as the triggers do, so a rebuild queues behind ingest.
    insert into tortus.bm25_corpus (tenant_id) values (p_tenant)
    on conflict (tenant_id) do update set n_docs = 0, total_len = 0;
    delete from tortus.bm25_posting p where p.tenant_id = p_tenant;
    delete from tortus.bm25_doc d where d.tenant_id = p_tenant;
    delete from tortus.bm25_term t where t.tenant_id = p_tenant;
    insert into tortus.bm25_posting (tenant_id, lexeme, node_id, tf, doc_len)
    select n.tenant_id, t.lexeme, n.node_id, t.tf, (sum(t.tf) over (partition by n.node_id))::integer
    from tortus.node n, tortus.bm25_terms(n.tsv) as t
    where n.tenant_id = p_tenant and n.kind = 'chunk' and n.tsv is not null;
    insert into tortus.bm25_doc (tenant_id, node_id, doc_len)
    select n.tenant_id, n.node_id, tortus.bm25_doc_len(n.tsv)
    from tortus.node n
    where n.tenant_id = p_tenant and n.kind = 'chunk' and n.tsv is not null;
    insert into tortus.bm25_term (tenant_id, lexeme, df)
    select p.tenant_id, p.lexeme, count(*)
    from tortus.bm25_posting p
    where p.tenant_id = p_tenant
    group by p.tenant_id, p.lexeme
    order by p.lexeme;
    update tortus.bm25_corpus k
    set n_docs = s.n_docs, total_len = s.total_len
    from (select count(*) as n_docs, coalesce(sum(d.doc_len), 0) as total_len
          from tortus.bm25_doc d where d.tenant_id = p_tenant) s
    where k.tenant_id = p_tenant
    returning k.n_docs into n;
    return n;
end
$$;

comment on function tortus.bm25_rebuild(text) is
'Recompute all BM25 statistics (postings, document lengths, document frequencies, corpus '
'totals) of one tenant from tortus.node; returns the number of documents. For repair, and to '
'verify the triggers: on consistent statistics it changes nothing.';
