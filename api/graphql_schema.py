"""The GraphQL schema: `ask` (with the traversal directives), `search`, `concept`, `trace`,
`sources`; mutations `ingest` and `removeSource`.

Resolvers read the request's context (`Context`: the service, the caller, one connection scoped
to the caller's tenant) and do what REST does (`operations`). The directives on `ask` set the
traversal policy; arguments the schema types (an enum, an Int) are checked by GraphQL
validation, values the policy refuses by the policy, each as a GraphQL error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import graphene
import psycopg
from graphene.types.generic import GenericScalar
from graphql import (
    DirectiveLocation,
    GraphQLArgument,
    GraphQLBoolean,
    GraphQLDirective,
    GraphQLEnumType,
    GraphQLError,
    GraphQLFloat,
    GraphQLInt,
    GraphQLNonNull,
    GraphQLString,
    specified_directives,
)
from graphql.execution.values import get_directive_values

from . import operations
from .auth import Principal, Scope
from .errors import ApiError
from .service import Service


@dataclass
class Context:
    svc: Service
    caller: Principal
    conn: psycopg.Connection

    def need(self, scope: Scope) -> None:
        if not self.caller.allows(scope):
            raise GraphQLError(f"this API key lacks the {scope.value!r} scope")


_FIELD = [DirectiveLocation.FIELD]
_PORTAL_KIND = GraphQLEnumType("PortalKind", {"AUTO": "auto", "PREFER": "prefer", "AVOID": "avoid"},
                               description="When a walk may take a portal to another part of the torus.")
_TRAVERSAL = GraphQLEnumType("Traversal", {"SQL": "sql", "AGE": "age"},
                             description="Where the walk reads the graph: the tables, or the Apache AGE mirror.")
# Each directive and the policy field each argument sets (argument "": the directive's presence sets it).
DIRECTIVES: tuple[tuple[GraphQLDirective, dict[str, str]], ...] = (
    (GraphQLDirective("semanticGroup", _FIELD, {"name": GraphQLArgument(GraphQLNonNull(GraphQLString))},
                     description="Walk only inside this subgraph."), {"name": "semantic_group"}),
    (GraphQLDirective("portalPreference", _FIELD, {"type": GraphQLArgument(GraphQLNonNull(_PORTAL_KIND))},
                     description="Take portals when coverage is low (AUTO), always (PREFER) or never (AVOID)."),
     {"type": "portal_preference"}),
    (GraphQLDirective("failoverPlan", _FIELD, {"level": GraphQLArgument(GraphQLNonNull(GraphQLInt))},
                     description="0 (the default): walk within the torus radius; 1 or 2: widen a walk "
                                 "that found too little to the whole torus."), {"level": "failover_level"}),
    (GraphQLDirective("explainHops", _FIELD, {"on": GraphQLArgument(GraphQLBoolean, default_value=True)},
                     description="On: every pruned candidate with its reason; off: no diagnostics."),
     {"on": "explain"}),
    (GraphQLDirective("noPersonalization", _FIELD, description="Seed from search alone, not also from the "
                      "concepts the question names."), {"": "no_personalization"}),
    (GraphQLDirective("localOnly", _FIELD, description="Stay in the seeds' subgraphs; no portal hops."),
     {"": "local_only"}),
    (GraphQLDirective("traversal", _FIELD, {"engine": GraphQLArgument(GraphQLNonNull(_TRAVERSAL))},
                     description="Walk the tables (SQL) or the tenant's Apache AGE mirror through Cypher (AGE): "
                                 "the same paths."), {"engine": "traversal"}),
    (GraphQLDirective("budget", _FIELD, {"maxHops": GraphQLArgument(GraphQLInt), "maxMs": GraphQLArgument(GraphQLInt),
                                        "maxTokens": GraphQLArgument(GraphQLInt)},
                     description="Hops a path may take, the time budget (ms) and the evidence tokens; values "
                                 "above the server's limits are lowered to them, with a warning."),
     {"maxHops": "max_hops", "maxMs": "max_ms", "maxTokens": "max_tokens"}),
    (GraphQLDirective("minSupport", _FIELD, {"value": GraphQLArgument(GraphQLNonNull(GraphQLFloat))},
                     description="The support (0 to 1) an answer read from the evidence needs; below it the "
                                 "answer is withheld as a draft (default: the tenant's, else 0.5)."),
     {"value": "min_support"}),
)


def directive_policy(info: graphene.ResolveInfo) -> tuple[dict[str, Any], bool]:
    """The policy fields the field's directives set, and whether diagnostics are shown
    (`@explainHops(on: false)` hides them)."""
    values: dict[str, Any] = {}
    shown = True
    for directive, fields in DIRECTIVES:
        given = get_directive_values(directive, info.field_nodes[0], info.variable_values)
        if given is None:
            continue
        for argument, name in fields.items():
            value = True if argument == "" else given.get(argument)
            if value is not None:
                values[name] = value
        if directive.name == "explainHops" and given.get("on") is False:
            shown = False
    return values, shown


class Span(graphene.ObjectType):
    uri = graphene.String()
    start = graphene.Int()
    end = graphene.Int()
    page = graphene.Int()
    text = graphene.String()


class Claim(graphene.ObjectType):
    text = graphene.String()
    citation = graphene.Int()
    short_answer = graphene.String()
    evidence = graphene.Field(Span)


class Hop(graphene.ObjectType):
    from_ = graphene.String(name="from")
    to = graphene.String()
    from_id = graphene.Int()
    to_id = graphene.Int()
    edge_type = graphene.String()
    weight = graphene.Float()
    reason = graphene.String()
    evidence = graphene.List(Span)


class Use(graphene.ObjectType):
    used = graphene.Float()
    limit = graphene.Float()


class Budget(graphene.ObjectType):
    hops = graphene.Field(Use)
    ms = graphene.Field(Use)
    tokens = graphene.Field(Use)
    portal_hops = graphene.Field(Use)


class Diagnostics(graphene.ObjectType):
    seeds = GenericScalar()
    hops = GenericScalar(description="the reasoning path's hops, as in the REST answer's `path`")
    pruned = GenericScalar()
    portals = GenericScalar()
    named_concepts = GenericScalar()
    timings = GenericScalar()


class Answer(graphene.ObjectType):
    question = graphene.String()
    answer = graphene.String()
    short_answer = graphene.String()
    withheld = graphene.Boolean()
    refusal = graphene.String()
    confidence = graphene.Float()
    claims = graphene.List(Claim)
    reasoning_path = graphene.List(Hop)
    evidence = graphene.List(Span)
    warnings = graphene.List(graphene.String)
    budget = graphene.Field(Budget)
    diagnostics = graphene.Field(Diagnostics)
    trace_id = graphene.Int()


def _span(item: dict[str, Any]) -> dict[str, Any]:
    start, end = item["span"]
    return {"uri": item["uri"], "start": start, "end": end, "page": item.get("page"), "text": item["text"]}


def answer_view(reply: dict[str, Any], shown: bool) -> dict[str, Any]:
    """The REST answer's JSON as the `Answer` type reads it."""
    evidence = [_span(e) for e in reply["evidence"]]
    claims = [{"text": c["text"], "citation": c["citation"], "short_answer": c.get("short_answer"),
               "evidence": {**evidence[c["evidence"]], "start": c["span"][0], "end": c["span"][1]}
               if c.get("evidence") is not None else None} for c in reply["claims"]]
    path = [{**hop, "from_": hop["from"], "evidence": [_span(e) for e in hop["evidence"]]} for hop in reply["path"]]
    diagnostics = {**reply["diagnostics"], "hops": reply["path"]} if shown else None
    return {**reply, "claims": claims, "reasoning_path": path, "evidence": evidence, "diagnostics": diagnostics}


