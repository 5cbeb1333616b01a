-- What the query engine asks of the graph besides search and traversal: how crowded the torus
-- is around each seed, the evidence behind every hop of a path, and views over stored traces.

drop function if exists tortus.local_density(bigint[], double precision);
drop function if exists tortus.local_density(bigint[], double precision, text);
drop function if exists tortus.path_hops(bigint[], text[], text[]);

create or replace function tortus.torus_grid_count(
    sums integer[], theta double precision, phi double precision, radius double precision
) returns integer
language plpgsql immutable parallel safe
set search_path = pg_catalog, pg_temp
as $$
declare
    v_side constant integer := array_length(sums, 1);
    v_cell constant double precision := 2 * pi() / v_side;
    v_t constant double precision := theta - 2 * pi() * floor(theta / (2 * pi()));
    v_p constant double precision := phi - 2 * pi() * floor(phi / (2 * pi()));
    -- The rows whose centres may lie within the radius: a window around theta's row, or all.
    v_reach constant integer := ceil(radius / v_cell)::integer + 1;
    v_all constant boolean := 2 * v_reach + 1 >= v_side;
    v_row constant integer := floor(v_t / v_cell)::integer;
    v_i integer;
    v_dt double precision;
    v_half double precision;
    v_lo integer;
    v_hi integer;
    v_a integer;
    v_b integer;
    v_total integer := 0;
begin
    -- A cell counts when its centre is within the radius: in each row, the cells whose centres lie
    -- within half a chord of phi, a run that may wrap past the last cell to the first.
    for r in case when v_all then 0 else v_row - v_reach end .. case when v_all then v_side - 1 else v_row + v_reach end loop
        v_i := mod(r + v_side, v_side);
        v_dt := abs((v_i + 0.5) * v_cell - v_t);
        v_dt := least(v_dt, 2 * pi() - v_dt);
        continue when v_dt > radius;
        v_half := sqrt(radius * radius - v_dt * v_dt);
        v_lo := ceil((v_p - v_half) / v_cell - 0.5);
        v_hi := floor((v_p + v_half) / v_cell - 0.5);
        continue when v_hi < v_lo;
        if v_hi - v_lo + 1 >= v_side then
            v_total := v_total + sums[v_i + 1][v_side + 1];
            continue;
        end if;
        v_a := mod(mod(v_lo, v_side) + v_side, v_side);
        v_b := mod(mod(v_hi, v_side) + v_side, v_side);
        v_total := v_total + case when v_a <= v_b then sums[v_i + 1][v_b + 2] - sums[v_i + 1][v_a + 1]
                                  else sums[v_i + 1][v_side + 1] - sums[v_i + 1][v_a + 1] + sums[v_i + 1][v_b + 2] end;
    end loop;
    return v_total;
end
$$;

comment on function tortus.torus_grid_count(integer[], double precision, double precision, double precision) is
'The chunks a torus grid (tortus.torus_grid.sums) holds within `radius` of (theta, phi): every '
'cell whose centre lies within the radius, counted whole.';

create or replace function tortus.local_density(seeds bigint[], radius double precision, layout text default null)
returns table (node_id bigint, theta double precision, phi double precision, neighbours integer,
               expected double precision)
language plpgsql stable
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
    -- Chunks of the tenant (its BM25 documents), and the share of its pages a sample reads: all
    -- of them up to 4,000 chunks, beyond that a fixed sample of about 4,000 (the same pages
    -- every time).
    v_chunks constant double precision := coalesce(
        (select c.n_docs from tortus.bm25_corpus c where c.tenant_id = tortus.current_tenant()), 0);
    v_percent constant double precision := least(100, 100 * 4000 / greatest(v_chunks, 1));
    v_grid record;
