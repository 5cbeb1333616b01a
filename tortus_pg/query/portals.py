"""Portal hops when the ranking covers too little of the question: one more walk that may cross
to another part of the torus."""

from __future__ import annotations

from collections.abc import Sequence

import psycopg

from tortus_pg.query.rank import candidates, rerank
from tortus_pg.query.state import State
from tortus_pg.query.terms import coverage_of
from tortus_pg.query.walk import walked

LOW_COVERAGE = 0.5  # below this share of the question's weight, portals are worth a hop

_PORTALS_FROM = """
select count(*) from (select 1 from tortus.portal p
                      where p.tenant_id = tortus.current_tenant() and p.src = any(%s::bigint[]) limit 1) x
"""


def through_portals(conn: psycopg.Connection, state: State) -> None:
    """Stage: when the k best chunks cover less than LOW_COVERAGE of the question's weight (stage
    `coverage`) and the policy leaves portals to coverage (`auto`, not local-only) but the walk
    was allowed none, one more walk with a portal hop (stage `portal_walk`) if a portal leaves
    the nodes reached (stage `portals_near`); what it reaches joins the candidates and the
    ranking."""
    q, options, policy, clock = state.question, state.options, state.options.policy, state.clock
    terms = q.terms
    coverage = 1.0 if terms is None else clock.attempt("coverage", lambda: coverage_of(
        conn, terms, [state.info[n].text for n in state.ranking[: options.k] if n in state.info], options.ts_config),
        1.0)
    portals = state.walk_policy["max_portal_hops"]
    if coverage >= LOW_COVERAGE or portals or policy.portal_preference != "auto" or policy.local_only:
        return
    nodes = [*state.walk_seeds, *(r.node_id for r in state.reached)]
    if not clock.attempt("portals_near", lambda: _portal_leaves(conn, nodes), False):
        state.portals.append({"stage": "portal_walk", "allowed": False,
                              "why": f"coverage {coverage:.2f} is low, but no portal leaves the nodes reached"})
        return
    state.walk_policy = {**state.walk_policy, "max_portal_hops": 1}
    again = clock.attempt("portal_walk", lambda: walked(conn, state), None)
    state.portals.append({"stage": "portal_walk", "allowed": True,
                          "why": f"coverage {coverage:.2f} of the question is below {LOW_COVERAGE}"})
    if again is not None:
        state.reached, state.pruned = again
        state.info = {**state.info, **candidates(conn, state, [r.node_id for r in state.reached
                                                               if r.node_id not in state.info])}
        rerank(state)


def _portal_leaves(conn: psycopg.Connection, nodes: Sequence[int]) -> bool:
    row = conn.execute(_PORTALS_FROM, [list(nodes)]).fetchone()
    return bool(row and row[0] > 0)