class Hit(graphene.ObjectType):
    node_id = graphene.Int()
    rank = graphene.Int()
    score = graphene.Float()
    bm25_rank = graphene.Int()
    vector_rank = graphene.Int()
    uri = graphene.String()
    label = graphene.String()
    text = graphene.String()


class Edge(graphene.ObjectType):
    type = graphene.String()
    direction = graphene.String(description="out: this concept is the edge's source; in: its target")
    other_id = graphene.Int()
    other = graphene.String()
    weight = graphene.Float()
    confidence = graphene.Float()


class Concept(graphene.ObjectType):
    id = graphene.Int()
    kind = graphene.String()
    label = graphene.String()
    edges = graphene.List(Edge)


class Source(graphene.ObjectType):
    source_id = graphene.Int()
    uri = graphene.String()
    kind = graphene.String()
    subgraphs = graphene.List(graphene.String)
    readers = graphene.List(graphene.String, description="the groups it is open to; null: everyone in the tenant")
    chunks = graphene.Int()
    spans = graphene.Int()
    warnings = graphene.List(graphene.String)


class Stored(graphene.ObjectType):
    uri = graphene.String()
    status = graphene.String()
    source_id = graphene.Int()
    chunks = graphene.Int()
    concepts = graphene.Int()
    edges = graphene.Int()
    warnings = graphene.List(graphene.String)