begin
    if v_chunks > 4000 then
        -- A large tenant is counted from its torus grid when it has one for this layout (and the
        -- caller may read it: it counts every chunk).
        select g.chunks, g.sums into v_grid from tortus.torus_grid g
        where g.tenant_id = tortus.current_tenant() and g.layout = coalesce(local_density.layout, '');
        if found then
            return query
            select n.node_id, c.theta, c.phi,
                   greatest(tortus.torus_grid_count(v_grid.sums, c.theta, c.phi, radius)
                            - (n.kind = 'chunk')::integer, 0),
                   greatest(v_grid.chunks - 1, 0) * pi() * radius * radius / (4 * pi() * pi())
            from tortus.node n
            cross join lateral tortus.layout_coordinates(n.theta, n.phi, n.props, local_density.layout) c
            where n.tenant_id = tortus.current_tenant() and n.node_id = any(seeds) and c.theta is not null;
            return;
        end if;
    end if;
    return query
    -- Angles are brought into [0, 2 pi) once per chunk, so the per-pair test is a few
    -- subtractions; this runs for every seed against every chunk read.
    with s as (
        select n.node_id, c.theta, c.phi,
               c.theta - 2 * pi() * floor(c.theta / (2 * pi())) as t, c.phi - 2 * pi() * floor(c.phi / (2 * pi())) as p
        from tortus.node n
        cross join lateral tortus.layout_coordinates(n.theta, n.phi, n.props, local_density.layout) c
        where n.tenant_id = tortus.current_tenant() and n.node_id = any(seeds) and c.theta is not null
    ), placed as materialized (
        select n.node_id, c.theta - 2 * pi() * floor(c.theta / (2 * pi())) as t,
               c.phi - 2 * pi() * floor(c.phi / (2 * pi())) as p
        from tortus.node n tablesample system (v_percent) repeatable (0)
        cross join lateral tortus.layout_coordinates(n.theta, n.phi, n.props, local_density.layout) c
        where n.tenant_id = tortus.current_tenant() and n.kind = 'chunk' and c.theta is not null
    ), total as (
        -- A sample's counts scale to the whole tenant.
        select count(*)::float8 as n,
               case when v_percent < 100 then v_chunks / greatest(count(*), 1) else 1 end as scale
        from placed
    )
    select s.node_id, s.theta, s.phi,
           round(total.scale * (select count(*) from placed x
            where x.node_id <> s.node_id
              and least(abs(x.t - s.t), 2 * pi() - abs(x.t - s.t)) ^ 2
                  + least(abs(x.p - s.p), 2 * pi() - abs(x.p - s.p)) ^ 2 <= radius ^ 2))::integer,
           -- Chunks spread evenly over the torus (area 4 pi^2) would put this many in the disc.
           (total.n * total.scale - 1) * pi() * radius * radius / (4 * pi() * pi())
    from s, total;
end
$$;

comment on function tortus.local_density(bigint[], double precision, text) is
'For each seed with torus coordinates: the chunks of the current tenant within `radius` on the '
'torus (neighbours) and how many an even spread would put there (expected). A seed in a crowded '
'region has neighbours >> expected; the engine narrows its walk radius there and widens it in '
'sparse regions. `layout` reads alternative coordinates (see tortus.layout_coordinates). Up to '
'4,000 chunks every chunk is counted. A larger tenant is counted from its torus grid for the '
'layout (tortus.rebuild_torus_grid, run by tortus-pg index: cells of 2 pi / 128, each counted '
'whole when its centre is within the radius, the chunks as placed then: those ingested or '
'removed since count as they did), or, without one or for a caller restricted to some groups'' '
'sources, from a fixed sample of about 4,000 chunks (its pages, the same every time), both '
'counts scaled to the whole tenant.';

create or replace function tortus.path_hops(path bigint[], edge_types text[], directions text[])
returns table (hop integer, src bigint, src_label text, dst bigint, dst_label text, edge_type text,
               weight double precision, evidence jsonb)
