-- Evidence spans must lie inside their source's text, so every span's text is recoverable.
-- Checked once per statement over its transition table: ingest writes a document's spans (or
-- a batch of documents') in one statement, and a row trigger cost a plpgsql call and a source
-- lookup per span.

create or replace function tortus.check_span_bounds() returns trigger
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
declare
    bad record;
begin
    select n.start_char, n.end_char, n.source_id, length(s.text) as len into bad
    from new_rows n
    join tortus.source s on s.tenant_id = n.tenant_id and s.source_id = n.source_id
    where n.end_char > length(s.text)
    limit 1;
    if found then
        raise exception 'evidence span [%, %) lies outside source % (length %)',
            bad.start_char, bad.end_char, bad.source_id, bad.len
            using errcode = '23514';
    end if;
    return null;
end
$$;

comment on function tortus.check_span_bounds() is
'Statement trigger: rejects the statement when one of the evidence spans it writes ends past its '
'source text.';

drop trigger if exists evidence_span_bounds on tortus.evidence_span;

create or replace trigger evidence_span_bounds_insert
    after insert on tortus.evidence_span
    referencing new table as new_rows
    for each statement execute function tortus.check_span_bounds();

create or replace trigger evidence_span_bounds_update
    after update on tortus.evidence_span
    referencing new table as new_rows
    for each statement execute function tortus.check_span_bounds();

create or replace function tortus.span_text(p_tenant text, p_source bigint, p_start integer, p_end integer)
returns text
language sql stable parallel safe
set search_path = pg_catalog, pg_temp
as $$
    select substr(s.text, p_start + 1, p_end - p_start)
    from tortus.source s
    where s.tenant_id = p_tenant and s.source_id = p_source
$$;

comment on function tortus.span_text(text, bigint, integer, integer) is
'The text of a character span [start, end) of a source (0-based offsets, as stored in evidence_span).';

create or replace function tortus.chunk_at(p_tenant text, p_source bigint, p_start integer, p_end integer)
returns bigint
language sql stable parallel safe
set search_path = pg_catalog, pg_temp
as $$
    select c.node_id
    from tortus.evidence_span c
    join tortus.node n on n.tenant_id = c.tenant_id and n.node_id = c.node_id and n.kind = 'chunk'
    where c.tenant_id = p_tenant and c.source_id = p_source and c.start_char <= p_start and p_end <= c.end_char
    order by c.node_id
    limit 1
$$;

comment on function tortus.chunk_at(text, bigint, integer, integer) is
'The chunk whose evidence span holds the character span [start, end) of a source (the first by '
'node id), or NULL: where a statement such as a typed edge''s span can be quoted from.';
