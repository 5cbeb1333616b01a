"""Answers by relation: a question asking which team, system, decision or incident stands in a
chain of typed relations to what it names ("Which team owns the system whose expired
certificate caused INC-2025-014?") is answered by the chain of typed edges (`caused_by`, then
`owned_by`) from the named thing to a node of the asked kind. Each edge is a claim quoting the
span of the source that states it, so the path is the reasoning and the evidence at once.

The chain chosen is the one whose spans, node labels and the titles of the documents about
its nodes cover most of the question's weight (fewer hops on a tie); it must name everything the
question names and cover at least `synth.SUPPORTED` of it, or there is no relation answer. A
question that describes the thing rather than naming it starts from what the evidence is about
(`described_relation`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import psycopg

from tortus_pg.answer_type import is_person_name
from tortus_pg.evidence import Evidence, Reached, chunk_info
from tortus_pg.query.results import Claim
from tortus_pg.query.terms import Terms, lexemes
from tortus_pg.synth import SUPPORTED, Synthesis, cited_text

_GROUPS = r"teams?|groups?|departments?|offices?|councils?|units?|squads?"
_KINDS = {
    "group": _GROUPS,
    "decision": r"(?:architecture\s+)?decision(?:\s+records?)?|decisions|adrs?|records?",
    "event": r"incidents?|outages?|postmortems?",
    "system": r"systems?|services?|components?|applications?|platforms?|stores?|clusters?|databases?|tools?",
}
_NOUN = "|".join(_KINDS.values())
# "Which <up to three lowercase words> <kind noun(s)>" opening a sentence of the question. The
# words are lowercase: in "In which Token Service release …" the noun belongs to a name. They
# are not a verb either: "What is the service …" asks what it is, not which one.
_TARGET = re.compile(
    r"(?:^|[.?!;]\s+)\W*(?:(?:[Ii]n|[Oo]n|[Ff]rom|[Tt]o|[Bb]y|[Ff]or|[Ww]ith|[Oo]f|[Aa]t)\s+)?"
    r"(?:[Ww]hich|[Ww]hat)\s+(?P<phrase>(?:(?!(?:is|was|are|were|does|do|did|has|have|had)\b)[a-z][\w-]*\s+){0,3}?"
    rf"(?:{_NOUN})(?:\s+(?:{_NOUN}))*)\b"
)
# "Who leads the team …", "Who heads up the Fleet Data group", "Who is the lead of …": a person,
# the one a group is led by.
_WHO_LEADS = re.compile(
    r"\b[Ww]ho\s+(?P<phrase>(?:leads|heads(?:\s+up)?|runs|manages)\s+(?:the\s+|that\s+|this\s+)?"
    rf"(?:[\w'’-]+\s+){{0,3}}?(?:{_GROUPS})|(?:is|was)\s+(?:the\s+)?(?:(?:team|squad|group|engineering|tech)\s+)?"
    r"(?:lead|leader|head|manager)\s+(?:of|for))\b")
_GROUP_LABEL = re.compile(rf"\b(?:{_GROUPS})$", re.I)


@dataclass(frozen=True)
class Target:
    """What a "Which …" or "Who …" question asks for: the kind of node, and the words asking
    for it."""

    kind: str  # group (a team), decision, event (an incident), system or person (a group's lead)
    phrase: str  # "team", "architecture decision record", "leads the team"

    @property
    def noun(self) -> str:
        """What is asked for, as a noun: a "Which …" question's phrase ("architecture decision
        record"), or a lead ("leads the team" is a verb phrase)."""
        return "lead" if self.kind == "person" else self.phrase


def target_of(question: str) -> Target | None:
    """The kind of node a "Which …" or "Who leads …" question asks for; None for any other
    question."""
    if (found := _WHO_LEADS.search(question)) is not None:
        # Without the group's name ("heads up the Fleet Data group"): the chain must say it.
        return Target("person", " ".join(w for w in found.group("phrase").split() if w.islower()))
    found = _TARGET.search(question)
    if found is None:
        return None
    phrase = found.group("phrase")
    kind = next(k for k, nouns in _KINDS.items() if re.search(rf"(?:{nouns})$", phrase))
    return Target(kind, phrase)


