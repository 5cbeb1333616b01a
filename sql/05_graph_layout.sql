-- Graph layout and portals: concepts sit at the circular mean of the chunks that mention them;
-- portals are controlled jumps between subgraphs through rare shared concepts.

create or replace function tortus.place_concepts() returns integer
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
declare
    placed_count integer;
begin
    with mention as (
        select e.dst as node_id, c.theta, c.phi
        from tortus.edge e
        join tortus.node c on c.tenant_id = e.tenant_id and c.node_id = e.src
        where e.tenant_id = tortus.current_tenant() and e.type = 'mentions'
    ), placed as (
        select m.node_id, count(*)::integer as mentions,
               atan2(avg(sin(m.theta)), avg(cos(m.theta))) as t,
               atan2(avg(sin(m.phi)), avg(cos(m.phi))) as p
        from mention m
        group by m.node_id
    ), updated as (
        update tortus.node n
        set theta = coalesce(mod((placed.t + 2 * pi())::numeric, (2 * pi())::numeric)::float8, n.theta),
            phi = coalesce(mod((placed.p + 2 * pi())::numeric, (2 * pi())::numeric)::float8, n.phi),
            mentions = placed.mentions
        from placed
        where n.tenant_id = tortus.current_tenant() and n.node_id = placed.node_id
        returning placed.t
    ), unmentioned as (
        -- A concept no chunk mentions any longer keeps no count (the walk counts it: none).
        update tortus.node n set mentions = null
        where n.tenant_id = tortus.current_tenant() and n.mentions is not null
          and not exists (select 1 from placed where placed.node_id = n.node_id)
    )
    select count(*)::integer into placed_count from updated where updated.t is not null;
    return placed_count;
end
$$;

comment on function tortus.place_concepts() is
'Place every mentioned concept of the current tenant at the circular mean (on each torus '
'angle) of the chunks that mention it, and store how many chunks mention it (node.mentions, '
'the walk''s hub penalty); returns how many nodes were placed (those mentioned by a placed '
'chunk). Chunks must have coordinates first (tortus-pg index).';

create or replace function tortus.rebuild_torus_grid(layout text default null, side integer default 128)
returns integer
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
declare
    v_cell double precision;
    v_sums integer[];
    v_chunks integer;
begin
    if side is null or side not between 8 and 1024 then
        raise exception 'side must be between 8 and 1024, got %', side using errcode = '22023';
    end if;
    v_cell := 2 * pi() / side;
    -- Each placed chunk in its cell (angles brought into [0, 2 pi) first), then each grid row as
    -- running sums: sums[i][j + 1] counts the row's chunks in cells 0 .. j - 1.
    with placed as (
        select least(floor((c.theta - 2 * pi() * floor(c.theta / (2 * pi()))) / v_cell), side - 1)::integer as i,
               least(floor((c.phi - 2 * pi() * floor(c.phi / (2 * pi()))) / v_cell), side - 1)::integer as j
        from tortus.node n
        cross join lateral tortus.layout_coordinates(n.theta, n.phi, n.props, layout) c
        where n.tenant_id = tortus.current_tenant() and n.kind = 'chunk' and c.theta is not null
    ), cells as (
        select i.i, j.j, count(p.i) as n
        from generate_series(0, side - 1) i(i)
        cross join generate_series(0, side - 1) j(j)
        left join placed p on p.i = i.i and p.j = j.j
        group by i.i, j.j
    ), rows_ as (
        select c.i, array[0] || array_agg(c.running order by c.j) as sums, max(c.running) as n
        from (select cells.i, cells.j, (sum(cells.n) over (partition by cells.i order by cells.j))::integer as running
              from cells) c
        group by c.i
    )
    select array_agg(r.sums order by r.i), sum(r.n)::integer into v_sums, v_chunks from rows_ r;
    insert into tortus.torus_grid as g (tenant_id, layout, side, chunks, sums)
    values (tortus.current_tenant(), coalesce(rebuild_torus_grid.layout, ''), rebuild_torus_grid.side, v_chunks, v_sums)
    on conflict on constraint torus_grid_pkey do update
        set side = excluded.side, chunks = excluded.chunks, sums = excluded.sums, built_at = now();
    return v_chunks;
end
$$;

comment on function tortus.rebuild_torus_grid(text, integer) is
'Count the current tenant''s placed chunks per cell of a side x side grid over the torus (the '
'live coordinates, or with a layout name those stored in props.layouts) and store it in '
'tortus.torus_grid, which tortus.local_density reads for a tenant of more than 4,000 chunks. '
'Returns the chunks counted. tortus-pg index runs it after placing the chunks.';

create or replace function tortus.rebuild_portals(max_df integer default 25, per_pair integer default 3)
returns integer
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
declare
    made integer;
begin
    delete from tortus.portal where tenant_id = tortus.current_tenant();
    -- A concept mentioned in two subgraphs links them; rare concepts make strong, specific
    -- portals, so concepts mentioned by more than max_df chunks are skipped (hubs).
    with mention as (
        select e.dst as concept, e.src as chunk, m.subgraph
        from tortus.edge e
        join tortus.membership m on m.tenant_id = e.tenant_id and m.node_id = e.src
        where e.tenant_id = tortus.current_tenant() and e.type = 'mentions'
    ), df as (
        select concept, count(distinct chunk) as df
        from mention group by concept
        having count(distinct subgraph) > 1 and count(distinct chunk) <= max_df
    ), pairs as (
        select a.chunk as src, b.chunk as dst, a.subgraph as src_subgraph, b.subgraph as dst_subgraph,
               df.concept, df.df,
               row_number() over (partition by df.concept, a.subgraph, b.subgraph order by a.chunk, b.chunk) as rank
        from df
        join mention a on a.concept = df.concept
        join mention b on b.concept = df.concept and b.subgraph <> a.subgraph and b.chunk <> a.chunk
    ), inserted as (
        insert into tortus.portal (tenant_id, src, dst, src_subgraph, dst_subgraph, kind, weight, reason)
        select distinct on (p.src, p.dst)
               tortus.current_tenant(), p.src, p.dst, p.src_subgraph, p.dst_subgraph, 'shared_concept',
               least(1.0, 1.5 / ln(2 + p.df))::real,
               format('both mention %s (%s chunks mention it)', n.label, p.df)
        from pairs p join tortus.node n on n.tenant_id = tortus.current_tenant() and n.node_id = p.concept
        where p.rank <= per_pair
        order by p.src, p.dst, p.df, n.label
        on conflict do nothing
        returning 1
    )
    select count(*) into made from inserted;
    return made;
end
$$;

comment on function tortus.rebuild_portals(integer, integer) is
'Replace the current tenant''s portals: for every concept mentioned in two or more subgraphs '
'by at most max_df chunks, link up to per_pair chunk pairs per subgraph pair (kind '
'shared_concept, weight falling with how common the concept is, and a readable reason). '
'Returns the number of portals.';
