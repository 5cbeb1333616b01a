-- Chains of typed relations between graph nodes: the paths a relation question follows
-- ("Which team owns the system whose expired certificate caused INC-2025-014?" follows
-- caused_by, then owned_by), each edge with the span of the source that states it.

create or replace function tortus.relation_paths(
    seeds bigint[], max_hops integer default 3,
    edge_types text[] default array['owned_by', 'led_by', 'depends_on', 'caused_by', 'affects', 'implements',
                                    'supersedes', 'contradicts', 'supports', 'cites', 'same_as'],
    fan_out integer default 25, max_paths integer default 2000
) returns table (path bigint[], edges bigint[], types text[], directions text[], min_confidence real)
language sql stable
set search_path = pg_catalog, pg_temp
as $$
    with recursive walk (node, path, edges, types, directions, min_confidence) as (
        select s, array[s], '{}'::bigint[], '{}'::text[], '{}'::text[], 1::real
        from unnest(seeds) as s
        union all
        select x.node, w.path || x.node, w.edges || x.edge_id, w.types || x.type, w.directions || x.direction,
               least(w.min_confidence, x.confidence)
        from walk w
        cross join lateral (
            select y.* from (
                select e.dst as node, e.edge_id, e.type, 'out' as direction, e.confidence
                from tortus.edge e
                where e.tenant_id = tortus.current_tenant() and e.src = w.node and e.type = any(edge_types)
                union all
                select e.src, e.edge_id, e.type, 'in', e.confidence
                from tortus.edge e
                where e.tenant_id = tortus.current_tenant() and e.dst = w.node and e.type = any(edge_types)
            ) y
            where y.node <> all(w.path)
            order by y.confidence desc, y.edge_id
            limit least(greatest(fan_out, 1), 100)
        ) x
        where cardinality(w.edges) < least(greatest(max_hops, 0), 6)
    )
    select w.path, w.edges, w.types, w.directions, w.min_confidence
    from walk w
    where cardinality(w.edges) > 0
    limit least(greatest(max_paths, 1), 10000)
$$;

comment on function tortus.relation_paths(bigint[], integer, text[], integer, integer) is
'Every path of typed relation edges (both directions, no node twice) from the seed nodes, up to '
'max_hops edges (at most 6), following at most fan_out edges per node (the most confident first; '
'at most 100) and returning at most max_paths paths (at most 10,000): node ids, edge ids, edge '
'types, directions (out: along the edge) and the weakest edge confidence. Co-occurrence, '
'mention, definition and reading-order edges are not relations and are not followed by default. '
'The current tenant only.';
