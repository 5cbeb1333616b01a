-- Evidence spans must lie inside their source's text, so every span's text is recoverable.

create or replace function tortus.check_span_bounds() returns trigger
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
declare
    len integer;
begin
    select length(s.text) into len
    from tortus.source s
    where s.tenant_id = new.tenant_id and s.source_id = new.source_id;
    if len is not null and new.end_char > len then
        raise exception 'evidence span [%, %) lies outside source % (length %)',
            new.start_char, new.end_char, new.source_id, len
            using errcode = '23514';
    end if;
    return new;
end
$$;

comment on function tortus.check_span_bounds() is
'Trigger: rejects an evidence span that ends past its source text.';

create or replace trigger evidence_span_bounds
    before insert or update on tortus.evidence_span
    for each row execute function tortus.check_span_bounds();

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