language sql stable
set search_path = pg_catalog, pg_temp
as $$
    with hops as (
        select h.i as hop, path[h.i] as a, path[h.i + 1] as b, edge_types[h.i] as t, directions[h.i] as d
        from generate_subscripts(edge_types, 1) as h(i)
    ), edges as (
        select h.*, e.edge_id, coalesce(e.weight, p.weight)::float8 as weight
        from hops h
        left join lateral (
            select x.edge_id, x.weight from tortus.edge x
            where x.tenant_id = tortus.current_tenant() and x.type = h.t
              and x.src = case when h.d = 'in' then h.b else h.a end
              and x.dst = case when h.d = 'in' then h.a else h.b end
            limit 1
        ) e on h.d <> 'portal'
        left join lateral (
            select x.weight from tortus.portal x
            where x.tenant_id = tortus.current_tenant() and x.src = h.a and x.dst = h.b
            limit 1
        ) p on h.d = 'portal'
    )
    select x.hop, x.a, na.label, x.b, nb.label, x.t, x.weight, coalesce(ev.items, '[]')
    from edges x
    -- Lateral lookups by primary key: as joins, the planner may scan all nodes to merge-join a
    -- handful of hops.
    cross join lateral (select n.label from tortus.node n
                        where n.tenant_id = tortus.current_tenant() and n.node_id = x.a limit 1) na
    cross join lateral (select n.label, n.kind from tortus.node n
                        where n.tenant_id = tortus.current_tenant() and n.node_id = x.b limit 1) nb
    cross join lateral (
        -- The edge's own spans; for hops without any (reading order, portals) the span of the
        -- chunk the hop arrives at, or leaves from when it arrives at a concept.
        select jsonb_agg(jsonb_build_object(
                   'uri', s.uri, 'start', sp.start_char, 'end', sp.end_char, 'page', sp.page,
                   'text', tortus.span_text(sp.tenant_id, sp.source_id, sp.start_char, sp.end_char))
                   order by sp.source_id, sp.start_char) as items
        from (
            select * from tortus.evidence_span sp
            where sp.tenant_id = tortus.current_tenant() and sp.edge_id = x.edge_id
            union all
            select * from tortus.evidence_span sp
            where sp.tenant_id = tortus.current_tenant()
              and not exists (select 1 from tortus.evidence_span e
                              where e.tenant_id = tortus.current_tenant() and e.edge_id = x.edge_id)
              and sp.node_id = case when nb.kind = 'chunk' then x.b else x.a end
            limit 3
        ) sp
        join tortus.source s on s.tenant_id = sp.tenant_id and s.source_id = sp.source_id
    ) ev
    order by x.hop
$$;

comment on function tortus.path_hops(bigint[], text[], text[]) is
'The hops of a path as tortus.traverse returns it (node ids, edge types, directions): for each hop '
'its endpoints and labels, edge type, weight and evidence (uri, start, end, page, text) — the '
'spans recorded for the edge, or for reading-order and portal hops the span of the chunk reached.';

create or replace view tortus.trace_overview with (security_invoker = true) as
select t.trace_id, t.created_at, t.query, t.mode, t.withheld, t.confidence,
       jsonb_array_length(t.seeds) as seeds, jsonb_array_length(t.hops) as hops,
       jsonb_array_length(t.pruned) as pruned, jsonb_array_length(t.evidence) as evidence,
       (t.timings ->> 'total_ms')::float8 as total_ms, t.warnings, t.answer
from tortus.query_trace t;

comment on view tortus.trace_overview is
'One row per answered question of the current tenant: whether it was withheld, confidence, how '
'many seeds, hops, pruned candidates and evidence spans it used, total time and warnings.';

create or replace view tortus.trace_hops with (security_invoker = true) as
select t.trace_id, t.query, (h.ord)::integer as ordinal, h.item ->> 'from' as "from", h.item ->> 'to' as "to",
       h.item ->> 'edge_type' as edge_type, (h.item ->> 'weight')::float8 as weight, h.item ->> 'reason' as reason,
       (h.item ->> 'torus_distance')::float8 as torus_distance,
       jsonb_array_length(coalesce(h.item -> 'evidence', '[]')) as evidence_spans
