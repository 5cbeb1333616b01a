"""What the answer shows of how it was reached: the ranking led by what it quotes, the path
behind its evidence, the budget it used and the diagnostics of every stage."""

from __future__ import annotations

from typing import Any

import psycopg

from tortus_pg.query.paths import linked_paths, paths
from tortus_pg.query.refusal import HARD_REFUSALS
from tortus_pg.query.results import Budget, Claim, Use
from tortus_pg.query.state import State
from tortus_pg.synth import Synthesis, cited_text


def explain(conn: psycopg.Connection, state: State) -> None:
    """Stage: the ranking led by the chunks the answer (or its withheld draft) quotes, and the
    path behind the answer (stage `paths`): the hops to the evidence its claims cite (all
    evidence with `explain`, the two best items when nothing is cited)."""
    synthesis, evidence = state.synthesis, state.evidence
    drafted = _offered(synthesis) or []
    quoted = [evidence[c.evidence].node_id for c in synthesis.claims or drafted if c.evidence is not None]
    state.ranking = list(dict.fromkeys([*quoted, *state.ranking]))
    cited = state.cited
    shown = evidence if state.options.policy.explain or not cited else cited
    state.routes.update(linked_paths(cited, state.links, state.routes))
    state.path = state.clock.attempt("paths", lambda: paths(conn, shown or evidence[:2], state.hits, state.routes,
                                                             state.options.layout), [])


def budget(state: State) -> Budget:
    """Each budget's limit and use: time, hops and portal hops of the evidence paths, tokens."""
    policy, evidence, routes = state.options.policy, state.evidence, state.routes
    return Budget(
        ms=Use(policy.max_ms, state.clock.timings["total_ms"]),
        hops=Use(policy.max_hops,
                 max((len(routes[e.node_id].edge_types) for e in evidence if e.node_id in routes), default=0)),
        tokens=Use(policy.max_tokens, sum(len(e.text.split()) for e in evidence)),
        # The portal budget is per path: report the most any evidence path took.
        portal_hops=Use(int(state.walk_policy["max_portal_hops"]),
                        max((routes[e.node_id].directions.count("portal") for e in evidence if e.node_id in routes),
                            default=0)),
    )


def diagnostics(state: State) -> dict[str, Any]:
    """What each stage found and decided, for the caller and the trace."""
    q, synthesis, clock, explained = state.question, state.synthesis, state.clock, state.options.policy.explain
    return {
        "seeds": [{"node_id": h.node_id, "label": h.label, "rank": h.rank, "bm25_rank": h.bm25_rank,
                   "vector_rank": h.vector_rank, "heading_match": h.heading_match} for h in state.hits],
        "named_concepts": list(q.named),
        "implements": [{"from": i.label, "to": i.standard_label} for i in state.implements],
        "density": state.density, "radius": state.radius, "portals": state.portals,
        "pruned": state.pruned if explained else state.pruned[:20], "pruned_total": len(state.pruned),
        "reached_chunks": len(state.scores), "coverage": round(synthesis.coverage, 4),
        "missing_terms": synthesis.missing, "answer_type": q.answer_type.name if q.answer_type else None,
        "contradictions": state.contradictions, "timings": clock.timings, "degraded": clock.degraded,
        "signals": synthesis.signals,
        "draft": cited_text(offered) if synthesis.withheld and (offered := _offered(synthesis)) is not None else None,
        "shard_crossings": sum(1 for hop in state.path if hop.shard_crossing),
    }


def _offered(synthesis: Synthesis) -> list[Claim] | None:
    """The draft of a withheld answer, a lead to check; none when what the question names is in
    no evidence (a hard refusal), whose draft is about something else."""
    return None if synthesis.refusal in HARD_REFUSALS else synthesis.draft