class PolicyInput(graphene.InputObjectType):
    """The traversal policy as fields (the directives set the same)."""

    max_hops = graphene.Int()
    max_ms = graphene.Int()
    max_tokens = graphene.Int()
    semantic_group = graphene.String()
    portal_preference = graphene.String()
    failover_level = graphene.Int()
    local_only = graphene.Boolean()
    explain = graphene.Boolean()
    no_personalization = graphene.Boolean()
    traversal = graphene.String(description="sql (default) or age: where the walk reads the graph.")
    min_support = graphene.Float(description="The support (0 to 1) an answer read from the evidence needs "
                                 "(default: the tenant's, else 0.5).")


_CONCEPT = """
select n.node_id, n.kind, n.label from tortus.node n where n.node_id = %s and n.kind <> 'chunk'
"""
_EDGES = """
select e.type, case when e.src = %(id)s then 'out' else 'in' end, o.node_id, o.label, e.weight, e.confidence
from tortus.edge e join tortus.node o on o.tenant_id = e.tenant_id
     and o.node_id = case when e.src = %(id)s then e.dst else e.src end
where %(id)s in (e.src, e.dst) and o.kind <> 'chunk'
order by e.type, o.label limit %(limit)s
"""
MAX_EDGES = 200


def _context(info: graphene.ResolveInfo) -> Context:
    context = info.context
    assert isinstance(context, Context)
    return context


def _checked(call: Any) -> Any:
    """Run an operation, its refusals as GraphQL errors with their message."""
    try:
        return call()
    except ApiError as exc:
        raise GraphQLError(exc.message) from None


