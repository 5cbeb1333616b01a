-- The cost ledger: what each ingest step and each question's stages took, in milliseconds and
-- tokens, one row per step. security_invoker makes the view read the underlying tables with
-- the caller's privileges, so their row-level security applies (a tenant sees its own costs).

create or replace view tortus.cost_ledger with (security_invoker = true) as
select s.tenant_id,
       'ingest'::text as work,
       s.source_id as ref,
       s.uri as subject,
       s.updated_at as at,
       regexp_replace(c.key, '_(ms|tokens|texts)$', '') as step,
       sum((c.value)::double precision) filter (where c.key like '%\_ms') as ms,
       sum((c.value)::bigint) filter (where c.key like '%\_tokens') as tokens
from tortus.source s
cross join lateral jsonb_each(coalesce(s.metadata -> 'cost', '{}'::jsonb)) as c(key, value)
where jsonb_typeof(c.value) = 'number' and c.key ~ '_(ms|tokens)$'
group by s.tenant_id, s.source_id, s.uri, s.updated_at, regexp_replace(c.key, '_(ms|tokens|texts)$', '')
union all
select t.tenant_id,
       'query',
       t.trace_id,
       left(t.query, 200),
       t.created_at,
       regexp_replace(k.key, '_ms$', ''),
       (k.value)::double precision,
       case when k.key = 'total_ms' then (t.policy #>> '{budget,tokens,used}')::bigint end
from tortus.query_trace t
cross join lateral jsonb_each(t.timings) as k(key, value)
where jsonb_typeof(k.value) = 'number' and k.key like '%\_ms';

comment on view tortus.cost_ledger is
'What work cost, one row per step: work ''ingest'' (ref: source_id, subject: its uri; steps parse, '
'chunk, extract, embed, with the tokens a paid model counted for extract and embed) or ''query'' '
'(ref: trace_id, subject: the question; one row per engine stage, and the row of step ''total'' '
'with the evidence tokens handed to synthesis). ms is wall-clock milliseconds. Reads tortus.source '
'and tortus.query_trace as the caller, under their row-level security.';

grant select on tortus.cost_ledger to tortus_app, tortus_analyst;