def matches(kind: str, node_kind: str, label: str, last: tuple[str, str] | None = None) -> bool:
    """Whether a node of `node_kind` labelled `label`, reached by the last edge `last` (its type
    and direction), is of the asked kind. A group's label need not say it is one when it is
    what a thing is owned by ("Network Optimisation"); a person is whom a thing is led by."""
    name = label.strip()
    if kind == "group":
        return _GROUP_LABEL.search(name) is not None or (node_kind == "entity" and last == ("owned_by", "out"))
    if kind == "person":
        return node_kind == "entity" and last == ("led_by", "out") and is_person_name(name) \
            and _GROUP_LABEL.search(name) is None
    if kind in ("decision", "event"):
        return node_kind == kind
    return node_kind == "entity" and _GROUP_LABEL.search(name) is None


@dataclass(frozen=True)
class Quote:
    """A span of a source to quote as a claim, and the chunk holding it (the evidence it cites)."""

    text: str
    uri: str
    start: int
    end: int
    page: int | None
    chunk: int | None


@dataclass(frozen=True)
class Hop(Quote):
    """One typed edge of a relation chain, quoting the span that states it."""

    edge_id: int
    src: str
    dst: str
    type: str
    confidence: float


@dataclass(frozen=True)
class Relation:
    """The chain answering a relation question: nodes from the named thing to the answer."""

    nodes: list[int]
    labels: list[str]
    hops: list[Hop]
    directions: list[str]
    coverage: float
    missing: list[str]  # question terms the chain does not cover
    asked: str  # what is asked for, as a noun ("team", "architecture decision record", "lead")
    title: Quote | None = None  # the end node's document title, quoted when it says what the edges do not


# Not a chain ending on an alias (`same_as`: it reaches nothing but another name of the thing
# before), nor one through a sibling: a hop along an edge and the next back along another of the
# same type ("A owned_by T", "B owned_by T") relates A to B by sharing T, which no relation
# question asks ("Which database does A keep its entries in?" is not answered by B).
_PATHS = """
select path, edges, directions, types[cardinality(types)] from tortus.relation_paths(%s::bigint[], %s)
where types[cardinality(types)] <> 'same_as'
  and not exists (select 1 from generate_subscripts(types, 1) i
                  where i > 1 and types[i] = types[i - 1] and directions[i - 1] = 'out' and directions[i] = 'in')"""
_EDGES = """
select tortus.span_text(sp.tenant_id, sp.source_id, sp.start_char, sp.end_char), s.uri, sp.start_char, sp.end_char,
       sp.page, tortus.chunk_at(sp.tenant_id, sp.source_id, sp.start_char, sp.end_char),
       e.edge_id, a.label, b.label, e.type, e.confidence
from tortus.edge e
join tortus.node a on a.tenant_id = e.tenant_id and a.node_id = e.src
join tortus.node b on b.tenant_id = e.tenant_id and b.node_id = e.dst
join lateral (select * from tortus.evidence_span x
              where x.tenant_id = e.tenant_id and x.edge_id = e.edge_id order by x.span_id limit 1) sp on true
join tortus.source s on s.tenant_id = sp.tenant_id and s.source_id = sp.source_id
where e.tenant_id = tortus.current_tenant() and e.edge_id = any(%s::bigint[])
"""
# A node's label and kind, and the title of the document about it: its defining chunk's heading,
# or for an identifier the title of the document it heads ("ADR-011: Move Postgres Cluster A …").
_NODES = """
select n.node_id, n.label, n.kind,
       coalesce((select split_part(c.label, ' > ', 1) from tortus.edge d
                 join tortus.node c on c.tenant_id = d.tenant_id and c.node_id = d.src
                 where d.tenant_id = n.tenant_id and d.dst = n.node_id and d.type = 'defines'
                 order by c.node_id limit 1),
                (select s.metadata ->> 'title' from tortus.source s
                 where s.tenant_id = n.tenant_id and s.metadata ->> 'title' like n.label || ': %%'
                   and cardinality(tortus.identifier_lexemes(n.label)) > 0
                 order by s.source_id limit 1))
from tortus.node n
where n.tenant_id = tortus.current_tenant() and n.node_id = any(%s::bigint[])
"""
# The nodes a chunk defining them calls by one of a kind's nouns ("Key Vault … Service handbook").
_CALLED = """
with q as materialized (select to_tsquery(%(cfg)s::regconfig, %(nouns)s) as q)
select n.id from unnest(%(ids)s::bigint[]) n(id), q
where exists (select 1 from tortus.edge d join tortus.node c on c.tenant_id = d.tenant_id and c.node_id = d.src
              where d.tenant_id = tortus.current_tenant() and d.dst = n.id and d.type = 'defines' and c.tsv @@ q.q)
"""
# The nouns naming a thing of each kind a node's label does not settle ("Which system …" is not
# answered by a map provider no source calls a system, service, cluster …).
_NOUNS = {kind: re.findall(r"(\w+)s\?", _KINDS[kind]) for kind in ("system", "group")}


