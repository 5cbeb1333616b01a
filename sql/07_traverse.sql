-- Bounded multi-hop traversal over typed edges and portals, and personalized PageRank.
--
-- Both walk the current tenant's graph with an explicit tenant filter in every query (row-level
-- security applies as well, and under Citus the filter keeps each query on one shard). Neither
-- writes anything: state lives in arrays, not temp tables, so both are STABLE.

drop function if exists tortus.traverse(bigint[], vector, jsonb);
drop function if exists tortus.layout_coordinates(double precision, double precision, jsonb, text);
drop function if exists tortus.ppr(bigint[], double precision, integer, integer);

create or replace function tortus.vector_similarity(a vector, b vector)
returns double precision
language sql immutable parallel safe
return case when vector_dims(a) = vector_dims(b) then nullif(1 - (a <=> b), 'NaN'::double precision) end;

comment on function tortus.vector_similarity(vector, vector) is
'Cosine similarity (1 - cosine distance) of two vectors, in [-1, 1]; NULL when either is NULL, '
'when their dimensions differ, or when one is the zero vector. Bound to pgvector when created '
'(SQL-standard body), so callers with a pinned search_path can use it.';

create or replace function tortus.layout_coordinates(
    theta double precision, phi double precision, props jsonb, layout text
) returns table (theta double precision, phi double precision)
language sql immutable parallel safe
-- A SQL-standard body without a SET clause, so the planner inlines it into each caller.
begin atomic
    select case when layout is null then theta else (props -> 'layouts' -> layout ->> 0)::float8 end,
           case when layout is null then phi else (props -> 'layouts' -> layout ->> 1)::float8 end;
end;

comment on function tortus.layout_coordinates(double precision, double precision, jsonb, text) is
'A node''s torus coordinates: its theta and phi, or with a layout name the alternative '
'coordinates stored in props.layouts (NULL when that layout has not been stored).';

create or replace function tortus.traverse_policy(policy jsonb default '{}')
returns jsonb
language plpgsql immutable
set search_path = pg_catalog, pg_temp
as $$
declare
    known constant text[] := array['max_hops', 'fan_out', 'beam_width', 'max_nodes', 'max_portal_hops',
                                   'edge_types_allow', 'edge_types_deny', 'local_only', 'subgraphs', 'torus_radius',
                                   'min_score', 'decay', 'layout', 'traversal', 'report_blocked'];
    -- key, default, minimum, server cap (values above the cap are lowered to it)
    ints constant jsonb := '{"max_hops": [2, 0, 4], "fan_out": [25, 1, 100], "beam_width": [50, 1, 500],
                             "max_nodes": [200, 1, 2000], "max_portal_hops": [1, 0, 4]}';
    bools constant jsonb := '{"local_only": false, "report_blocked": true}';  -- key: default
    p jsonb := coalesce(policy, '{}');
    out jsonb := '{}';
    k text;
    v jsonb;
    n numeric;
