"""The query engine: a question in; evidence, the paths that reached it and an answer out.

Plan: hybrid seeding -> seeds on the torus and the density around them -> a bounded walk over
typed edges (SQL `tortus.traverse`) with a density-aware radius -> frontier scoring (a
replaceable `Scorer`) -> portal hops when coverage is low or the question spans domains ->
evidence selection under the hop, time and token budgets -> grounded synthesis (`synth`) ->
a trace stored in `tortus.query_trace` (`trace`). Every SQL stage runs under a statement
timeout taken from the remaining time; a stage cut short leaves the answer degraded, not
failed, and says so.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from functools import partial
from typing import Any, NamedTuple, TypeVar

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from tortus_pg import bridges, disputes, relations
from tortus_pg.answer_type import expected_type
from tortus_pg.embed import Embedder
from tortus_pg.errors import InvalidInput
from tortus_pg.evidence import Chunk, Evidence, Reached, chunk_info
from tortus_pg.ingest.chunking import chunk_document
from tortus_pg.ingest.extract import extract_concepts
from tortus_pg.ingest.types import Document
from tortus_pg.policy import TraversalPolicy
from tortus_pg.query.refusal import HARD_REFUSALS, Refusal
from tortus_pg.query.similarity import SentenceSimilarity
from tortus_pg.query.terms import coverage_of, question_terms
from tortus_pg.retrieve import MAX_QUERY_CHARS, Hit, embed_query, rrf, search
from tortus_pg.scoring import Features, Scorer, default_score
from tortus_pg.synth import Synthesis, Synthesizer, cited_text, synthesize
from tortus_pg.trace import store_trace

SEEDS = 20  # hybrid hits considered
WALK_SEEDS = 5  # of which the walk starts from the best
FUSE_SEEDS = 2  # definitions reached from these seeds are fused with the search ranking
# The walk's bounds: edges followed per node, frontier kept per hop, nodes kept in all (300 and
# 600 gave the same recall@5 on 100-200 questions of each multi-hop set; the smaller walk is faster).
FAN_OUT, BEAM_WIDTH, MAX_NODES = 30, 60, 300
# The walk's depth, within the hop budget: chunk -> concept -> chunk. A third hop cost 70 ms a
# question on musique for the same recall@5; longer budgets go to relation chains and bridges.
WALK_HOPS = 2
BASE_RADIUS = math.pi / 2  # radians on the torus, before the density adjustment (0.5x to 2x)
MAX_EVIDENCE = 50
SHARDS = 8  # torus cells a distributed deployment would place on separate nodes
WALK_SLOTS = 2  # evidence places kept for chunks the walk reached
MAX_PER_SOURCE = 2  # evidence chunks from one document while others are left
LOW_COVERAGE = 0.5  # below this share of the question's weight, portals are worth a hop
_T = TypeVar("_T")


class DeadlineReached(Exception):
    """The question's time budget ran out before a stage could start."""


@dataclass
class Answer:
    question: str
    answer: str | None
    withheld: bool
    confidence: float
    path: list[dict[str, Any]]
    evidence: list[Evidence]
    claims: list[dict[str, Any]]
    warnings: list[str]
    budget: dict[str, Any]
    diagnostics: dict[str, Any]
    ranking: list[int] = field(default_factory=list)  # every candidate chunk, best first
    trace_id: int | None = None
    refusal: Refusal | None = None  # why it is withheld

    @property
    def short_answer(self) -> str | None:
        """The span of the asked type in the claim that answers, when the reader found one."""
        if self.withheld:
            return None
        return next((c["short_answer"] for c in self.claims if c.get("short_answer")), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "question": self.question, "answer": self.answer, "short_answer": self.short_answer,
            "withheld": self.withheld, "refusal": self.refusal.name if self.refusal else None,
            "confidence": round(self.confidence, 4), "path": self.path,
            "evidence": [
                {"node_id": e.node_id, "label": e.label, "uri": e.uri, "span": [e.start, e.end], "page": e.page,
                 "text": e.text, "score": round(e.score, 6), "origin": e.origin}
                for e in self.evidence
            ],
            "claims": self.claims, "warnings": self.warnings, "budget": self.budget,
            "diagnostics": self.diagnostics, "trace_id": self.trace_id,
        }