from tortus.query_trace t
cross join lateral jsonb_array_elements(t.hops) with ordinality as h(item, ord);

comment on view tortus.trace_hops is
'Every hop of the reasoning paths the engine answered from: endpoints, edge type, weight, the '
'reason it was taken, torus distance to the nearest seed and how many evidence spans back it.';

create or replace view tortus.trace_pruned with (security_invoker = true) as
select t.trace_id, t.query, p.item ->> 'label' as label, p.item ->> 'kind' as kind,
       (p.item ->> 'hop')::integer as hop, p.item ->> 'reason' as reason
from tortus.query_trace t
cross join lateral jsonb_array_elements(t.pruned) as p(item);

comment on view tortus.trace_pruned is
'Candidates the walk saw but did not keep, with the reason (budget, edge type, radius, subgraph).';

grant select on tortus.trace_overview, tortus.trace_hops, tortus.trace_pruned to tortus_app, tortus_analyst;

drop function if exists tortus.path_support(bigint[], text[], text[]);
drop function if exists tortus.supported_traverse(bigint[], vector, jsonb);
create or replace function tortus.supported_traverse(seeds bigint[], query vector, policy jsonb default '{}')
returns table (
    node_id bigint, kind text, label text, hop integer, path bigint[], edge_types text[], directions text[],
    hop_scores double precision[], reasons text[], score double precision, torus_distance double precision,
    pruned boolean, prune_reason text, min_confidence double precision, spans integer
)
language sql stable
set search_path = pg_catalog, pg_temp
as $$
    -- Set-based: one plan probes the edge of every hop of every kept path (a function call per
    -- path cost more than the walk itself).
    with t as materialized (
        select row_number() over () as r, w.* from tortus.traverse(seeds, query, policy) w
    ),
    hops as (
        select t.r, t.edge_types[i] as type, t.directions[i] = 'portal' as portal,
               case when t.directions[i] = 'in' then t.path[i + 1] else t.path[i] end as src,
               case when t.directions[i] = 'in' then t.path[i] else t.path[i + 1] end as dst
        from t cross join lateral generate_subscripts(t.edge_types, 1) as i
        where not t.pruned
    ),
    edges as (
        -- Each edge once: paths share their first hops (a seed's concept leads to many chunks).
        select h.type, h.src, h.dst, e.confidence, e.spans
        from (select distinct hops.type, hops.src, hops.dst from hops where not hops.portal) h
        left join lateral (
            -- The LIMIT keeps the planner probing the index rather than hashing the edge table;
            -- `dst + 0` keeps it on the edge's own key (src first) rather than the index of edges
            -- by end and type, where a concept mentioned by hundreds of chunks is read whole.
            select x.confidence,
                   (select count(*) from tortus.evidence_span sp
                    where sp.tenant_id = x.tenant_id and sp.edge_id = x.edge_id) as spans
            from tortus.edge x
            where x.tenant_id = tortus.current_tenant() and x.type = h.type and x.src = h.src and x.dst + 0 = h.dst
            limit 1
        ) e on true
    ),
    support as (
        select hops.r, coalesce(min(coalesce(e.confidence, 1)), 1)::float8 as min_confidence,
               coalesce(sum(e.spans), 0)::integer as spans
        from hops
        left join edges e on not hops.portal and e.type = hops.type and e.src = hops.src and e.dst = hops.dst
        group by hops.r
    )
    select t.node_id, t.kind, t.label, t.hop, t.path, t.edge_types, t.directions, t.hop_scores, t.reasons,
           t.score, t.torus_distance, t.pruned, t.prune_reason,
           case when not t.pruned then coalesce(s.min_confidence, 1) end,
           case when not t.pruned then coalesce(s.spans, 0) end
    from t left join support s on s.r = t.r
    order by t.r
$$;

comment on function tortus.supported_traverse(bigint[], vector, jsonb) is
'tortus.traverse with how well each kept path is supported: the lowest confidence of its edges '
'(portals count as 1) and how many evidence spans back its edges (null for pruned candidates).';