# Where a document title stands in its source, and the chunk holding it.
_TITLE = """
select s.uri, t.start, t.start + char_length(%(title)s),
       (select c.page from tortus.evidence_span c
        where c.tenant_id = s.tenant_id and c.node_id = t.chunk and c.source_id = s.source_id limit 1),
       t.chunk
from tortus.source s
cross join lateral (select strpos(s.text, %(title)s) - 1 as start) p
cross join lateral (select p.start,
                           tortus.chunk_at(s.tenant_id, s.source_id, p.start, p.start + char_length(%(title)s))
                           as chunk) t
where s.tenant_id = tortus.current_tenant() and s.metadata ->> 'title' = %(title)s and t.start >= 0
  and t.chunk is not null
order by s.source_id
limit 1
"""


def typed_edges(conn: psycopg.Connection, ids: Sequence[int]) -> dict[int, Hop]:
    """The typed edges `ids` (of the current tenant), each quoting its first evidence span."""
    return {h.edge_id: h for h in (Hop(*row) for row in conn.execute(_EDGES, [list(ids)]).fetchall())}


def _title(conn: psycopg.Connection, title: str) -> Quote | None:
    row = conn.execute(_TITLE, {"title": title}).fetchone()
    return Quote(title, *row) if row else None


@dataclass(frozen=True)
class Described:
    """A question's thing described rather than named ("the incident where lorries were held up
    at Tilbury"), as the documents retrieval found for it: a chain must be stated in them, and
    their words count toward the question's coverage."""

    uris: frozenset[str]  # the evidence's documents: every hop but the last is stated in one
    said: frozenset[str]  # the words of the documents the described thing was found in
    named: frozenset[str]  # the words of every concept the question names: the chain must say them


def best_relation(
    conn: psycopg.Connection, target: Target, terms: Terms, seeds: Sequence[int], max_hops: int,
    ts_config: str = "english", described: Described | None = None,
) -> Relation | None:
    """The chain of typed edges, at most `max_hops` long, from a node the question names
    (`seeds`) to a node of the kind it asks for (`target`) that covers the question best; None
    when no chain covers enough of it. A system's kind is not in its name ("kestrel-3"), so the
    chain's end must be called one (a system, a service, a cluster …) by its label, its
    document's title, the span stating the last edge or a chunk defining it.

    A chain covers the words of its spans and of its nodes' labels and document titles, and the
    words asking for the kind ("architecture decision record"), which its end node answers; not
    the words of the end node's own name, which the question cannot know ("Platform Team"
    sharing "platform" with "the streaming platform"), though the title of the document about
    it counts ("ADR-011: Move Postgres Cluster A to local NVMe storage"). From a `described`
    thing, only chains stated in its documents count, and so do those documents' words."""
    if not seeds or max_hops < 1 or not terms.total:
        return None
    paths = conn.execute(_PATHS, [list(seeds), max_hops]).fetchall()
    if not paths:
        return None
    nodes = {r[0]: r[1:] for r in conn.execute(_NODES, [list({n for p, *_ in paths for n in p})]).fetchall()}
    ends = [(p, e, d) for p, e, d, last in paths if p[-1] not in seeds and p[-1] in nodes
            and matches(target.kind, nodes[p[-1]][1], nodes[p[-1]][0], (last, d[-1]))]
    if not ends:
        return None
    hops = typed_edges(conn, list({x for _, e, _ in ends for x in e}))
    node_texts = {n: f"{label} {title or ''}" for n, (label, _, title) in nodes.items()}
    nouns = " ".join(_NOUNS.get(target.kind, []))
    texts = list(dict.fromkeys([target.phrase, nouns, *node_texts.values(), *(label for label, _, _ in nodes.values()),
                                *(h.text for h in hops.values())]))
    found = dict(zip(texts, lexemes(conn, texts, ts_config), strict=True))
    stated = [x for x in ends if all(e in hops for e in x[1])
              and (described is None or all(hops[e].uri in described.uris for e in x[1][:-1]))]
    ends = _called(conn, stated, nouns, found, ts_config,
                   lambda path, edges: found[node_texts[path[-1]]] | found[hops[edges[-1]].text])
    best = _best(ends, Reading(target, terms, nodes, node_texts, hops, found, described))
    if best is None:
        return None
    relation, title = best
    return replace(relation, title=_title(conn, title)) if title else relation