class _Clock:
    """Wall-clock deadline plus per-stage timings; each SQL stage gets the remaining time as its
    statement timeout, inside a savepoint that a cancelled stage rolls back to (the caller's
    transaction stays usable). Use inside a transaction."""

    def __init__(self, conn: psycopg.Connection, max_ms: int) -> None:
        self.conn, self.max_ms = conn, max_ms
        self.start = time.perf_counter()
        self.timings: dict[str, float] = {}
        self.degraded: list[str] = []
        self.savepoint = False

    def elapsed_ms(self) -> float:
        return (time.perf_counter() - self.start) * 1000

    def remaining_ms(self) -> int:
        return int(self.max_ms - self.elapsed_ms())

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        if self.remaining_ms() <= 0:
            raise DeadlineReached(name)
        began = time.perf_counter()
        # One round trip per stage: the previous stage's savepoint is released, this stage's
        # opened and its timeout set (a local setting, undone by a rollback to the savepoint).
        self.conn.execute(("release savepoint tortus_stage; " if self.savepoint else "")
                          + f"savepoint tortus_stage; set local statement_timeout = {max(self.remaining_ms(), 1)}")
        self.savepoint = True
        try:
            yield
        except BaseException:
            self.conn.execute("rollback to savepoint tortus_stage")
            raise
        finally:
            # A stage that runs more than once (synthesis after each bridge) adds up its time.
            key = f"{name}_ms"
            self.timings[key] = round(self.timings.get(key, 0.0) + (time.perf_counter() - began) * 1000, 2)

    def close(self) -> None:
        if self.savepoint:
            self.conn.execute("release savepoint tortus_stage")
            self.savepoint = False

    def attempt(self, name: str, fn: Callable[[], _T], fallback: _T) -> _T:
        """Run one stage; when the budget runs out before or during it, record why and go on."""
        try:
            with self.stage(name):
                return fn()
        except (DeadlineReached, psycopg.errors.QueryCanceled):
            self.degraded.append(name)
            return fallback


_CONCEPTS = """
select n.node_id, exists (select 1 from tortus.edge d
                          where d.tenant_id = n.tenant_id and d.dst = n.node_id and d.type = 'defines')
from tortus.node n
where n.tenant_id = tortus.current_tenant() and n.kind <> 'chunk' and n.key = any(%s)
"""


def concepts_in(conn: psycopg.Connection, question: str) -> list[tuple[int, bool]]:
    """Graph nodes of the concepts the deterministic extractor finds in the question, each with
    whether some chunk defines it (a document titled by it, a clause)."""
    doc = Document(text=question, kind="text")
    keys = [c.key for c in extract_concepts(doc, chunk_document(doc)).concepts]
    return [(r[0], r[1]) for r in conn.execute(_CONCEPTS, [keys]).fetchall()]


def question_concepts(conn: psycopg.Connection, question: str, *, defined_only: bool = False) -> list[int]:
    """The node ids of `concepts_in`; with `defined_only`, of those some chunk defines."""
    return [node for node, defined in concepts_in(conn, question) if defined or not defined_only]


_DENSITY = "select node_id, neighbours, expected from tortus.local_density(%s::bigint[], %s, %s)"


def walk_radius(
    conn: psycopg.Connection, seeds: Sequence[int], layout: str | None = None
) -> tuple[float | None, list[dict[str, Any]]]:
    """The torus radius of the walk: BASE_RADIUS scaled by sqrt(expected / neighbours) around each
    seed (narrower where chunks crowd, wider where they are sparse), the widest seed's; None when
    no seed has coordinates."""
    rows = conn.execute(_DENSITY, [list(seeds), BASE_RADIUS, layout]).fetchall()
    radii = []
    detail = []
    for node_id, neighbours, expected in rows:
        scale = math.sqrt(max(expected, 1.0) / max(neighbours, 1))
        radius = BASE_RADIUS * min(max(scale, 0.5), 2.0)
        radii.append(radius)
        detail.append({"node_id": node_id, "neighbours": neighbours, "expected": round(expected, 2),
                       "radius": round(radius, 3)})
    return (max(radii) if radii else None), detail


_WALK = """
select t.node_id, t.hop, t.path, t.edge_types, t.directions, t.hop_scores, t.reasons, t.score,
       t.torus_distance, t.pruned, t.prune_reason, t.kind, t.label, t.min_confidence, t.spans
from tortus.supported_traverse(%(seeds)s::bigint[], %(v)s, %(policy)s) t
"""

_ALL_HOPS = """
select p.i, h.* from jsonb_to_recordset(%s) as p(i integer, path bigint[], types text[], dirs text[])
cross join lateral tortus.path_hops(p.path, p.types, p.dirs) h
order by p.i, h.hop
"""
_PORTALS_FROM = """
select count(*) from (select 1 from tortus.portal p
                      where p.tenant_id = tortus.current_tenant() and p.src = any(%s::bigint[]) limit 1) x
"""
_SUBGRAPHS = """
select count(distinct m.subgraph) from tortus.membership m
where m.tenant_id = tortus.current_tenant() and m.node_id = any(%s::bigint[])
"""