begin
    if jsonb_typeof(p) <> 'object' then
        raise exception 'traversal policy must be a JSON object, got %', jsonb_typeof(p) using errcode = '22023';
    end if;
    select string_agg(x, ', ' order by x) into k from jsonb_object_keys(p) as x where x <> all(known);
    if k is not null then
        raise exception 'unknown traversal policy key(s): %', k
            using errcode = '22023', hint = 'known keys: ' || array_to_string(known, ', ');
    end if;

    for k, v in select * from jsonb_each(ints) loop
        if p->k is null or jsonb_typeof(p->k) = 'null' then
            out := out || jsonb_build_object(k, v->0);
            continue;
        end if;
        if jsonb_typeof(p->k) <> 'number' or (p->>k)::numeric <> trunc((p->>k)::numeric) then
            raise exception 'traversal policy % must be an integer, got %', k, p->k using errcode = '22023';
        end if;
        n := (p->>k)::numeric;
        if n < (v->>1)::numeric then
            raise exception 'traversal policy % must be at least %, got %', k, v->1, n using errcode = '22023';
        end if;
        out := out || jsonb_build_object(k, least(n, (v->>2)::numeric));
    end loop;

    foreach k in array array['edge_types_allow', 'edge_types_deny', 'subgraphs'] loop
        v := p->k;
        if v is null or jsonb_typeof(v) = 'null' then
            out := out || jsonb_build_object(k, case when k = 'edge_types_deny' then '[]'::jsonb
                                                    else 'null'::jsonb end);
        elsif jsonb_typeof(v) <> 'array'
              or exists (select 1 from jsonb_array_elements(v) as e where jsonb_typeof(e) <> 'string') then
            raise exception 'traversal policy % must be an array of strings, got %', k, v using errcode = '22023';
        else
            out := out || jsonb_build_object(k, v);
        end if;
    end loop;

    for k, v in select * from jsonb_each(bools) loop
        if p->k is null or jsonb_typeof(p->k) = 'null' then
            out := out || jsonb_build_object(k, v);
        elsif jsonb_typeof(p->k) <> 'boolean' then
            raise exception 'traversal policy % must be true or false, got %', k, p->k using errcode = '22023';
        else
            out := out || jsonb_build_object(k, p->k);
        end if;
    end loop;

    v := p->'layout';
    if v is null or jsonb_typeof(v) = 'null' then
        out := out || '{"layout": null}';
    elsif jsonb_typeof(v) <> 'string' or v #>> '{}' !~ '^[a-z_]{1,32}$' then
        raise exception 'traversal policy layout must be a layout name, got %', v using errcode = '22023';
    else
        out := out || jsonb_build_object('layout', v);
    end if;

    v := p->'traversal';
    if v is null or jsonb_typeof(v) = 'null' then
        out := out || '{"traversal": "sql"}';
    elsif v #>> '{}' not in ('sql', 'age') or jsonb_typeof(v) <> 'string' then
        raise exception 'traversal policy traversal must be "sql" or "age", got %', v using errcode = '22023';
    else
        out := out || jsonb_build_object('traversal', v);
    end if;

    foreach k in array array['torus_radius', 'min_score', 'decay'] loop
        v := p->k;
        if v is null or jsonb_typeof(v) = 'null' then
            out := out || jsonb_build_object(k, case when k = 'decay' then '0.85'::jsonb else 'null'::jsonb end);
            continue;
        end if;
        if jsonb_typeof(v) <> 'number' then
            raise exception 'traversal policy % must be a number, got %', k, v using errcode = '22023';
        end if;
        n := (v #>> '{}')::numeric;
        if (k = 'torus_radius' and n < 0) or (k = 'decay' and (n <= 0 or n > 1)) then
            raise exception 'traversal policy % out of range: %', k, n
                using errcode = '22023', hint = 'torus_radius >= 0; 0 < decay <= 1';
        end if;
        out := out || jsonb_build_object(k, n);
    end loop;
    return out;
end
$$;

comment on function tortus.traverse_policy(jsonb) is
'The effective traversal policy for tortus.traverse: validates the keys and types of a policy '
'object and fills in defaults, lowering values above the server caps to the cap. Keys: '
'max_hops (default 2, cap 4), fan_out (neighbours kept per expanded node and hop, chosen among '
'its 2 x fan_out strongest followable edges; default 25, cap 100), beam_width (nodes expanded '
'per hop, best scores first; default 50, cap 500), '
'max_nodes (kept candidates including seeds, and separately pruned rows returned; default 200, '
'cap 2000), max_portal_hops (per path; default 1, cap 4), edge_types_allow (array; default '
'all), edge_types_deny (array; default none; the pseudo-type "portal" names portal hops in '
'both lists; an empty allow list follows nothing), local_only (default false: true stays in '
'the seeds'' subgraphs, where nodes without any subgraph also count as local, and takes no '
'portals), subgraphs (array: only nodes that are members of one of them; seeds too), '
'torus_radius (prune nodes farther from the nearest seed; default none), min_score (default '
'none), decay (per-hop factor in (0, 1]; default 0.85), layout (default none: the node''s theta '
'and phi; a name reads the alternative coordinates tortus-pg stored in props.layouts, for '
'layout ablations), traversal (default "sql": neighbours read from tortus.edge and tortus.portal; '
'"age": from the tenant''s Apache AGE mirror, through Cypher, see tortus.age_sync), report_blocked '
'(default true: edges and portals the policy does not follow come back as pruned rows, a few per '
'node, saying why; false reads none of them, which is faster where a denied type is common). '
'Unknown keys and wrong types raise 22023.';

create or replace function tortus.traverse(seeds bigint[], query vector, policy jsonb default '{}')
returns table (
    node_id bigint, kind text, label text, hop integer, path bigint[], edge_types text[], directions text[],
    hop_scores double precision[], reasons text[], score double precision, torus_distance double precision,
    pruned boolean, prune_reason text
)
language plpgsql stable
set search_path = pg_catalog, pg_temp
-- The per-hop query's best plan depends on how many rows the state arrays hold, which a
-- generic plan cannot see: custom plans measured about 1.5 times faster here.
set plan_cache_mode = force_custom_plan
as $$
#variable_conflict use_column
declare
    v_tenant constant text := tortus.current_tenant();
    p constant jsonb := tortus.traverse_policy(policy);
    v_max_hops constant integer := (p->>'max_hops')::integer;
    v_fan_out constant integer := (p->>'fan_out')::integer;
    v_beam constant integer := (p->>'beam_width')::integer;
    v_max_nodes constant integer := (p->>'max_nodes')::integer;
    v_max_portal_hops constant integer := (p->>'max_portal_hops')::integer;
    v_allow constant text[] := case when jsonb_typeof(p->'edge_types_allow') = 'array'
                                  then array(select jsonb_array_elements_text(p->'edge_types_allow')) end;
    v_deny constant text[] := array(select jsonb_array_elements_text(p->'edge_types_deny'));
    v_local_only constant boolean := (p->>'local_only')::boolean;
    v_subgraphs constant text[] := case when jsonb_typeof(p->'subgraphs') = 'array'
                                  then array(select jsonb_array_elements_text(p->'subgraphs')) end;
    v_radius constant double precision := (p->>'torus_radius')::double precision;
    v_min_score constant double precision := (p->>'min_score')::double precision;
    v_decay constant double precision := (p->>'decay')::double precision;
    v_layout constant text := p->>'layout';
    v_age constant boolean := p->>'traversal' = 'age';
    -- The mention counts stored with the concepts count every chunk: a caller who reads only
    -- some sources counts the mentions it can see instead.
    v_stored_mentions constant boolean := tortus.caller_groups() is null;
    -- Neighbours scored per expanded node: the strongest edges first; the rest are not read.
    v_scan_cap constant integer := 2 * v_fan_out;
    -- What the policy does not follow is read (to report why) only when asked.
    v_report constant boolean := (p->>'report_blocked')::boolean;
    v_report_types constant boolean := v_report and (v_allow is not null or cardinality(v_deny) > 0);
    v_portal_type_ok constant boolean := (v_allow is null or 'portal' = any(v_allow)) and 'portal' <> all(v_deny);
    v_portals_ok constant boolean := v_portal_type_ok and not v_local_only;
    v_seed_subgraphs text[];
    v_seed_theta double precision[];
    v_seed_phi double precision[];
    -- One entry per row (kept: r_why is null; pruned otherwise); r_parent indexes the kept parent.
    r_node bigint[];
    r_parent integer[];
    r_hop integer[];
    r_kind text[];
    r_type text[];
    r_dir text[];
    r_reason text[];
    r_hop_score double precision[];
    r_strength double precision[];
    r_score double precision[];
    r_dist double precision[];
    r_effd double precision[];
    r_portals integer[];
    r_why text[];
    n_node bigint[];
    n_parent integer[];
    n_hop integer[];
    n_kind text[];
    n_type text[];
    n_dir text[];
    n_reason text[];
    n_hop_score double precision[];
    n_strength double precision[];
    n_score double precision[];
    n_dist double precision[];
    n_effd double precision[];
    n_portals integer[];
    n_why text[];
    v_kept integer;
    v_pruned integer;
    v_h integer;
    -- With traversal 'age': the edges and portals at the frontier, read through Cypher.
    a_src bigint[];
    a_dst bigint[];
    a_type text[];
    a_dir text[];
    a_w double precision[];
    a_conf double precision[];
    a_note text[];
begin
    if v_tenant is null or seeds is null then
        return;
    end if;
    if v_age and not tortus.age_mirrored(v_tenant) then
        raise exception 'traversal "age" needs the tenant''s Apache AGE mirror' using errcode = '55000',
            hint = 'run tortus-pg graph sync-age (or select tortus.age_sync()) first';
    end if;

    -- Seeds: the tenant's nodes among `seeds`, in first-mention order; hop 0, score 1.
    select array_agg(s.node_id order by s.ord), array_agg(s.kind order by s.ord),
           array_agg(s.why order by s.ord), array_agg(s.theta order by s.ord), array_agg(s.phi order by s.ord)
      into r_node, r_kind, r_why, v_seed_theta, v_seed_phi
    from (
        select g.node_id, g.ord, g.kind, g.theta, g.phi,
               case when not g.sub_ok then format('seed outside subgraphs %s', array_to_string(v_subgraphs, ', '))
                    when g.rank > v_max_nodes then format('over max_nodes budget (%s)', v_max_nodes) end as why
        from (
            select f.node_id, f.ord, n.kind, c.theta, c.phi, f.sub_ok,
                   row_number() over (partition by f.sub_ok order by f.ord) as rank
            from (
                select u.node_id, min(u.ord) as ord,
                       v_subgraphs is null or exists (
                           select 1 from tortus.membership m
                           where m.tenant_id = v_tenant and m.node_id = u.node_id and m.subgraph = any(v_subgraphs)
                       ) as sub_ok
                from unnest(seeds) with ordinality as u(node_id, ord)
                where u.node_id is not null
                group by u.node_id
            ) f
            join tortus.node n on n.tenant_id = v_tenant and n.node_id = f.node_id
            cross join lateral tortus.layout_coordinates(n.theta, n.phi, n.props, v_layout) c
        ) g
    ) s;
    if r_node is null then
        return;
    end if;
    -- Pruned seeds beyond the pruned-row budget are dropped; kept seeds give the torus anchors.
    select array_agg(x.node_id order by x.i), array_agg(x.kind order by x.i), array_agg(x.why order by x.i),
           array_agg(x.theta order by x.i) filter (where x.why is null and x.theta is not null),
           array_agg(x.phi order by x.i) filter (where x.why is null and x.theta is not null),
           array_agg(case when x.why is null and x.theta is not null then 0.0::double precision end order by x.i)
      into r_node, r_kind, r_why, v_seed_theta, v_seed_phi, r_dist
    from (
        select u.*, count(*) filter (where u.why is not null) over (order by u.i) as pruned_rank
        from unnest(r_node, r_kind, r_why, v_seed_theta, v_seed_phi)
             with ordinality as u(node_id, kind, why, theta, phi, i)
    ) x
    where x.why is null or x.pruned_rank <= v_max_nodes;
    v_seed_theta := coalesce(v_seed_theta, '{}');
    v_seed_phi := coalesce(v_seed_phi, '{}');
    r_parent := array_fill(null::integer, array[cardinality(r_node)]);
    r_hop := array_fill(0, array[cardinality(r_node)]);
    r_type := array_fill(null::text, array[cardinality(r_node)]);
    r_dir := r_type;
    r_reason := r_type;
    r_hop_score := array_fill(null::double precision, array[cardinality(r_node)]);
    r_strength := array_fill(1.0::double precision, array[cardinality(r_node)]);
    r_score := r_strength;
    r_effd := r_dist;
    r_portals := r_hop;
    select count(*) filter (where w is null), count(*) filter (where w is not null)
      into v_kept, v_pruned from unnest(r_why) as w;

    if v_local_only then
        select coalesce(array_agg(distinct m.subgraph), '{}') into v_seed_subgraphs
        from unnest(r_node, r_why) as s(node_id, why)
        join tortus.membership m on m.tenant_id = v_tenant and m.node_id = s.node_id
        where s.why is null;
    end if;

    -- One set-based query per hop. Scoring of a candidate n reached from kept node f:
    --   hop_score = decay * weight * confidence * rel(n) / ln(e + mentions(n))
    --   strength  = strength(f) * hop_score            (1 for seeds)
    --   score     = strength * exp(-d(n))
    -- rel(n) = (1 + cosine similarity to the query) / 2, or 0.5 without comparable embeddings;
    -- mentions(n) = chunks mentioning n (up to 1000, as place_concepts counted them, 0 for chunks); d(n) = torus
    -- distance to the nearest seed (inherited from f when n or every seed has no coordinates;
    -- 0 if none).
    for v_h in 1 .. v_max_hops loop
        exit when v_kept >= v_max_nodes;
        if v_age then
            -- The frontier as the hop query below chooses it, and its neighbours from the mirror.
            select array_agg(n.src), array_agg(n.node_id), array_agg(n.type), array_agg(n.dir),
                   array_agg(n.w), array_agg(n.conf), array_agg(n.note)
              into a_src, a_dst, a_type, a_dir, a_w, a_conf, a_note
            from tortus.age_neighbours(v_tenant, array(
                select a.node_id
                from unnest(r_node, r_hop, r_score, r_why) as a(node_id, hop, score, why)
                where a.why is null and a.hop = v_h - 1
                order by a.score desc, a.node_id
                limit v_beam)) n;
        end if;
        with all_rows as (
            select a.node_id, a.idx::integer as idx, a.hop, a.strength, a.score, a.effd, a.portals, a.why
            from unnest(r_node, r_hop, r_strength, r_score, r_effd, r_portals, r_why)
                 with ordinality as a(node_id, hop, strength, score, effd, portals, why, idx)
        ), kept as (
            select k.node_id, k.idx, k.hop, k.strength, k.score, k.effd, k.portals from all_rows k where k.why is null
        ), frontier as (
            -- Beam: only the beam_width best nodes of the last hop are expanded.
            select f.* from kept f where f.hop = v_h - 1 order by f.score desc, f.node_id limit v_beam
        ), scanned as (
            select f.idx as parent, f.strength as parent_strength, f.effd as parent_effd, f.portals as parent_portals,
                   c.node_id, c.type, c.dir, c.w, c.conf, c.note, c.blocked
            from frontier f
            cross join lateral (
                -- Each direction's strongest edges first: the index of edges by end and
                -- strength (edge_in_strength) stops reading a hub's mentions at the cap.
                (select a.node_id, a.type, a.dir, a.w, a.conf, a.note, null::text as blocked
                 from (
                     (select e.dst as node_id, e.type, 'out'::text as dir, e.weight::float8 as w,
                             e.confidence::float8 as conf, null::text as note
                      from tortus.edge e
                      where not v_age and e.tenant_id = v_tenant and e.src = f.node_id
                        and (v_allow is null or e.type = any(v_allow)) and e.type <> all(v_deny)
                      order by e.weight::float8 * e.confidence::float8 desc, e.dst
                      limit v_scan_cap)
                     union all
                     (select e.src, e.type, 'in', e.weight, e.confidence, null
                      from tortus.edge e
                      where not v_age and e.tenant_id = v_tenant and e.dst = f.node_id
                        and (v_allow is null or e.type = any(v_allow)) and e.type <> all(v_deny)
                      order by e.weight::float8 * e.confidence::float8 desc, e.src
                      limit v_scan_cap)
                     union all
                     select t.dst, 'portal', 'portal', t.weight, 1, t.reason
                     from tortus.portal t
                     where not v_age and v_portals_ok and f.portals < v_max_portal_hops
                       and t.tenant_id = v_tenant and t.src = f.node_id
                     union all
                     select x.node_id, x.type, x.dir, x.w, x.conf, x.note
                     from unnest(a_src, a_dst, a_type, a_dir, a_w, a_conf, a_note)
                          as x(src, node_id, type, dir, w, conf, note)
                     where v_age and x.src = f.node_id
                       and case when x.dir = 'portal' then v_portals_ok and f.portals < v_max_portal_hops
                                else (v_allow is null or x.type = any(v_allow)) and x.type <> all(v_deny) end
                 ) a
                 order by a.w * a.conf desc, a.node_id
                 limit v_scan_cap)
                union all
                -- Edges and portals that may not be followed, a few per node, to report why.
                (select b.node_id, b.type, b.dir, b.w, b.conf, b.note, b.blocked
                 from (
                     select e.dst as node_id, e.type, 'out'::text as dir, e.weight::float8 as w,
                            e.confidence::float8 as conf, null::text as note, e.type as blocked
                     from tortus.edge e
                     where not v_age and v_report_types and e.tenant_id = v_tenant and e.src = f.node_id
                       and not ((v_allow is null or e.type = any(v_allow)) and e.type <> all(v_deny))
                     union all
                     select e.src, e.type, 'in', e.weight, e.confidence, null, e.type
                     from tortus.edge e
                     where not v_age and v_report_types and e.tenant_id = v_tenant and e.dst = f.node_id
                       and not ((v_allow is null or e.type = any(v_allow)) and e.type <> all(v_deny))
                     union all
                     select t.dst, 'portal', 'portal', t.weight, 1, t.reason,
                            case when not v_portal_type_ok then 'portal'
                                 when v_local_only then 'portal not taken: local_only'
                                 else format('portal budget spent (max_portal_hops %s)', v_max_portal_hops) end
                     from tortus.portal t
                     where not v_age and v_report and not (v_portals_ok and f.portals < v_max_portal_hops)
                       and t.tenant_id = v_tenant and t.src = f.node_id
                     union all
                     select x.node_id, x.type, x.dir, x.w, x.conf, x.note,
                            case when x.dir <> 'portal' then x.type
                                 when not v_portal_type_ok then 'portal'
                                 when v_local_only then 'portal not taken: local_only'
                                 else format('portal budget spent (max_portal_hops %s)', v_max_portal_hops) end
                     from unnest(a_src, a_dst, a_type, a_dir, a_w, a_conf, a_note)
                          as x(src, node_id, type, dir, w, conf, note)
                     where v_age and v_report and x.src = f.node_id
                       and case when x.dir = 'portal' then not (v_portals_ok and f.portals < v_max_portal_hops)
                                else v_report_types
                                     and not ((v_allow is null or x.type = any(v_allow)) and x.type <> all(v_deny)) end
                 ) b
                 order by b.w * b.conf desc, b.node_id
                 limit v_fan_out)
            ) c
            where c.node_id not in (select k.node_id from kept k)
        ), info as materialized (
            select n.node_id, n.kind,
                   tortus.vector_similarity(n.embedding, traverse.query) as sim,
                   (select min(tortus.torus_distance(c.theta, c.phi, s.theta, s.phi))
                    from unnest(v_seed_theta, v_seed_phi) as s(theta, phi)) as dist,
                   -- As counted when the concept was placed; counted here when it has not been.
                   case when n.kind = 'chunk' then 0
                        else least(coalesce(case when v_stored_mentions then n.mentions end, (select count(*) from (
                        select 1 from tortus.edge m
                        where m.tenant_id = v_tenant and m.dst = n.node_id and m.type = 'mentions' limit 1000
                    ) z)), 1000) end as mentions,
                   (v_subgraphs is null or exists (
                        select 1 from tortus.membership m
                        where m.tenant_id = v_tenant and m.node_id = n.node_id and m.subgraph = any(v_subgraphs)))
                   and (not v_local_only
                        or not exists (select 1 from tortus.membership m
                                       where m.tenant_id = v_tenant and m.node_id = n.node_id)
                        or exists (select 1 from tortus.membership m
                                   where m.tenant_id = v_tenant and m.node_id = n.node_id
                                     and m.subgraph = any(v_seed_subgraphs))) as sub_ok
            from tortus.node n
            cross join lateral tortus.layout_coordinates(n.theta, n.phi, n.props, v_layout) c
            where n.tenant_id = v_tenant and n.node_id in (select s.node_id from scanned s)
        ), hop_scored as materialized (
            select s.parent, s.parent_strength, s.node_id, s.type, s.dir, s.w, s.conf, s.note, s.blocked,
                   i.kind, i.dist, i.sub_ok,
                   s.parent_portals + (s.dir = 'portal')::integer as portals,
                   coalesce(i.dist, s.parent_effd) as effd,
                   v_decay * s.w * s.conf * coalesce((1 + i.sim) / 2, 0.5) / ln(exp(1.0::float8) + i.mentions) as raw
            from scanned s join info i on i.node_id = s.node_id
        ), scored as (
            -- Hop scores below 1e-30 count as 0, so products of tiny weights cannot underflow.
            select h.*, h.parent_strength * h.hop_score as strength,
                   h.parent_strength * h.hop_score * exp(-coalesce(h.effd, 0)) as score
            from (select x.*, case when x.raw < 1e-30 then 0 else x.raw end as hop_score from hop_scored x) h
        ), classified as (
            select h.*,
                   case
                       when h.blocked = h.type and h.type = any(v_deny) then
                           format('edge type %s is in edge_types_deny', h.type)
                       when h.blocked = h.type then format('edge type %s is not in edge_types_allow', h.type)
                       when h.blocked is not null then h.blocked
                       when not h.sub_ok and v_local_only and v_subgraphs is null then
                           'outside the seeds'' subgraphs (local_only)'
                       when not h.sub_ok then 'outside the allowed subgraphs'
                       when v_radius is not null and h.dist > v_radius then
                           format('outside torus_radius (distance %s > %s)', round(h.dist::numeric, 3), v_radius)
                   end as why0
            from scored h
        ), per_parent as (
            -- The best edge from each parent to each neighbour (a followable one if any).
            select distinct on (s.parent, s.node_id) s.*
            from classified s
            order by s.parent, s.node_id, s.why0 is not null, s.score desc, s.type, s.dir
        ), fanned as (
            select x.*,
                   coalesce(x.why0, case when x.fan_rank > v_fan_out then
                       format('over fan_out (rank %s of %s scanned neighbours, fan_out %s)',
                              x.fan_rank, x.fan_total, v_fan_out)
                   end) as why1
            from (
                select pp.*,
                       row_number() over (partition by pp.parent, pp.why0 is null
                                          order by pp.score desc, pp.node_id) as fan_rank,
                       count(*) filter (where pp.why0 is null) over (partition by pp.parent) as fan_total
                from per_parent pp
            ) x
        ), best as (
            -- One row per node: its best followable path if any, else its best pruned one.
            select distinct on (f.node_id) f.*,
                   coalesce(f.why1, case when v_min_score is not null and f.score < v_min_score then
                       format('score %s below min_score %s', round(f.score::numeric, 4), v_min_score) end) as why2
            from fanned f
            order by f.node_id, f.why1 is not null, f.score desc, f.parent
        ), budgeted as (
            select x.*,
                   coalesce(x.why2, case when x.keep_rank > v_max_nodes - v_kept then
                       format('over max_nodes budget (%s)', v_max_nodes) end) as why
            from (
                select b.*,
                       row_number() over (partition by b.why2 is null order by b.score desc, b.node_id) as keep_rank
                from best b
            ) x
        ), out_rows as (
            select o.* from budgeted o where o.why is null
            union all
            (select o.* from budgeted o
             where o.why is not null and o.node_id not in (select a.node_id from all_rows a)
             order by o.score desc, o.node_id
             limit greatest(v_max_nodes - v_pruned, 0))
        )
        select array_agg(o.node_id order by o.why is not null, o.score desc, o.node_id),
               array_agg(o.parent order by o.why is not null, o.score desc, o.node_id),
               array_agg(v_h order by o.why is not null, o.score desc, o.node_id),
               array_agg(o.kind order by o.why is not null, o.score desc, o.node_id),
               array_agg(o.type order by o.why is not null, o.score desc, o.node_id),
               array_agg(o.dir order by o.why is not null, o.score desc, o.node_id),
               array_agg(case
                   when o.dir = 'portal' then 'portal: ' || o.note
                   when o.dir = 'in' and o.type = 'mentions' then format('mentioned by %s', o.kind)
                   when o.dir = 'in' then format('reverse %s edge', o.type)
                   else format('%s edge', o.type)
               end || case when o.dir = 'portal' then format(' (w=%s)', trim_scale(round(o.w::numeric, 2)))
                           when o.conf < 1 then format(' (w=%s, confidence %s)', trim_scale(round(o.w::numeric, 2)),
                                                       trim_scale(round(o.conf::numeric, 2)))
                           else format(' (w=%s)', trim_scale(round(o.w::numeric, 2))) end
                   order by o.why is not null, o.score desc, o.node_id),
               array_agg(o.hop_score order by o.why is not null, o.score desc, o.node_id),
               array_agg(o.strength order by o.why is not null, o.score desc, o.node_id),
               array_agg(o.score order by o.why is not null, o.score desc, o.node_id),
               array_agg(o.dist order by o.why is not null, o.score desc, o.node_id),
               array_agg(o.effd order by o.why is not null, o.score desc, o.node_id),
               array_agg(o.portals order by o.why is not null, o.score desc, o.node_id),
               array_agg(o.why order by o.why is not null, o.score desc, o.node_id)
          into n_node, n_parent, n_hop, n_kind, n_type, n_dir, n_reason, n_hop_score, n_strength,
               n_score, n_dist, n_effd, n_portals, n_why
        from out_rows o;

        exit when n_node is null;
        r_node := r_node || n_node;
        r_parent := r_parent || n_parent;
        r_hop := r_hop || n_hop;
        r_kind := r_kind || n_kind;
        r_type := r_type || n_type;
        r_dir := r_dir || n_dir;
        r_reason := r_reason || n_reason;
        r_hop_score := r_hop_score || n_hop_score;
        r_strength := r_strength || n_strength;
        r_score := r_score || n_score;
        r_dist := r_dist || n_dist;
        r_effd := r_effd || n_effd;
        r_portals := r_portals || n_portals;
        r_why := r_why || n_why;
        select v_kept + count(*) filter (where w is null), v_pruned + count(*) filter (where w is not null)
          into v_kept, v_pruned from unnest(n_why) as w;
        exit when not exists (select 1 from unnest(n_why) as w where w is null);
    end loop;

    -- Paths follow the parent links back to a seed (every parent is a kept row).
    return query
    with recursive rows_ as (
        select a.*, a.idx::integer as i
        from unnest(r_node, r_parent, r_hop, r_kind, r_type, r_dir, r_reason, r_hop_score, r_score, r_dist, r_why)
             with ordinality as a(node_id, parent, hop, kind, type, dir, reason, hop_score, score, dist, why, idx)
    ), walk as (
        select r.i as leaf, r.parent as up, array[r.node_id] as path,
               case when r.type is null then '{}'::text[] else array[r.type] end as types,
               case when r.dir is null then '{}'::text[] else array[r.dir] end as dirs,
               case when r.hop_score is null then '{}'::double precision[] else array[r.hop_score] end as hop_scores,
               case when r.reason is null then '{}'::text[] else array[r.reason] end as reasons
        from rows_ r
        union all
        select w.leaf, u.parent, u.node_id || w.path,
               case when u.type is null then w.types else u.type || w.types end,
               case when u.dir is null then w.dirs else u.dir || w.dirs end,
               case when u.hop_score is null then w.hop_scores else u.hop_score || w.hop_scores end,
               case when u.reason is null then w.reasons else u.reason || w.reasons end
        from walk w join rows_ u on u.i = w.up
    )
    select r.node_id, r.kind, n.label, r.hop, w.path, w.types, w.dirs, w.hop_scores, w.reasons, r.score, r.dist,
           r.why is not null, r.why
    from rows_ r
    join walk w on w.leaf = r.i and w.up is null
    join tortus.node n on n.tenant_id = v_tenant and n.node_id = r.node_id
    -- A node pruned on one path but kept on a later hop is reported once, as kept.
    where r.why is null or not exists (select 1 from rows_ k where k.node_id = r.node_id and k.why is null)
    order by r.why is not null, r.hop, r.score desc, r.node_id;
end
$$;

comment on function tortus.traverse(bigint[], vector, jsonb) is
'Bounded multi-hop walk from seed nodes over typed edges (both directions: a reversed mentions '
'edge leads from a concept to the chunks that mention it) and portals (src to dst), for the '
'current tenant. Policy keys, defaults and caps: see tortus.traverse_policy. Breadth-first, one '
'set-based query per hop: the beam_width best kept nodes of the previous hop are expanded, '
'each once: its strongest 2 x fan_out neighbour edges are scored and at most fan_out kept '
'(so a hop scores at most beam_width x 2 x fan_out candidates); a node is kept once, on its '
'best path of the first hop that reaches it. Scoring: hop_score = decay * weight * confidence '
'* rel(n) / ln(e + mentions(n)); score = product of hop_scores along the path * exp(-d(n)), '
'where rel(n) = (1 + cosine similarity of the node embedding to the query) / 2 (0.5 when '
'either is missing or the dimensions differ), mentions(n) = number of chunks mentioning n '
'(up to 1000, as tortus.place_concepts last counted them, counted live for a concept it has not '
'counted and for a caller who reads only some sources; 0 for chunks; a hub penalty), d(n) = torus distance to the nearest seed (inherited '
'from the previous node when unknown). Portal hops have confidence 1 and count against '
'max_portal_hops per path. Seeds are hop 0 rows with score 1. Returns kept rows (at most '
'max_nodes, hop <= max_hops) and pruned candidates with pruned = true and a prune_reason '
'(denied or not allowed edge type, portal not allowed, outside subgraphs, outside '
'torus_radius, over fan_out, below min_score, over max_nodes budget; at most max_nodes such '
'rows, one per node). path holds node ids from a seed; edge_types, directions (out, in, '
'portal), hop_scores and reasons hold one entry per hop.';

create or replace function tortus.ppr(
    seeds bigint[], damping double precision default 0.85, iterations integer default 20,
    max_frontier integer default 5000
) returns table (node_id bigint, score double precision)
language plpgsql stable
set search_path = pg_catalog, pg_temp
set plan_cache_mode = force_custom_plan
as $$
#variable_conflict use_column
declare
    v_tenant constant text := tortus.current_tenant();
    v_seeds bigint[];
    v_ids bigint[];
    v_scores double precision[];
begin
    if damping is null or damping < 0 or damping >= 1 then
        raise exception 'damping must be in [0, 1), got %', damping using errcode = '22023';
    end if;
    if iterations is null or iterations < 0 or iterations > 100 then
        raise exception 'iterations must be between 0 and 100, got %', iterations using errcode = '22023';
    end if;
    if max_frontier is null or max_frontier < 1 or max_frontier > 100000 then
        raise exception 'max_frontier must be between 1 and 100000, got %', max_frontier using errcode = '22023';
    end if;
    select array_agg(x.node_id order by x.node_id) into v_seeds
    from (select n.node_id from tortus.node n
          where n.tenant_id = v_tenant and n.node_id = any(seeds)
          order by n.node_id limit max_frontier) x;
    if v_seeds is null then
        return;
    end if;
    v_ids := v_seeds;
    v_scores := array_fill(1.0::double precision / cardinality(v_seeds), array[cardinality(v_seeds)]);

    for v_round in 1 .. iterations loop
        with r as (
            select u.node_id, u.s from unnest(v_ids, v_scores) as u(node_id, s)
        ), nb as (
            -- The frontier's edges, read again each round: caching them in arrays measured slower,
            -- since every round would then scan the adjacency of every node ever reached.
            select r.node_id as u, r.s, x.v, x.w
            from r
            cross join lateral (
                select e.dst as v, e.weight::double precision as w
                from tortus.edge e where e.tenant_id = v_tenant and e.src = r.node_id
                union all
                select e.src, e.weight
                from tortus.edge e where e.tenant_id = v_tenant and e.dst = r.node_id
            ) x
        ), total as (
            select nb.u, min(nb.s) as s, sum(nb.w) as w from nb group by nb.u
        ), flow as (
            -- Each node passes damping * its score to its neighbours in proportion to edge weight;
            -- the rest (the restart share and the mass of nodes without edges) returns to the
            -- seeds uniformly.
            select y.node_id, sum(y.s) as s
            from (
                select nb.v as node_id, damping * nb.s * nb.w / t.w as s
                from nb join total t on t.u = nb.u
                union all
                select s.node_id,
                       (1 - damping * coalesce((select sum(t.s) from total t), 0)) / cardinality(v_seeds)
                from unnest(v_seeds) as s(node_id)
            ) y
            group by y.node_id
        ), top as (
            -- Scores below 1e-200 are dropped (and cannot underflow in the next round).
            select t.node_id, t.s from flow t where t.s > 1e-200 order by t.s desc, t.node_id limit max_frontier
        )
        select array_agg(t.node_id order by t.node_id), array_agg(t.s / z.total order by t.node_id)
          into v_ids, v_scores
        from top t cross join (select sum(t2.s) as total from top t2) z;
    end loop;

    return query
    select u.node_id, u.s from unnest(v_ids, v_scores) as u(node_id, s) order by u.s desc, u.node_id;
end
$$;

comment on function tortus.ppr(bigint[], double precision, integer, integer) is
'Personalized PageRank from the seeds over the current tenant''s typed edges taken as an '
'undirected graph weighted by edge weight (portals excluded). Power iteration: each round a '
'node sends damping * score to its neighbours in proportion to edge weight, and the remaining '
'mass (restart plus nodes without edges) returns to the seeds uniformly; then only the '
'max_frontier highest-scoring nodes are kept and scores are renormalized, so they sum to 1. '
'Each round reads the frontier''s edges, so the cost grows with iterations x the edges of the '
'max_frontier best nodes. Nodes never reached from a seed get no row. damping in [0, 1), '
'iterations 0..100, max_frontier 1..100000 (at most max_frontier seeds are used). Returns '
'(node_id, score), best first.';
