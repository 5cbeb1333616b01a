"""Following a bridge: when an answer's claims name an entity the question does not while question
terms remain uncovered, the chunk about that entity that best matches what is still asked."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import psycopg

from tortus_pg.db import pinned
from tortus_pg.evidence import Chunk, Evidence, Reached, chunk_info
from tortus_pg.policy import TraversalPolicy
from tortus_pg.synth import Synthesis

# Entities a chunk mentions that the question does not name, those nearest the claim first.
_BRIDGES = """
select c.node_id, c.label, bool_or(sp.start_char < %(end)s and sp.end_char > %(start)s) as in_claim
from tortus.edge e
join tortus.evidence_span sp on sp.tenant_id = e.tenant_id and sp.edge_id = e.edge_id
join tortus.node c on c.tenant_id = e.tenant_id and c.node_id = e.dst
where e.tenant_id = tortus.current_tenant() and e.type = 'mentions' and e.src = %(chunk)s
  and c.kind <> 'concept' and c.node_id <> all(%(named)s::bigint[])
group by c.node_id, c.label
order by min(greatest(%(start)s - sp.end_char, sp.start_char - %(end)s, 0)), c.node_id
limit %(limit)s
"""

# For each bridge, the chunk mentioning (or defining) it that best matches the uncovered terms
# and the bridge's name; then the best of those (one claim's bridges at a time, `_followed`).
# The chunks of a bridge's own documents (the sources whose chunks define it) come first and are
# searched first: a hub's other mentions, scored only when no bridge's own documents lead
# anywhere, are many. Naming the bridge in its query weighs it by its IDF: a rare entity is a
# stronger lead than one most documents mention.
_FOLLOW = """
with c as materialized (
    select c.concept, c.label, c.in_claim,
           array(select dn.source_id from tortus.edge d
                 join tortus.node dn on dn.tenant_id = d.tenant_id and dn.node_id = d.src
                 where d.tenant_id = tortus.current_tenant() and d.dst = c.concept and d.type = 'defines') as sources
    from unnest(%(concepts)s::bigint[], %(labels)s::text[], %(in_claim)s::boolean[]) as c(concept, label, in_claim)
), own as materialized (
    select b.node_id, c.concept, c.in_claim, b.score
    from c cross join lateral tortus.bm25_search(
        %(q)s || ' ' || c.label, 1, config => %(cfg)s::regconfig,
        within => array(select n.node_id from tortus.node n
                        where n.tenant_id = tortus.current_tenant() and n.source_id = any(c.sources)
                          and n.node_id <> all(%(exclude)s::bigint[])
                          and exists (select 1 from tortus.edge m
                                      where m.tenant_id = n.tenant_id and m.src = n.node_id and m.dst = c.concept
                                        and m.type in ('mentions', 'defines'))
                          and (%(subgraph)s::text is null or exists (
                                   select 1 from tortus.membership g
                                   where g.tenant_id = n.tenant_id and g.node_id = n.node_id
                                     and g.subgraph = %(subgraph)s)))) b
)
select x.node_id, x.concept
from (
    select o.node_id, o.concept, o.in_claim, o.score from own o
    union all
    select f.node_id, c.concept, c.in_claim, f.score
    from c cross join lateral (
        select b.node_id, b.score
        from tortus.bm25_search(%(q)s || ' ' || c.label, %(k)s, config => %(cfg)s::regconfig,
                                within => array(select m.src from tortus.edge m
                                                where m.tenant_id = tortus.current_tenant() and m.dst = c.concept
                                                  and m.type in ('mentions', 'defines'))) b
        where b.node_id <> all(%(exclude)s::bigint[])
          -- a semantic group keeps the hop inside that subgraph, as it keeps the walk
          and (%(subgraph)s::text is null or exists (select 1 from tortus.membership g
                                                     where g.tenant_id = tortus.current_tenant()
                                                       and g.node_id = b.node_id and g.subgraph = %(subgraph)s))
        order by b.rank
        limit 1
    ) f
    where not exists (select 1 from own) and not %(own_only)s
) x
order by x.in_claim desc, x.score desc, x.concept
limit 1
"""
BRIDGES_PER_CLAIM = 3  # entities tried per claim, nearest to it first
NAMED_PER_SENTENCE = 20  # entities of one sentence looked up by name
FOLLOW_CANDIDATES = 100  # best-matching chunks about a bridge weighed for the hop


@dataclass(frozen=True)
class _Bridge:
    concept: int
    label: str
    source: Evidence  # the evidence whose claim names it
    claim: int  # that claim's place in the answer: the first statement's bridges lead
    before: Reached | None  # how the walk reached that evidence
    in_claim: bool  # named by the claim itself rather than near it


def follow(
    conn: psycopg.Connection, named: list[int], synthesis: Synthesis, evidence: Sequence[Evidence],
    reached: dict[int, Reached], info: dict[int, Chunk], vector: np.ndarray,
    policy: TraversalPolicy, ts_config: str, tenant: str | None = None,
) -> tuple[Evidence, Reached] | None:
    """When the claims (or the draft of a withheld answer) leave part of the question uncovered
    and name entities the question does not (bridges), the chunk mentioning a bridge that best
    matches the uncovered terms and the bridge's name: a hop chunk -> entity -> chunk, taken
    only while the path stays within `max_hops`. `named` are the concepts the question names."""
    uncovered = [t for t in synthesis.missing_from_claims if t]
    if not uncovered:
        return None
    bridges: dict[int, _Bridge] = {}
    for place, claim in enumerate(synthesis.claims or synthesis.draft):
        if claim.evidence is None or claim.span is None:
            continue
        source = evidence[claim.evidence]
        before = reached.get(source.node_id)
        if (len(before.path) - 1 if before is not None and before.path else 0) + 2 > policy.max_hops:
            continue
        near = {"chunk": source.node_id, "start": claim.span[0], "end": claim.span[1], "named": named,
                "limit": BRIDGES_PER_CLAIM}
        for concept, label, in_claim in conn.execute(pinned(_BRIDGES, tenant), near).fetchall():
            bridges.setdefault(concept, _Bridge(concept, label, source, place, before, in_claim))
    found = _followed(conn, list(bridges.values()), uncovered, evidence, policy, ts_config, tenant)
    if found is None:
        return None
    bridge = bridges[found[1]]
    reason = f"follows {bridge.label}, named by the evidence, to what the question still asks ({', '.join(uncovered)})"
    return _hop(conn, bridge, found[0], info, vector, reason)


def follow_named(
    conn: psycopg.Connection, names: Sequence[str], source: Evidence, span: Sequence[int], asked: list[str],
    evidence: Sequence[Evidence], reached: dict[int, Reached], info: dict[int, Chunk], vector: np.ndarray,
    policy: TraversalPolicy, ts_config: str, tenant: str | None = None,
) -> tuple[Evidence, Reached] | None:
    """The chunk of the own document of an entity the sentence at `span` of `source` names, the
    first of `names` that is one, best matching `asked`: the hop chunk -> entity -> chunk of a
    comparison through a role (the film's sentence -> its director -> the director's page), taken
    only while the path stays within `max_hops`."""
    before = reached.get(source.node_id)
    if (len(before.path) - 1 if before is not None and before.path else 0) + 2 > policy.max_hops:
        return None
    near = {"chunk": source.node_id, "start": span[0], "end": span[1], "named": [], "limit": NAMED_PER_SENTENCE}
    entities = {label.casefold(): (concept, label, in_claim)
                for concept, label, in_claim in conn.execute(pinned(_BRIDGES, tenant), near).fetchall()}
    for name in names:
        if (entity := entities.get(name.casefold())) is None:
            continue
        bridge = _Bridge(entity[0], entity[1], source, 0, before, entity[2])
        found = _followed(conn, [bridge], asked, evidence, policy, ts_config, tenant, own_only=True)
        if found is not None:
            return _hop(conn, bridge, found[0], info, vector, f"follows {bridge.label} to its own document")
    return None


def _hop(
    conn: psycopg.Connection, bridge: _Bridge, node_id: int, info: dict[int, Chunk], vector: np.ndarray, reason: str,
) -> tuple[Evidence, Reached] | None:
    """The chunk `node_id` a bridge leads to, as evidence, with the path that reached it."""
    chunk = info.get(node_id) or chunk_info(conn, [node_id], vector).get(node_id)
    if chunk is None:
        return None
    item = chunk.evidence(node_id, "walk")
    before = bridge.before
    base = before.path if before is not None and before.path else [bridge.source.node_id]
    reach = Reached(
        node_id, len(base) + 1, [*base, bridge.concept, node_id],
        [*(before.edge_types if before else []), "mentions", "mentions"],
        [*(before.directions if before else []), "out", "in"],
        [*(before.reasons if before else []), "the evidence names it", reason], 0.0, None, 1.0, 2)
    return item, reach


def _followed(
    conn: psycopg.Connection, bridges: list[_Bridge], uncovered: list[str], evidence: Sequence[Evidence],
    policy: TraversalPolicy, ts_config: str, tenant: str | None, own_only: bool = False,
) -> tuple[int, int] | None:
    """The chunk a bridge leads to and that bridge's concept, by `_FOLLOW`'s order: the earliest
    claim's bridges first, so a later claim's are searched only when none of an earlier one's
    leads anywhere (a hub's search scores every chunk mentioning it); with `own_only`, only a
    chunk of a bridge's own documents."""
    for claim in sorted({b.claim for b in bridges}):
        named = [b for b in bridges if b.claim == claim]
        row = conn.execute(pinned(_FOLLOW, tenant), {
            "q": " ".join(uncovered), "cfg": ts_config, "concepts": [b.concept for b in named],
            "labels": [b.label for b in named], "in_claim": [b.in_claim for b in named],
            "exclude": [e.node_id for e in evidence], "k": FOLLOW_CANDIDATES, "subgraph": policy.semantic_group,
            "own_only": own_only,
        }).fetchone()
        if row is not None:
            return int(row[0]), int(row[1])
    return None


def make_room(evidence: Sequence[Evidence], synthesis: Synthesis, source: int, budget: int) -> list[Evidence] | None:
    """The evidence trimmed to `budget` tokens for a bridge's chunk: the last items first, never
    one the claims (or the draft) quote nor the chunk the bridge was followed from; None when
    that is not enough. The chunk a bridge leads to is worth more than evidence nothing quotes."""
    quoted = {c.evidence for c in synthesis.claims or synthesis.draft if c.evidence is not None}
    kept = list(evidence)
    used = sum(len(e.text.split()) for e in kept)
    for i in reversed(range(len(kept))):
        if used <= budget:
            break
        if i not in quoted and kept[i].node_id != source:
            used -= len(kept[i].text.split())
            del kept[i]
    return kept if used <= budget else None


def after(ranking: Sequence[int], anchor: int, node_id: int) -> list[int]:
    """The ranking with `node_id` moved to just after `anchor` (a bridge's chunk after the chunk
    it was followed from)."""
    rest = [n for n in ranking if n != node_id]
    at = rest.index(anchor) + 1 if anchor in rest else len(rest)
    return [*rest[:at], node_id, *rest[at:]]