@dataclass(frozen=True)
class Reading:
    """What the chains are read with: the question's target and terms, the nodes (label, kind,
    document title) and their texts, the edges, every text's lexemes, and the thing the question
    describes, if it names none."""

    target: Target
    terms: Terms
    nodes: dict[int, Any]
    node_texts: dict[int, str]
    hops: dict[int, Hop]
    found: dict[str, set[str]]
    described: Described | None


def _best(ends: list[Any], r: Reading) -> tuple[Relation, str | None] | None:
    """The chain covering most of the question (fewer hops, then surer edges, on a tie), naming
    all it names, and the end node's document title when that says what the edges do not."""
    required = set(r.terms.identifiers).union(*r.terms.names.values(), r.described.named if r.described else ())
    besides = r.described.said if r.described else frozenset()
    best: tuple[tuple[float, int, float], Relation, str | None] | None = None
    for path, edges, directions in ends:
        named_end = r.found[r.nodes[path[-1]][0]]
        before_end = set(r.found[r.target.phrase]).union(*(r.found[r.node_texts[n]] for n in path[:-1]))
        spans = set().union(*(r.found[r.hops[e].text] for e in edges))
        end_title = r.found[r.node_texts[path[-1]]] - named_end
        said = before_end | end_title | (spans - named_end)
        coverage = r.terms.covered(said | besides)
        if coverage < SUPPORTED or not required <= said:
            continue
        chain = [r.hops[e] for e in edges]
        key = (coverage, -len(edges), min(h.confidence for h in chain))
        if best is None or key > best[0]:
            missing = sorted(t for t in r.terms.weights if t not in said | besides)
            # The end node's document title is quoted when it says what the edges do not
            # ("ADR-011: Move Postgres Cluster A to local NVMe storage").
            title = r.nodes[path[-1]][2]
            adds = bool(title) and bool((end_title - before_end - spans) & r.terms.weights.keys())
            best = key, Relation(list(path), [r.nodes[n][0] for n in path], chain, list(directions), coverage,
                                 missing, r.target.noun), title if adds else None
    return None if best is None else best[1:]


DESCRIBED = 3  # the evidence documents a thing the question describes is looked for among

# The things documents are about (the nodes their chunks define: the title's, a clause's), and
# the lexemes of the documents' words, as BM25 sees them.
_SUBJECTS = """
with s as materialized (select source_id, text from tortus.source
                        where tenant_id = tortus.current_tenant() and uri = any(%(uris)s))
select array(select distinct d.dst from s
             join tortus.node c on c.tenant_id = tortus.current_tenant() and c.source_id = s.source_id
                               and c.kind = 'chunk'
             join tortus.edge d on d.tenant_id = c.tenant_id and d.src = c.node_id and d.type = 'defines'),
       array(select distinct l.lexeme from s, unnest(to_tsvector(%(cfg)s::regconfig, s.text)) l)
"""


