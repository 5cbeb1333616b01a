-- Views over evaluation runs for analysts. security_invoker makes each view read the
-- underlying tables with the caller's privileges, so their row-level security applies.

create or replace view tortus.eval_metric_by_run with (security_invoker = true) as
select r.tenant_id,
       r.run_id,
       r.dataset,
       r.status,
       r.started_at,
       e.strategy,
       m.key as metric,
       avg((m.value)::double precision) as mean,
       count(*) as n
from tortus.eval_run r
join tortus.eval_result e on e.tenant_id = r.tenant_id and e.run_id = r.run_id
cross join lateral jsonb_each(e.metrics) as m(key, value)
where jsonb_typeof(m.value) = 'number'
group by r.tenant_id, r.run_id, r.dataset, r.status, r.started_at, e.strategy, m.key;

comment on view tortus.eval_metric_by_run is
'One row per evaluation run, strategy and metric (recall@k, ndcg@10, mrr, all_gold@k, seed_recall@5, '
'fan_out, ...): the mean over the questions where the metric is a number (negative questions have '
'no retrieval metrics and are left out) and how many such questions there were (n). Reads '
'tortus.eval_run and tortus.eval_result as the caller, under their row-level security.';

grant select on tortus.eval_metric_by_run to tortus_app, tortus_analyst;
