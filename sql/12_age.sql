-- The Apache AGE mirror of a tenant's graph: one AGE graph per tenant, kept in step with
-- tortus.node, tortus.edge and tortus.portal by tortus.age_sync, read by the walk (policy
-- traversal "age") and by analysts through tortus.cypher.
--
-- Every function here is created whether or not AGE is installed; AGE objects are only named in
-- statements that run after tortus.age_available() said yes. Graph schemas are private to the
-- owner: the application and analyst roles reach a mirror only through these functions, which
-- fix the graph to the current tenant's, so no tenant reads another's mirror.
--
-- Vertex label Node holds {id, kind, label} (id = tortus node_id); each edge type is an edge
-- label holding {id, weight, confidence}; portals are label portal, {id, weight, reason}.
-- Graph ids are derived from tortus ids (ag_catalog._graphid(label id, row id)), so edges are
-- written without looking their endpoints up.

create or replace function tortus.age_available() returns boolean
language sql stable
set search_path = pg_catalog, pg_temp
return exists (select 1 from pg_extension where extname = 'age');

comment on function tortus.age_available() is
'Whether the Apache AGE extension is installed in this database (CREATE EXTENSION age, by a '
'superuser); the traversal "age" and tortus.age_sync need it.';

create or replace function tortus.age_graph(p_tenant text) returns text
language sql immutable
set search_path = pg_catalog, pg_temp
return 'tortus_' || left(md5(p_tenant), 16);

comment on function tortus.age_graph(text) is
'The name of the Apache AGE graph mirroring a tenant (tortus_ and 16 hex digits of the tenant''s md5).';