def described_relation(
    conn: psycopg.Connection, target: Target, terms: Terms, named: Sequence[str], evidence: Sequence[Evidence],
    max_hops: int, ts_config: str = "english",
) -> Relation | None:
    """The chain from a thing the question describes rather than names ("Lorries were held up at
    Tilbury … Who is the lead of the team responsible for the system involved?"): from what one
    of the first `DESCRIBED` evidence documents is about, stated in the evidence's documents
    but for its last hop (the asked relation, from the bridge's own page), saying every concept
    the question names (`named`), and covering the question with those documents' words."""
    uris = list(dict.fromkeys(e.uri for e in evidence))
    row = conn.execute(_SUBJECTS, {"uris": uris[:DESCRIBED], "cfg": ts_config}).fetchone()
    if row is None or not row[0]:
        return None
    words = frozenset().union(*lexemes(conn, list(named), ts_config)) if named else frozenset()
    return best_relation(conn, target, terms, row[0], max_hops, ts_config,
                         Described(frozenset(uris), frozenset(row[1]), words))


def _called(conn: psycopg.Connection, ends: list[Any], nouns: str, found: dict[str, set[str]], ts_config: str,
            said: Callable[[Sequence[int], Sequence[int]], set[str]]) -> list[Any]:
    """The chains (path, edges, directions) whose end is called a thing of the asked kind: one
    of the kind's `nouns` (none: its label settles the kind) said of it (`said`: its label, its
    document's title and the span stating the last edge) or in a chunk defining it."""
    if not nouns:
        return ends
    says = [bool(found[nouns] & said(p, e)) for p, e, _ in ends]
    unsaid = {end[0][-1] for end, s in zip(ends, says, strict=True) if not s}
    called = {r[0] for r in conn.execute(_CALLED, {"ids": list(unsaid), "cfg": ts_config,
                                                   "nouns": " | ".join(nouns.split())}).fetchall()} if unsaid else set()
    return [end for end, s in zip(ends, says, strict=True) if s or end[0][-1] in called]


def answer(
    conn: psycopg.Connection, relation: Relation, evidence: Sequence[Evidence], vector: np.ndarray,
    k: int, max_tokens: int,
) -> tuple[list[Evidence], Synthesis, dict[int, Reached]]:
    """The answer a relation chain gives: one claim per edge quoting the span that states it, the
    chunks holding those spans first in the evidence (the rest follows within `k` items and the
    token budget), and for each such chunk the chain up to its edge as its path."""
    quotes: list[tuple[Quote, str]] = [(h, f"{h.src} {h.type.replace('_', ' ')} {h.dst}") for h in relation.hops]
    if relation.title is not None:
        quotes.append((relation.title, f"the title of the document about {relation.labels[-1]}"))
    held_in = [(q, what, q.chunk) for q, what in quotes if q.chunk is not None]
    chunks = list(dict.fromkeys(c for _, _, c in held_in))
    held = {e.node_id: e for e in evidence}
    info = chunk_info(conn, [c for c in chunks if c not in held], vector)
    items = [held.get(c) or info[c].evidence(c, "walk") for c in chunks if c in held or c in info]
    used = sum(len(i.text.split()) for i in items)
    for e in evidence:
        words = len(e.text.split())
        if e.node_id not in chunks and len(items) < max(k, len(chunks)) and used + words <= max_tokens:
            items.append(e)
            used += words
    at = {e.node_id: i for i, e in enumerate(items)}
    # The node the chain ends at is the short answer, given by the claim stating its edge.
    end = relation.hops[-1]
    claims = [_claim(q, what, n, at[c], relation.labels[-1] if q is end else None)
              for n, (q, what, c) in enumerate(((q, w, c) for q, w, c in held_in if c in at), 1)]
    reach: dict[int, Reached] = {}
    why = f"a relation the source states, toward the {relation.asked} asked for"
    for i, hop in enumerate(relation.hops):
        if hop.chunk in at and hop.chunk not in reach:
            reach[hop.chunk] = Reached(
                hop.chunk, i + 1, relation.nodes[: i + 2], [h.type for h in relation.hops[: i + 1]],
                relation.directions[: i + 1], [why] * (i + 1), relation.coverage, None,
                min(h.confidence for h in relation.hops[: i + 1]), i + 1)
    text = cited_text(claims)
    synthesis = Synthesis(text, False, round(relation.coverage, 4), claims, relation.coverage, relation.missing)
    return items, synthesis, reach


def _claim(quote: Quote, relation: str, citation: int, evidence: int, short: str | None) -> Claim:
    return Claim(" ".join(quote.text.split()), citation, evidence, quote.uri, quote.page, (quote.start, quote.end),
                 relation=relation, short_answer=short)