class Query(graphene.ObjectType):
    ask = graphene.Field(Answer, question=graphene.String(required=True), k=graphene.Int(default_value=5),
                         policy=PolicyInput(), description="Answer a question with its path and evidence.")
    search = graphene.List(Hit, query=graphene.String(required=True), mode=graphene.String(default_value="hybrid"),
                           k=graphene.Int(default_value=10), bm25_weight=graphene.Float(default_value=1.0),
                           vector_weight=graphene.Float(default_value=1.0))
    concept = graphene.Field(Concept, id=graphene.Int(required=True), description="A concept with its typed edges.")
    trace = graphene.Field(GenericScalar, id=graphene.Int(required=True), description="A stored answer trace.")
    sources = graphene.List(Source)

    def resolve_ask(self, info: graphene.ResolveInfo, question: str, k: int,
                    policy: dict[str, Any] | None = None) -> dict[str, Any]:
        ctx = _context(info)
        ctx.need(Scope.QUERY)
        values, shown = directive_policy(info)
        fields = {**{k: v for k, v in dict(policy or {}).items() if v is not None}, **values}
        reply = _checked(lambda: operations.ask(ctx.svc, ctx.conn, question, k, fields))
        return answer_view(reply.to_json(), shown)

    def resolve_search(self, info: graphene.ResolveInfo, query: str, mode: str, k: int, bm25_weight: float,
                       vector_weight: float) -> list[Any]:
        ctx = _context(info)
        ctx.need(Scope.QUERY)
        if mode not in ("keyword", "vector", "hybrid") or not 1 <= k <= 100 or not query.strip():
            raise GraphQLError("search needs a query, mode keyword, vector or hybrid, and k from 1 to 100")
        return _checked(lambda: operations.find(ctx.svc, ctx.conn, ctx.caller.tenant, query,
                                                mode, k, bm25_weight, vector_weight))  # type: ignore[arg-type]

    def resolve_concept(self, info: graphene.ResolveInfo, id: int) -> dict[str, Any] | None:
        ctx = _context(info)
        ctx.need(Scope.QUERY)
        row = ctx.conn.execute(_CONCEPT, [id]).fetchone()
        if row is None:
            return None
        edges = ctx.conn.execute(_EDGES, {"id": id, "limit": MAX_EDGES}).fetchall()
        keys = ("type", "direction", "other_id", "other", "weight", "confidence")
        return {"id": row[0], "kind": row[1], "label": row[2], "edges": [dict(zip(keys, e, strict=True))
                                                                          for e in edges]}

    def resolve_trace(self, info: graphene.ResolveInfo, id: int) -> Any:
        ctx = _context(info)
        ctx.need(Scope.QUERY)
        return _checked(lambda: operations.json_ready(operations.trace(ctx.conn, id)))

    def resolve_sources(self, info: graphene.ResolveInfo) -> list[dict[str, Any]]:
        ctx = _context(info)
        ctx.need(Scope.QUERY)
        return operations.sources(ctx.conn)


class Mutation(graphene.ObjectType):
    ingest = graphene.Field(Stored, url=graphene.String(), text=graphene.String(),
                            name=graphene.String(default_value="text.md"), subgraphs=graphene.List(graphene.String),
                            readers=graphene.List(graphene.String),
                            description="Ingest a URL, or a text named by `name` (its extension gives its kind); "
                                        "`readers` opens it only to those groups.")
    remove_source = graphene.Field(graphene.String, id=graphene.Int(required=True),
                                   description="Remove a source; its URI.")

    def resolve_ingest(self, info: graphene.ResolveInfo, name: str, url: str | None = None, text: str | None = None,
                       subgraphs: list[str] | None = None, readers: list[str] | None = None) -> Any:
        ctx = _context(info)
        ctx.need(Scope.INGEST)
        if (url is None) == (text is None):
            raise GraphQLError("give exactly one of url or text")
        groups = tuple(subgraphs or ())
        if len(groups) > 20 or any(not g or len(g) > 100 for g in groups):
            raise GraphQLError("give at most 20 subgraphs of 1 to 100 characters")
        open_to = tuple(readers) if readers is not None else None
        if text is not None:
            return _checked(lambda: operations.add_text(ctx.svc, ctx.conn, ctx.caller.tenant, name, text.encode(),
                                                        groups, open_to))
        return _checked(lambda: operations.add_url(ctx.svc, ctx.conn, ctx.caller.tenant, url or "", groups, open_to))

    def resolve_remove_source(self, info: graphene.ResolveInfo, id: int) -> str:
        ctx = _context(info)
        ctx.need(Scope.INGEST)
        return str(_checked(lambda: operations.remove(ctx.conn, id)))


SCHEMA = graphene.Schema(query=Query, mutation=Mutation,
                        directives=(*specified_directives, *(d for d, _ in DIRECTIVES)))