def _walk_policy(policy: TraversalPolicy, radius: float | None, portals: int, layout: str | None) -> dict[str, Any]:
    return {
        "layout": layout,
        "max_hops": min(policy.max_hops, WALK_HOPS), "fan_out": FAN_OUT, "beam_width": BEAM_WIDTH,
        "max_nodes": MAX_NODES,
        "max_portal_hops": 0 if policy.local_only else portals, "local_only": policy.local_only,
        "subgraphs": [policy.semantic_group] if policy.semantic_group else None, "torus_radius": radius,
        # Co-occurrence links are too many and too weak to walk; reading order stays.
        "edge_types_deny": ["related_to"],
    }


def _walk(
    conn: psycopg.Connection, seeds: list[int], vector: np.ndarray, walk_policy: dict[str, Any]
) -> tuple[list[Reached], list[dict[str, Any]]]:
    reached: list[Reached] = []
    pruned: list[dict[str, Any]] = []
    rows = conn.execute(_WALK, {"seeds": seeds, "v": vector, "policy": Jsonb(walk_policy)}).fetchall()
    for (node_id, hop, path, types, dirs, _scores, reasons, score, dist, is_pruned, why, kind, label,
         min_conf, spans) in rows:
        if is_pruned:
            pruned.append({"node_id": node_id, "label": label, "kind": kind, "hop": hop, "reason": why})
        elif kind == "chunk":
            reached.append(Reached(node_id, hop, list(path), list(types or []), list(dirs or []),
                                    list(reasons or []), float(score), dist, float(min_conf), int(spans)))
    return reached, pruned


def _texts(ids: Sequence[int], info: dict[int, Chunk]) -> list[str]:
    return [info[i].text for i in ids if i in info]


def _rank(
    hits: Sequence[Hit], reached: Sequence[Reached], info: dict[int, Chunk], scorer: Scorer,
    named: Sequence[int] = (),
) -> tuple[list[int], dict[int, float]]:
    """The search ranking fused (RRF) with the chunks the walk reached through a `defines` edge
    from the FUSE_SEEDS best seeds or a concept the question names, ranked by the scorer; the
    other reached chunks follow, also by the scorer.

    A chunk that defines a concept the best seeds (or the question) mention is the walk's strong
    evidence: the document about the bridge entity, the clause a passage cites. Chunks that
    merely mention the same concepts are many and weakly related; fused as a list of their own
    they displaced better search hits in every evaluation set, so they only extend the ranking,
    as do definitions reached from lower seeds, which are more often off the question's topic.
    """
    roots = {h.node_id for h in hits[:FUSE_SEEDS]} | set(named)
    walked: dict[int, float] = {}
    defining: set[int] = set()
    for r in reached:
        chunk = info.get(r.node_id)
        if r.hop == 0 or chunk is None:
            continue
        defined = r.edge_types[-1] == "defines"
        walked[r.node_id] = scorer(Features(
            similarity=chunk.similarity, path_strength=r.strength, hops=r.hop, min_confidence=r.min_confidence,
            evidence_spans=r.spans, defined=defined, age_days=chunk.age_days, torus_distance=r.torus_distance,
        ))
        if defined and r.path[0] in roots:
            defining.add(r.node_id)
    by_score = sorted(walked, key=lambda n: (-walked[n], n))
    fused = rrf([[h.node_id for h in hits], [n for n in by_score if n in defining]])
    return list(dict.fromkeys([*fused, *by_score])), walked


def answer(
    conn: psycopg.Connection,
    question: str,
    *,
    embedder: Embedder | None,
    policy: TraversalPolicy = TraversalPolicy(),
    k: int = 5,
    ts_config: str = "english",
    scorer: Scorer = default_score,
    synthesizer: Synthesizer | None = None,
    store: bool = True,
    warnings: Sequence[str] = (),
    layout: str | None = None,
) -> Answer:
    """Answer `question` from the current tenant's graph (call inside `tenant_scope`).

    `layout` walks with alternative torus coordinates stored by `indexing.store_layout`
    (layout ablations); by default the live coordinates."""
    if not question.strip() or len(question) > MAX_QUERY_CHARS:
        raise InvalidInput(f"the question must have 1 to {MAX_QUERY_CHARS} characters")
    if not 1 <= k <= MAX_EVIDENCE:
        raise InvalidInput(f"k must be between 1 and {MAX_EVIDENCE} evidence chunks")
    # The question is embedded before the clock starts: the first call may load a local model,
    # which is not the question's cost. Its time is reported with the stages.
    began = time.perf_counter()
    vector = embed_query(embedder, question, "the query engine")
    embed_ms = round((time.perf_counter() - began) * 1000, 2)
    clock = _Clock(conn, policy.max_ms)
    clock.timings["embed_ms"] = embed_ms
    notes = list(warnings)
    # The stages' savepoints need a transaction: an autocommit connection gets one for the plan.
    idle = conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    with conn.transaction() if idle else nullcontext():
        previous_timeout = conn.execute("select current_setting('statement_timeout')").fetchone()
        try:
            result = _plan(conn, question, vector, embedder, policy, k, ts_config, scorer, synthesizer, clock, notes,
                           layout)
        finally:
            clock.close()
            restore = previous_timeout[0] if previous_timeout else "0"
            conn.execute("select set_config('statement_timeout', %s, true)", [restore])
    if store:
        result.trace_id = store_trace(conn, result, policy)
    return result


