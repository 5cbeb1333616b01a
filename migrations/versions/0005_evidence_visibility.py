"""Evidence-following visibility: sources readable by groups, and what is derived from them
visible only to callers who can read some of its evidence.

A source may name its readers (`source.readers`, groups; NULL: everyone in the tenant). A
caller holds groups: an API key's `groups`, or a bound login's (`tenant_login.groups`); NULL
means every group, as for the tenant's administrators. Restrictive policies then hide

- a source none of whose readers the caller holds, with its spans and chunks;
- an edge whose every supporting span (or whose source) is hidden;
- a concept all of whose edges are hidden, and the memberships, postings and portals of a
  hidden node;
- a query trace asked by a caller holding a group this caller does not hold.

A caller restricted to groups reads; only callers holding every group write the graph (an
ingest by a partial reader would judge shared concepts by half their evidence). A caller holding
every group skips the checks; a restricted caller gathers what it may read once per statement.

The groups of a key are the key's own: `tortus.enter_tenant` records which key entered, and the
proof of entry now covers the key, so naming another key's hash shows nothing.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02
"""

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

_GROUP_CHECK = "check ({col} is null or (cardinality({col}) between 1 and 64 and array_position({col}, null) is null))"
COLUMNS = f"""
alter table tortus.source add column readers text[] {_GROUP_CHECK.format(col='readers')};
alter table tortus.api_key add column groups text[] {_GROUP_CHECK.format(col='groups')};
alter table tortus.tenant_login add column groups text[] {_GROUP_CHECK.format(col='groups')};
"""

_ALLOWED = """
create or replace function tortus.tenant_allowed() returns boolean
language sql stable security definer
set search_path = pg_catalog, pg_temp
as $$
    select coalesce(current_setting('tortus.tenant', true), '') <> '' and (%(claimed)s) and (
        pg_has_role(session_user, 'tortus_admin', 'member')
        or exists (select 1 from tortus.tenant_login l
                   where l.login = session_user::text and l.tenant_id = current_setting('tortus.tenant', true))
        or current_setting('tortus.tenant_proof', true) = tortus.tenant_proof(%(proof)s))
$$;
"""
KEYED = "current_setting('tortus.tenant', true) || ':' || coalesce(current_setting('tortus.key_hash', true), '')"
# A session naming a key must hold the proof of entering with it, administrators included.
CLAIMED = ("coalesce(current_setting('tortus.key_hash', true), '') = '' "
           "or current_setting('tortus.tenant_proof', true) = tortus.tenant_proof(" + KEYED + ")")
TENANT_ONLY = "current_setting('tortus.tenant', true)"

FUNCTIONS = """
create function tortus.caller_groups() returns text[]
language plpgsql stable security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    tenant text := current_setting('tortus.tenant', true);
    key text := current_setting('tortus.key_hash', true);
    held text[];
begin
    -- A key's groups bind whoever entered with it, an administrator's session included.
    if key is not null and current_setting('tortus.tenant_proof', true) = tortus.tenant_proof(tenant || ':' || key) then
        select k.groups into held from tortus.api_key k
        where k.key_hash = key and k.tenant_id = tenant and k.revoked_at is null;
        return held;
    end if;
    if pg_has_role(session_user, 'tortus_admin', 'member') then
        return null;
    end if;
    select l.groups into held from tortus.tenant_login l
    where l.login = session_user::text and l.tenant_id = tenant;
    if found then  -- plpgsql's FOUND: the login is bound to this tenant
        return held;
    end if;
    return '{}';
end
$$;
comment on function tortus.caller_groups() is
'The groups whose sources the caller may read in its tenant: the groups of the API key it entered '
'with, else of its bound login; NULL for every group (administrators, and keys or logins given no '
'groups). Policies ask it once per statement.';
grant execute on function tortus.caller_groups() to tortus_app, tortus_analyst, tortus_admin;
"""

