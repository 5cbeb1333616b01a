-- Graph layout and portals: concepts sit at the circular mean of the chunks that mention them;
-- portals are controlled jumps between subgraphs through rare shared concepts.

create or replace function tortus.place_concepts() returns integer
language sql
set search_path = pg_catalog, pg_temp
begin atomic
    with placed as (
        select e.dst as node_id,
               atan2(avg(sin(c.theta)), avg(cos(c.theta))) as t,
               atan2(avg(sin(c.phi)), avg(cos(c.phi))) as p
        from tortus.edge e
        join tortus.node c on c.tenant_id = e.tenant_id and c.node_id = e.src
        where e.tenant_id = tortus.current_tenant() and e.type = 'mentions' and c.theta is not null
        group by e.dst
    ), updated as (
        update tortus.node n
        set theta = mod((placed.t + 2 * pi())::numeric, (2 * pi())::numeric)::float8,
            phi = mod((placed.p + 2 * pi())::numeric, (2 * pi())::numeric)::float8
        from placed
        where n.tenant_id = tortus.current_tenant() and n.node_id = placed.node_id
        returning 1
    )
    select count(*)::integer from updated;
end;

comment on function tortus.place_concepts() is
'Place every mentioned concept of the current tenant at the circular mean (on each torus '
'angle) of the chunks that mention it; returns how many nodes were placed. Chunks must have '
'coordinates first (tortus-pg index).';

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