def _plan(
    conn: psycopg.Connection, question: str, vector: np.ndarray, embedder: Embedder | None,
    policy: TraversalPolicy, k: int,
    ts_config: str, scorer: Scorer, synthesizer: Synthesizer | None, clock: _Clock, notes: list[str],
    layout: str | None,
) -> Answer:
    hits: list[Hit] = clock.attempt(
        "seed", lambda: search(conn, question, mode="hybrid", k=SEEDS, embedder=embedder, ts_config=ts_config,
                               query_vector=vector), [])
    seed_ids = [h.node_id for h in hits]
    walk_seeds = seed_ids[:WALK_SEEDS]
    # The concepts the question names: the defined ones seed the walk (personalization); all of
    # them are not bridges worth following.
    concepts: list[tuple[int, bool]] = clock.attempt("link", lambda: concepts_in(conn, question), [])
    named = [] if policy.no_personalization else [node for node, defined in concepts if defined]
    # What a named thing implements (a standard, a clause, a decision) applies to it: a defined
    # one starts the walk too, and synthesis may quote it.
    implements: list[Implemented] = clock.attempt(
        "implements", partial(_implemented, conn, named), []) if named else []
    named_or_implemented = list(dict.fromkeys([*named, *(i.standard for i in implements if i.defined)]))
    no_density: tuple[float | None, list[dict[str, Any]]] = (None, [])
    radius, density = clock.attempt("density", lambda: walk_radius(conn, walk_seeds, layout), no_density)

    domains = clock.attempt("domains", lambda: _count(conn, _SUBGRAPHS, [walk_seeds]), 0)
    portals = 1 if policy.portal_preference == "prefer" or (policy.portal_preference == "auto" and domains > 1) else 0
    walk_policy = _walk_policy(policy, radius, portals, layout)
    no_walk: tuple[list[Reached], list[dict[str, Any]]] = ([], [])
    reached, pruned = clock.attempt("walk", lambda: _walk(conn, walk_seeds + named_or_implemented, vector, walk_policy),
                                    no_walk)
    portal_decisions = [{"stage": "walk", "allowed": walk_policy["max_portal_hops"] > 0,
                         "why": f"seeds span {domains} subgraph(s); portal_preference {policy.portal_preference}"}]
    if policy.failover_level >= 1 and radius is not None and len([r for r in reached if r.hop > 0]) < k:
        # Too little inside the radius: widen to the whole torus once.
        walk_policy = {**walk_policy, "torus_radius": None}
        again = clock.attempt("walk_wide", lambda: _walk(conn, walk_seeds + named_or_implemented, vector, walk_policy),
                              None)
        if again is not None:
            reached, pruned = again
            notes.append("the walk found too little within the torus radius and was widened")
    candidates = [*seed_ids, *(r.node_id for r in reached)]
    # Titles matter to evidence selection only when a document is about an identifier the question names.
    titles = any(h.heading_match for h in hits)
    info: dict[int, Chunk] = clock.attempt("candidates", lambda: chunk_info(conn, candidates, vector, titles), {})
    ranking, scores = _rank(hits, reached, info, scorer, named_or_implemented)
    # The question's weighted terms, once: for the portal decision here and for synthesis.
    terms = clock.attempt("terms", lambda: question_terms(conn, question, ts_config, _labels(conn, named)), None)
    coverage = 1.0 if terms is None else clock.attempt(
        "coverage", lambda: coverage_of(conn, terms, _texts(ranking[:k], info), ts_config), 1.0)
    low = coverage < LOW_COVERAGE and not portals and policy.portal_preference == "auto" and not policy.local_only
    if low and not clock.attempt("portals_near", lambda: _count(conn, _PORTALS_FROM, [
            [*walk_seeds, *(r.node_id for r in reached)]]) > 0, False):
        portal_decisions.append({"stage": "portal_walk", "allowed": False,
                                 "why": f"coverage {coverage:.2f} is low, but no portal leaves the nodes reached"})
    elif low:
        walk_policy = {**walk_policy, "max_portal_hops": 1}
        again = clock.attempt("portal_walk",
                              lambda: _walk(conn, walk_seeds + named_or_implemented, vector, walk_policy), None)
        portal_decisions.append({"stage": "portal_walk", "allowed": True,
                                 "why": f"coverage {coverage:.2f} of the question is below {LOW_COVERAGE}"})
        if again is not None:
            reached, pruned = again
            info = {**info, **clock.attempt("candidates", lambda: chunk_info(
                conn, [r.node_id for r in reached if r.node_id not in info], vector, titles), {})}
            ranking, scores = _rank(hits, reached, info, scorer, named_or_implemented)

    evidence, tokens = _select(ranking, info, hits, scores, k, policy.max_tokens)

    by_node = {r.node_id: r for r in reached}
    no_links: list[tuple[int, int, int, str]] = []
    links = clock.attempt("links", partial(_definitions, conn, evidence), no_links)

    def synthesized(links: Sequence[tuple[int, int, int, str]]) -> Synthesis:
        return synthesize(conn, question, evidence, _chains(evidence, by_node, links), ts_config=ts_config,
                          synthesizer=synthesizer, terms=terms, similarity=similar, bridges=policy.max_hops >= 2)

    similar = SentenceSimilarity(embedder, vector) if embedder is not None else None

    synthesis = None if terms is None else clock.attempt("synthesis", partial(synthesized, links), None)
    # The answer may stop at a bridge ("... caused by Key Vault"), or a withheld draft may name
    # one: follow it to what the question still asks, while the hop budget allows. A bridge is two
    # hops, so the budget pays for one bridge per two hops (a second bridge from another claim
    # under a three-hop budget answered 7 more musique questions, 6 of them wrongly).
    mentioned = [*(node for node, _ in concepts), *(i.standard for i in implements)]
    for _ in range(policy.max_hops // 2):
        if synthesis is None or not (synthesis.claims or synthesis.draft) or synthesis.refusal in HARD_REFUSALS:
            break
        bridge = clock.attempt("bridge", partial(bridges.follow, conn, mentioned, synthesis, evidence, by_node, info,
                                                 vector, policy, ts_config), None)
        if bridge is None:
            break
        item, reach = bridge
        source = reach.path[-3]  # the path ends: chunk followed from -> bridge entity -> chunk found
        kept = bridges.make_room(evidence, synthesis, source, policy.max_tokens - len(item.text.split()))
        if kept is None:
            break
        evidence = [*kept, item]
        tokens = sum(len(e.text.split()) for e in evidence)
        by_node[item.node_id] = reach
        ranking = bridges.after(ranking, reach.path[0], item.node_id)
        links = clock.attempt("links", partial(_definitions, conn, evidence), links)
        synthesis = clock.attempt("synthesis", partial(synthesized, links), synthesis)
    if synthesis is None:
        synthesis = Synthesis(None, True, 0.0, [], 0.0, [], [Refusal.NO_TIME.message()], refusal=Refusal.NO_TIME)
    # "Which team / system / decision / incident …": the chain of typed relations from what the
    # question names to a node of that kind answers it, when one covers the question; its edges'
    # spans are the claims and the chain is the path. The opening is read before a stage opens:
    # most questions ask for no kind and pay nothing.
    asks_kind = synthesizer is None and relations.target_of(question) is not None
    relation = None if not asks_kind or terms is None else clock.attempt(
        "relations", partial(relations.best_relation, conn, question, terms, [n for n, _ in concepts],
                             policy.max_hops, ts_config), None)
    related = None if relation is None else clock.attempt(
        "relation_evidence", partial(relations.answer, conn, relation, evidence, vector, k, policy.max_tokens), None)
    if related is not None:
        evidence, synthesis, chain_paths = related
        by_node.update(chain_paths)
        tokens = sum(len(e.text.split()) for e in evidence)
        links = clock.attempt("links", partial(_definitions, conn, evidence), links)
    cited = list({c["evidence"]: evidence[c["evidence"]] for c in synthesis.claims
                  if c.get("evidence") is not None}.values())
    # The ranking leads with the chunks the answer (or its withheld draft) quotes.
    drafted = [] if synthesis.refusal in HARD_REFUSALS else synthesis.draft
    quoted = [evidence[c["evidence"]].node_id for c in synthesis.claims or drafted if c.get("evidence") is not None]
    ranking = list(dict.fromkeys([*quoted, *ranking]))
    # The path behind the answer: the evidence its claims cite (all evidence with `explain`, the
    # two best items when nothing is cited).
    shown = evidence if policy.explain or not cited else cited
    by_node.update(_linked_paths(cited, links, by_node))
    path: list[dict[str, Any]] = clock.attempt("paths", lambda: _paths(conn, shown or evidence[:2], hits, by_node),
                                               [])
    # Contradictions stated inside the final evidence (a followed bridge's chunk included) are
    # noted when a cited chunk states them.
    no_statements: list[dict[str, Any]] = []
    contradictions = clock.attempt("contradictions", partial(disputes.contradictions, conn,
                                                             [e.node_id for e in evidence]), no_statements)
    disputed = [c for c in contradictions if any(disputes.stated_in(c["evidence"], e) for e in cited)]
    # A quoted source that a newer one supersedes or disputes is flagged wherever that is stated.
    overruled = clock.attempt("superseded", partial(disputes.superseded, conn, synthesis.claims, evidence),
                              no_statements)
    disputed += [c for c in overruled if c not in disputed]
    contradictions = contradictions + [c for c in overruled if c not in contradictions]
    if disputed and synthesis.answer is not None:
        synthesis.answer += " Note: the sources disagree: " + "; ".join(c["statement"] for c in disputed)
    notes += synthesis.warnings
    if clock.degraded:
        notes.append(f"degraded: the time budget ({policy.max_ms} ms) ran out at stage(s) {', '.join(clock.degraded)}")
    clock.timings["total_ms"] = round(clock.elapsed_ms(), 2)
    hop_count = max((len(by_node[e.node_id].edge_types) for e in evidence if e.node_id in by_node), default=0)
    budget: dict[str, dict[str, Any]] = {
        "ms": {"limit": policy.max_ms, "used": clock.timings["total_ms"]},
        "hops": {"limit": policy.max_hops, "used": hop_count},
        "tokens": {"limit": policy.max_tokens, "used": tokens},
        # The portal budget is per path: report the most any evidence path took.
        "portal_hops": {"limit": int(walk_policy["max_portal_hops"]),
                        "used": max((by_node[e.node_id].directions.count("portal") for e in evidence
                                     if e.node_id in by_node), default=0)},
    }
    diagnostics: dict[str, Any] = {
        "seeds": [{"node_id": h.node_id, "label": h.label, "rank": h.rank, "bm25_rank": h.bm25_rank,
                   "vector_rank": h.vector_rank, "heading_match": h.heading_match} for h in hits],
        "named_concepts": named, "implements": [{"from": i.label, "to": i.standard_label} for i in implements],
        "density": density, "radius": radius, "portals": portal_decisions,
        "pruned": pruned if policy.explain else pruned[:20], "pruned_total": len(pruned),
        "reached_chunks": len(scores), "coverage": round(synthesis.coverage, 4), "missing_terms": synthesis.missing,
        "answer_type": kind.name if (kind := expected_type(question)) else None,
        "contradictions": contradictions, "timings": clock.timings, "degraded": clock.degraded,
        "signals": synthesis.signals, "draft": cited_text(synthesis.draft) if synthesis.withheld else None,
        "shard_crossings": sum(1 for hop in path if hop.get("shard_crossing")),
    }
    return Answer(question, synthesis.answer, synthesis.withheld, synthesis.confidence, path, evidence,
                  synthesis.claims, notes, budget, diagnostics, ranking, refusal=synthesis.refusal)


def _count(conn: psycopg.Connection, query: str, params: Sequence[Any]) -> int:
    row = conn.execute(query, params).fetchone()
    return int(row[0]) if row else 0


_IMPLEMENTED = """
select e.src, x.label, e.dst, y.label,
       exists (select 1 from tortus.edge d where d.tenant_id = y.tenant_id and d.dst = y.node_id
               and d.type = 'defines')
from tortus.edge e
join tortus.node x on x.tenant_id = e.tenant_id and x.node_id = e.src
join tortus.node y on y.tenant_id = e.tenant_id and y.node_id = e.dst
where e.tenant_id = tortus.current_tenant() and e.type = 'implements' and e.src = any(%s::bigint[])
order by e.src, e.dst
"""


class Implemented(NamedTuple):
    """A named thing's `implements` edge: what it implements."""

    label: str
    standard: int
    standard_label: str
    defined: bool  # some chunk defines the standard


def _implemented(conn: psycopg.Connection, nodes: Sequence[int]) -> list[Implemented]:
    rows = conn.execute(_IMPLEMENTED, [list(nodes)]).fetchall()
    return [Implemented(x, b, y, bool(d)) for _, x, b, y, d in rows]


def _labels(conn: psycopg.Connection, nodes: Sequence[int]) -> list[str]:
    return [r[0] for r in conn.execute(_LABELS, [list(nodes)]).fetchall()]


_LABELS = "select label from tortus.node where tenant_id = tortus.current_tenant() and node_id = any(%s) order by 1"


def _select(
    ranking: Sequence[int], info: dict[int, Chunk], hits: Sequence[Hit], scores: dict[int, float], k: int,
    max_tokens: int,
) -> tuple[list[Evidence], int]:
    """The best-ranked chunks that fit the token budget (at least the first, cut to fit), at most
    MAX_PER_SOURCE from one document while others are left (a second document reached through
    the graph is worth more than a fourth section of the first), unless the document is the one
    about an identifier the question names; documents titled with another identifier then come
    after the other search hits."""
    seeds = {h.node_id: h for h in hits}
    ordered = [n for n in ranking if n in info]
    # The document headed by an identifier the question names is about it: no cap on its chunks.
    about = {info[h.node_id].uri for h in hits if h.heading_match and h.node_id in info}
    if about:
        ordered = _lexical_within(ordered, about, info, seeds)
    per_source: dict[str, int] = {}
    first_pass = []
    for n in ordered:
        if info[n].uri in about or per_source.get(info[n].uri, 0) < MAX_PER_SOURCE:
            per_source[info[n].uri] = per_source.get(info[n].uri, 0) + 1
            first_pass.append(n)
    # Once a document is about the identifier the question names, a document titled with another
    # identifier (the incident next to the one asked about) reads alike but answers nothing.
    searched = sorted((n for n in first_pass if n not in scores),
                      key=lambda n: bool(about) and info[n].titled and info[n].uri not in about)
    # The walk's best chunks from other documents get the last WALK_SLOTS places: the second hop
    # an answer needs is often a section that mentions the bridge concept rather than the
    # document defining it.
    head = searched[: max(k - WALK_SLOTS, 1)]
    seen = {info[n].uri for n in head}
    walked = sorted((n for n in scores if n in info and info[n].uri not in seen), key=lambda n: (-scores[n], n))
    candidates = list(dict.fromkeys([*head, *walked[:WALK_SLOTS], *first_pass, *ordered]))
    chosen: list[Evidence] = []
    used = 0
    for node_id in candidates:
        chunk = info[node_id]
        words = chunk.text.split()
        if used + len(words) > max_tokens:
            if chosen:
                continue
            text = chunk.text[: len(" ".join(words[:max_tokens]))]
        else:
            text = chunk.text
        used += len(text.split())
        origin = "seed" if node_id in seeds else "walk"
        score = seeds[node_id].score if node_id in seeds else scores.get(node_id, 0.0)
        chosen.append(Evidence(node_id, chunk.label, chunk.uri, chunk.start, chunk.start + len(text), chunk.page,
                               text, score, origin))
        if len(chosen) == k:
            break
    return chosen, used


def _lexical_within(
    ordered: Sequence[int], about: set[str], info: dict[int, Chunk], seeds: dict[int, Hit]
) -> list[int]:
    """`ordered` with the chunks of the documents in `about` re-ordered among their own places by
    BM25 rank (chunks BM25 did not find after those it did, in their order). The sections of the
    document about an identifier share its topic, so dense vectors find them all alike; what
    tells them apart is what each says ("Merchants received E-1042" against "What went well")."""
    places = [i for i, n in enumerate(ordered) if info[n].uri in about]

    def lexical(n: int) -> tuple[bool, int]:
        rank = seeds[n].bm25_rank if n in seeds else None
        return rank is None, rank or 0

    out = list(ordered)
    for place, n in zip(places, sorted((ordered[i] for i in places), key=lexical), strict=True):
        out[place] = n
    return out


# A chunk that names a concept, and a chunk that defines it or belongs to the document that
# does (the document about the concept), with the edge type that ties the latter to it.
_DEFINED_BY = """
select m.src, o.src, m.dst, o.type from tortus.edge m
join tortus.edge o on o.tenant_id = m.tenant_id and o.dst = m.dst and o.type in ('defines', 'mentions')
join tortus.node b on b.tenant_id = o.tenant_id and b.node_id = o.src
where m.tenant_id = tortus.current_tenant() and m.type = 'mentions'
  and m.src = any(%(ids)s::bigint[]) and o.src = any(%(ids)s::bigint[]) and o.src <> m.src
  and (o.type = 'defines'
       or exists (select 1 from tortus.edge d
                  join tortus.node dn on dn.tenant_id = d.tenant_id and dn.node_id = d.src
                  where d.tenant_id = m.tenant_id and d.dst = m.dst and d.type = 'defines'
                    and dn.source_id = b.source_id))
"""


def _definitions(conn: psycopg.Connection, evidence: Sequence[Evidence]) -> list[tuple[int, int, int, str]]:
    """(naming chunk, chunk about the concept, concept, edge type of the latter) among the
    evidence: a chunk that names a concept and one that defines it or is part of the document
    about it (the clause a chunk cites, the handbook of the service it names)."""
    return conn.execute(_DEFINED_BY, {"ids": [e.node_id for e in evidence]}).fetchall()


def _linked_paths(
    cited: Sequence[Evidence], links: Sequence[tuple[int, int, int, str]], reached: dict[int, Reached]
) -> dict[int, Reached]:
    """The reasoning path of a cited chunk that no walk reached but that is about what another
    cited chunk names: naming chunk -> concept -> chunk about it, two hops."""
    ids = {e.node_id for e in cited}
    paths = {}
    for a, b, concept, kind in links:
        if a in ids and b in ids and b not in paths and not (b in reached and reached[b].edge_types):
            why = "defines it" if kind == "defines" else "is part of the document about it"
            paths[b] = Reached(b, 2, [a, concept, b], ["mentions", kind], ["out", "in"],
                                ["the cited evidence names it", why], 0.0, None, 1.0, 2)
    return paths


def _chains(
    evidence: Sequence[Evidence], reached: dict[int, Reached], links: Sequence[tuple[int, int, int, str]] = ()
) -> list[list[int]]:
    """Evidence grouped into chains that can answer together: a chunk with the chunks the walk
    reached from it, chunks of one document, and a chunk with the chunk defining what it names
    (`links`). An answer must come from one chain, so two unrelated chunks cannot be stitched
    into an answer neither supports."""
    parent = list(range(len(evidence)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[object, int] = {}
    for i, e in enumerate(evidence):
        r = reached.get(e.node_id)
        keys: list[object] = [("node", e.node_id), ("uri", e.uri)]
        if r is not None and r.path:
            keys.append(("node", r.path[0]))
        keys += [("link", n) for n, (a, b, *_) in enumerate(links) if e.node_id in (a, b)]
        for key in keys:
            if key in owner:
                parent[find(i)] = find(owner[key])
            else:
                owner[key] = i
    groups: dict[int, list[int]] = {}
    for i in range(len(evidence)):
        groups.setdefault(find(i), []).append(i)
    return list(groups.values())


def _paths(
    conn: psycopg.Connection, evidence: Sequence[Evidence], hits: Sequence[Hit], reached: dict[int, Reached]
) -> list[dict[str, Any]]:
    """The hops that lead to each evidence chunk: a search hop for seeds, then the walk's edges."""
    seeds = {h.node_id: h for h in hits}
    out: list[dict[str, Any]] = []
    seen: set[tuple[int, int, str]] = set()
    walked = [r for e in evidence if (r := reached.get(e.node_id)) is not None and r.edge_types]
    hops: dict[int, list[tuple[Any, ...]]] = {}
    if walked:  # one statement for all paths: each call of the SQL function is planned anew
        for ordinal, *row in conn.execute(_ALL_HOPS, [Jsonb([
            {"i": i, "path": r.path, "types": r.edge_types, "dirs": r.directions} for i, r in enumerate(walked)
        ])]).fetchall():
            hops.setdefault(walked[ordinal].node_id, []).append(tuple(row))
    for e in evidence:
        r = reached.get(e.node_id)
        start = r.path[0] if r is not None and r.path else e.node_id
        hit = seeds.get(start)
        if hit is not None and (0, start, "search") not in seen:
            seen.add((0, start, "search"))
            out.append({
                "from": "question", "to": hit.label, "to_id": start, "edge_type": "search", "weight": hit.score,
                "reason": f"hybrid search rank {hit.rank} "
                f"(bm25 {hit.bm25_rank or '-'}, vector {hit.vector_rank or '-'})",
                "evidence": [{"uri": hit.uri, "span": [hit.start_char, hit.end_char], "page": hit.page,
                              "text": hit.text}],
            })
        if r is None or not r.edge_types:
            continue
        for hop, src, src_label, dst, dst_label, edge_type, weight, items in hops.get(e.node_id, []):
            if (src, dst, edge_type) in seen:
                continue
            seen.add((src, dst, edge_type))
            out.append({
                "from": src_label, "from_id": src, "to": dst_label, "to_id": dst, "edge_type": edge_type,
                "weight": weight, "reason": r.reasons[hop - 1] if hop - 1 < len(r.reasons) else None,
                "torus_distance": r.torus_distance if dst == r.node_id else None,
                "evidence": [{"uri": i["uri"], "span": [i["start"], i["end"]], "page": i["page"], "text": i["text"]}
                             for i in items],
            })
    return _mark_shard_crossings(conn, out)


_SHARDS = """
select node_id, tortus.shard_of(theta, phi, %s) from tortus.node
where tenant_id = tortus.current_tenant() and node_id = any(%s::bigint[]) and theta is not null
"""


def _mark_shard_crossings(conn: psycopg.Connection, hops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Flag the hops whose ends lie in different torus shards (a distributed deployment pays a
    network round trip for each)."""
    ids = {h[k] for h in hops for k in ("from_id", "to_id") if h.get(k) is not None}
    shard: dict[int, int] = dict(conn.execute(_SHARDS, [SHARDS, list(ids)]).fetchall()) if ids else {}
    for h in hops:
        a, b = shard.get(h.get("from_id") or -1), shard.get(h.get("to_id") or -1)
        h["shard_crossing"] = a is not None and b is not None and a != b
    return hops