create or replace function tortus.age_mirrored(p_tenant text) returns boolean
language plpgsql stable security definer
set search_path = pg_catalog, pg_temp
as $$
begin
    if not tortus.age_available() then
        return false;
    end if;
    -- Each AGE graph is a schema of its own (ag_catalog.ag_graph itself is the superuser's).
    return exists (select 1 from pg_namespace where nspname = tortus.age_graph(p_tenant));
end
$$;

comment on function tortus.age_mirrored(text) is
'Whether the tenant has an Apache AGE mirror (see tortus.age_sync).';

create or replace function tortus.age_label(p_graph text, p_label text, p_kind "char") returns integer
language plpgsql
set search_path = ag_catalog, pg_catalog, pg_temp
as $$
begin
    if to_regclass(format('%I.%I', p_graph, p_label)) is null then
        if p_kind = 'v' then
            perform ag_catalog.create_vlabel(p_graph::cstring, p_label::cstring);
        else
            perform ag_catalog.create_elabel(p_graph::cstring, p_label::cstring);
        end if;
    end if;
    -- Indexes for the walk's reads: vertices by their properties (a match on {id: …}), edges by
    -- either end.
    if p_kind = 'v' then
        execute format('create index if not exists %I on %I.%I using gin (properties)',
                       p_label || '_properties', p_graph, p_label);
    else
        execute format('create index if not exists %I on %I.%I (start_id)', p_label || '_start_id', p_graph, p_label);
        execute format('create index if not exists %I on %I.%I (end_id)', p_label || '_end_id', p_graph, p_label);
    end if;
    return ag_catalog._label_id(p_graph::name, p_label::name)::integer;
end
$$;

comment on function tortus.age_label(text, text, "char") is
'The id of a label of an Apache AGE graph, created first (vertex label for kind v, else edge label) '
'when missing, with the indexes the walk reads it by. Used by tortus.age_sync.';

create or replace function tortus.age_sync_label(p_graph text, p_label text, p_wanted text)
returns table (added bigint, removed bigint, changed bigint)
language plpgsql
set search_path = ag_catalog, pg_catalog, pg_temp
as $$
begin
    -- p_wanted: a query of (id graphid, start_id graphid, end_id graphid, properties agtype); for
    -- vertices start_id and end_id are null.
    return query execute format($q$
        with wanted as materialized (%1$s),
        gone as (
            delete from %2$I.%3$I v where not exists (select 1 from wanted w where w.id = v.id) returning 1
        ),
        changed as (
            update %2$I.%3$I v set properties = w.properties
            from wanted w where w.id = v.id and v.properties <> w.properties returning 1
        ),
        fresh as (
            insert into %2$I.%3$I %4$s
            select %5$s from wanted w where not exists (select 1 from %2$I.%3$I v where v.id = w.id)
            returning 1
        )
        select (select count(*) from fresh), (select count(*) from gone), (select count(*) from changed)
    $q$, p_wanted, p_graph, p_label,
        case when p_label = 'Node' then '(id, properties)' else '(id, start_id, end_id, properties)' end,
        case when p_label = 'Node' then 'w.id, w.properties' else 'w.id, w.start_id, w.end_id, w.properties' end);
end
$$;

comment on function tortus.age_sync_label(text, text, text) is
'Bring one label table of an Apache AGE graph in line with the rows a query says it should hold '
'(id, start_id, end_id, properties): delete, update and insert only what differs. Returns the '
'rows added, removed and changed. Used by tortus.age_sync.';

create or replace function tortus.age_sync(p_tenant text default null)
returns table (nodes bigint, edges bigint, added bigint, removed bigint, changed bigint)
language plpgsql
set search_path = ag_catalog, pg_catalog, pg_temp
as $$
declare
    v_tenant constant text := coalesce(p_tenant, tortus.current_tenant());
    v_graph text;
    v_node integer;
    v_label integer;
    v_type text;
    a bigint := 0;
    r bigint := 0;
    c bigint := 0;
    s record;
begin
    if v_tenant is null then
        raise exception 'no tenant: pass one, or set tortus.tenant' using errcode = '22023';
    end if;
    if not tortus.age_available() then
        raise exception 'Apache AGE is not installed in this database' using errcode = '0A000',
            hint = 'a superuser runs CREATE EXTENSION age once; see docs/deploy.md';
    end if;
    if not exists (select 1 from tortus.tenant t where t.tenant_id = v_tenant) then
        raise exception 'unknown tenant %', v_tenant using errcode = '22023';
    end if;
    v_graph := tortus.age_graph(v_tenant);
    if not tortus.age_mirrored(v_tenant) then
        perform ag_catalog.create_graph(v_graph::name);
    end if;
    v_node := tortus.age_label(v_graph, 'Node', 'v');
    select * into s from tortus.age_sync_label(v_graph, 'Node', format(
        'select ag_catalog._graphid(%s, n.node_id) as id, null::graphid as start_id, null::graphid as end_id,
                jsonb_build_object(''id'', n.node_id, ''kind'', n.kind, ''label'', n.label)::text::agtype as properties
         from tortus.node n where n.tenant_id = %L', v_node, v_tenant));
    a := a + s.added; r := r + s.removed; c := c + s.changed;
    -- Every edge type the tenant uses, every edge label the mirror has (emptied when unused), portals.
    for v_type in
        select e.type from tortus.edge e where e.tenant_id = v_tenant
        union select c.relname::text from pg_inherits i join pg_class c on c.oid = i.inhrelid
              where i.inhparent = to_regclass(format('%I._ag_label_edge', v_graph))
        union select 'portal'
    loop
        v_label := tortus.age_label(v_graph, v_type, 'e');
        select * into s from tortus.age_sync_label(v_graph, v_type, case when v_type = 'portal' then format(
            'select ag_catalog._graphid(%s, t.portal_id) as id, ag_catalog._graphid(%s, t.src) as start_id,
                    ag_catalog._graphid(%s, t.dst) as end_id,
                    jsonb_build_object(''id'', t.portal_id, ''weight'', t.weight::float8,
                                       ''reason'', t.reason)::text::agtype as properties
             from tortus.portal t where t.tenant_id = %L', v_label, v_node, v_node, v_tenant)
        else format(
            'select ag_catalog._graphid(%s, e.edge_id) as id, ag_catalog._graphid(%s, e.src) as start_id,
                    ag_catalog._graphid(%s, e.dst) as end_id,
                    jsonb_build_object(''id'', e.edge_id, ''weight'', e.weight::float8,
                                       ''confidence'', e.confidence::float8)::text::agtype as properties
             from tortus.edge e where e.tenant_id = %L and e.type = %L', v_label, v_node, v_node, v_tenant, v_type)
        end);
        a := a + s.added; r := r + s.removed; c := c + s.changed;
    end loop;
    return query select (select count(*) from tortus.node n where n.tenant_id = v_tenant),
                        (select count(*) from tortus.edge e where e.tenant_id = v_tenant)
                        + (select count(*) from tortus.portal t where t.tenant_id = v_tenant),
                        a, r, c;
end
$$;

comment on function tortus.age_sync(text) is
'Create or bring up to date the Apache AGE mirror of a tenant (default: the current one): vertices '
'labelled Node {id, kind, label} for tortus.node, an edge label per edge type {id, weight, '
'confidence}, and label portal {id, weight, reason}. Only what differs is written. Returns the '
'tenant''s node and edge counts and the mirror rows added, removed and changed. Run by the owner '
'role; ingest, update and removal call it for mirrored tenants.';

create or replace function tortus.age_drop(p_tenant text) returns boolean
language plpgsql
set search_path = ag_catalog, pg_catalog, pg_temp
as $$
begin
    if not tortus.age_mirrored(p_tenant) then
        return false;
    end if;
    perform ag_catalog.drop_graph(tortus.age_graph(p_tenant)::name, true);
    return true;
end
$$;

comment on function tortus.age_drop(text) is
'Drop a tenant''s Apache AGE mirror, if it has one (deleting a tenant does); returns whether it had one.';

create or replace function tortus.age_neighbours(p_tenant text, p_nodes bigint[])
returns table (src bigint, node_id bigint, type text, dir text, w double precision, conf double precision, note text)
language plpgsql stable security definer
set search_path = ag_catalog, pg_catalog, pg_temp
-- A frontier is a few dozen nodes, but the planner takes an UNWIND for 1000 rows and would hash
-- every edge of the graph: index lookups per node instead (3.8 against 28 ms for 5 nodes of 11,220).
set enable_hashjoin = off
set enable_mergejoin = off
set max_parallel_workers_per_gather = 0
as $$
begin
    if p_tenant is distinct from tortus.current_tenant() then
        raise exception 'a tenant reads only its own mirror' using errcode = '42501';
    end if;
    if cardinality(p_nodes) is null or cardinality(p_nodes) = 0 then
        return;
    end if;
    -- Two directed matches: an undirected one joins on an OR, which PostgreSQL cannot hash; a
    -- match per node by its {id}, which the GIN index on the properties serves.
    -- (With ag_catalog on the search path, agtype::text is a string's value, unquoted.)
    -- Loading the library installs AGE's parser hooks before cypher() below is parsed.
    perform ag_catalog._graphid(1, 0);
    return query execute format($q$
        select f::text::bigint, n::text::bigint, t::text,
               case when t::text = 'portal' then 'portal' when o::text::boolean then 'out' else 'in' end,
               w::text::float8, coalesce(c::text::float8, 1), r::text
        from ag_catalog.cypher(%L, $c$
            UNWIND $ids AS x MATCH (f:Node {id: x})-[e]->(n:Node)
            RETURN f.id, n.id, label(e), true, e.weight, e.confidence, e.reason
            UNION ALL
            UNWIND $ids AS x MATCH (f:Node {id: x})<-[e]-(n:Node) WHERE label(e) <> 'portal'
            RETURN f.id, n.id, label(e), false, e.weight, e.confidence, e.reason
        $c$, $1) as (f agtype, n agtype, t agtype, o agtype, w agtype, c agtype, r agtype)
    $q$, tortus.age_graph(p_tenant)) using jsonb_build_object('ids', to_jsonb(p_nodes))::text::agtype;
end
$$;

comment on function tortus.age_neighbours(text, bigint[]) is
'The edges and portals at some nodes of the current tenant''s Apache AGE mirror, read by one '
'Cypher match: (src, neighbour, type, direction out/in/portal, weight, confidence, portal reason). '
'Portals are followed from their source only, as in tortus.traverse.';

create or replace function tortus.cypher_functions() returns text[]
language sql immutable
set search_path = pg_catalog, pg_temp
return array['count', 'collect', 'sum', 'avg', 'min', 'max', 'stdev', 'stdevp', 'percentilecont', 'percentiledisc',
             'id', 'label', 'labels', 'type', 'properties', 'keys', 'nodes', 'relationships', 'startnode', 'endnode',
             'length', 'size', 'head', 'last', 'tail', 'range', 'reverse', 'coalesce', 'exists', 'tostring',
             'tointeger', 'tofloat', 'toboolean', 'tostringlist', 'tointegerlist', 'tofloatlist', 'tobooleanlist',
             'toupper', 'tolower', 'trim', 'ltrim', 'rtrim', 'substring', 'left', 'right', 'replace', 'split',
             'abs', 'ceil', 'floor', 'round', 'sign', 'sqrt', 'exp', 'log', 'log10', 'e', 'pi', 'rand',
             'sin', 'cos', 'tan', 'asin', 'acos', 'atan', 'atan2', 'degrees', 'radians', 'timestamp'];

comment on function tortus.cypher_functions() is
'The functions a tortus.cypher query may call: Cypher''s own (aggregates, graph, list, string and '
'math functions). AGE would also let Cypher call SQL functions, which tortus.cypher refuses.';

create or replace function tortus.cypher(query text, params jsonb default '{}')
returns setof jsonb
language plpgsql security definer
set search_path = ag_catalog, pg_catalog, pg_temp
as $$
declare
    v_tenant constant text := tortus.current_tenant();
    v_refused text;
begin
    if v_tenant is null then
        raise exception 'no tenant: set tortus.tenant first' using errcode = '22023';
    end if;
    if not tortus.age_mirrored(v_tenant) then
        raise exception 'tenant % has no Apache AGE mirror', v_tenant using errcode = '55000',
            hint = 'run tortus-pg graph sync-age (or select tortus.age_sync()) first';
    end if;
    -- The mirror is derived data: it is read here, never written (tortus.age_sync writes it).
    if query ~* '\m(create|merge|set|delete|remove|detach|load|call)\M' then
        raise exception 'tortus.cypher runs read-only queries: no CREATE, MERGE, SET, DELETE, REMOVE or CALL'
            using errcode = '42501';
    end if;
    -- Cypher in AGE can call SQL functions, and this function runs as the owner: only Cypher's
    -- own functions are allowed (names in string literals do not count).
    select string_agg(distinct f, ', ') into v_refused
    from regexp_matches(regexp_replace(query, $r$'([^'\\]|\\.)*'|"([^"\\]|\\.)*"$r$, '', 'g'),
                        '([A-Za-z_][A-Za-z0-9_.]*)\s*\(', 'g') as m(x), lower(m.x[1]) as f
    where f <> all (tortus.cypher_functions() || array[  -- clauses and operators a parenthesis may follow
        'match', 'optional', 'where', 'with', 'unwind', 'return', 'distinct', 'order', 'by', 'skip', 'limit', 'union',
        'and', 'or', 'xor', 'not', 'in', 'is', 'as', 'case', 'when', 'then', 'else', 'contains', 'all', 'any',
        'none', 'single']);
    if v_refused is not null then
        raise exception 'tortus.cypher allows only Cypher''s own functions, not %', v_refused using errcode = '42501';
    end if;
    if position('$c$' in query) > 0 then
        raise exception 'the query may not contain $c$' using errcode = '22023';
    end if;
    perform ag_catalog._graphid(1, 0);
    -- agtype's text is JSON but for the ::vertex, ::edge and ::path after a graph entity.
    return query execute format(
        $q$select regexp_replace(ag_catalog.agtype_out(v)::text, '([}\]])::(vertex|edge|path)', '\1', 'g')::jsonb
           from ag_catalog.cypher(%L, $c$%s$c$, $1) as (v agtype)$q$, tortus.age_graph(v_tenant), query)
        using params::text::agtype;
end
$$;

comment on function tortus.cypher(text, jsonb) is
'A read-only Cypher query over the current tenant''s Apache AGE mirror (see tortus.age_sync); '
'$name parameters come from params. The query returns one value per row, a map for several: '
'RETURN {id: n.id, label: n.label}. Rows come back as jsonb.';

revoke all on function tortus.age_mirrored(text), tortus.age_neighbours(text, bigint[]), tortus.age_drop(text),
    tortus.cypher(text, jsonb), tortus.age_sync(text), tortus.age_label(text, text, "char"),
    tortus.age_sync_label(text, text, text) from public;
grant execute on function tortus.age_available(), tortus.age_graph(text), tortus.age_mirrored(text),
    tortus.cypher_functions(),
    tortus.age_neighbours(text, bigint[]), tortus.cypher(text, jsonb) to tortus_app, tortus_analyst;