# A restricted caller's checks are sets, each computed once per statement and probed by hash
# (`x in (select …)`), not subqueries run per row; and they are functions, so the planner, which
# would otherwise plan every nested policy of every check for every statement, sees one call. A
# caller holding every group skips them (the OR's first arm). Inside, the caller's own policies
# choose the rows, so each set follows the one below it: sources, the spans of those, the edges
# those spans (or sources) support, the concepts those edges touch.
SETS = """
create function tortus.visible_sources() returns setof bigint
language sql stable
set search_path = pg_catalog, pg_temp
as $$ select s.source_id from tortus.source s $$;
comment on function tortus.visible_sources() is
'The sources the caller may read (the readers policy chooses them).';

create function tortus.visible_span_edges() returns setof bigint
language sql stable
set search_path = pg_catalog, pg_temp
as $$ select sp.edge_id from tortus.evidence_span sp where sp.edge_id is not null $$;
comment on function tortus.visible_span_edges() is
'The edges with an evidence span the caller may read.';

create function tortus.visible_concepts() returns setof bigint
language sql stable
set search_path = pg_catalog, pg_temp
as $$ select e.src from tortus.edge e union select e.dst from tortus.edge e $$;
comment on function tortus.visible_concepts() is
'The nodes touched by an edge the caller may read: the concepts it may see.';

create function tortus.visible_nodes() returns setof bigint
language sql stable
set search_path = pg_catalog, pg_temp
as $$ select n.node_id from tortus.node n $$;
comment on function tortus.visible_nodes() is
'The nodes the caller may read (memberships, postings and portals follow them).';
"""
EVERY = "(select tortus.caller_groups()) is null"  # a full reader skips the checks
_SOURCES = "source_id in (select tortus.visible_sources())"
_NODES = "{col} in (select tortus.visible_nodes())"
VISIBLE = {
    "source": "readers is null or coalesce(readers && (select tortus.caller_groups()), true)",
    "evidence_span": f"{EVERY} or {_SOURCES}",
    "edge": f"{EVERY} or {_SOURCES} or edge_id in (select tortus.visible_span_edges())",
    "node": (f"{EVERY} or (source_id is not null and {_SOURCES}) "
             "or (source_id is null and node_id in (select tortus.visible_concepts()))"),
    "membership": f"{EVERY} or {_NODES.format(col='node_id')}",
    "bm25_posting": f"{EVERY} or {_NODES.format(col='node_id')}",
    "bm25_doc": f"{EVERY} or {_NODES.format(col='node_id')}",
    "portal": f"{EVERY} or ({_NODES.format(col='src')} and {_NODES.format(col='dst')})",
    "query_trace": ("(select tortus.caller_groups()) is null "
                    "or (groups is not null and groups <@ (select tortus.caller_groups()))"),
}
GRAPH = ("source", "node", "edge", "subgraph", "membership", "portal", "evidence_span",
         "bm25_posting", "bm25_doc", "bm25_term", "bm25_corpus")
WRITERS = "(select tortus.caller_groups()) is null"


def _policies() -> list[str]:
    out = [f"create policy visible_evidence on tortus.{t} as restrictive for select using ({rule})"
           for t, rule in VISIBLE.items()]
    for t in GRAPH:
        out += [f"create policy writes_by_full_readers_{command} on tortus.{t} as restrictive for {command} "
                f"{'with check' if command == 'insert' else 'using'} ({WRITERS})"
                for command in ("insert", "update", "delete")]
    return out


def upgrade() -> None:
    op.execute(COLUMNS)
    op.execute(FUNCTIONS)
    op.execute(SETS)
    op.execute(_ALLOWED % {"claimed": CLAIMED, "proof": KEYED})
    # The asker's groups, recorded with the trace (after caller_groups exists).
    op.execute("alter table tortus.query_trace add column groups text[] default tortus.caller_groups()")
    for statement in _policies():
        op.execute(statement)


def downgrade() -> None:
    for t in VISIBLE:
        op.execute(f"drop policy visible_evidence on tortus.{t}")
    for t in GRAPH:
        for command in ("insert", "update", "delete"):
            op.execute(f"drop policy writes_by_full_readers_{command} on tortus.{t}")
    op.execute("alter table tortus.query_trace drop column groups")
    op.execute(_ALLOWED % {"claimed": "true", "proof": TENANT_ONLY})
    op.execute("drop function tortus.visible_nodes(); drop function tortus.visible_concepts(); "
               "drop function tortus.visible_span_edges(); drop function tortus.visible_sources(); "
               "drop function tortus.caller_groups()")
    op.execute("""
alter table tortus.tenant_login drop column groups;
alter table tortus.api_key drop column groups;
alter table tortus.source drop column readers;
""")
