"""Disagreement between the sources of an answer, noted where the answer relies on them."""

from __future__ import annotations

from functools import partial
from typing import Any

import psycopg

from tortus_pg import disputes
from tortus_pg.query.state import State


def disagreement(conn: psycopg.Connection, state: State) -> None:
    """Stage: the contradictions stated inside the final evidence, a followed bridge's chunk
    included (stage `contradictions`), and the newer sources that supersede or dispute a quoted
    one wherever that is stated (stage `superseded`). The answer notes those a cited chunk
    states and those against what it quotes."""
    clock, synthesis, cited = state.clock, state.synthesis, state.cited
    no_statements: list[dict[str, Any]] = []
    contradictions = clock.attempt("contradictions", partial(disputes.contradictions, conn,
                                                             [e.node_id for e in state.evidence], state.tenant),
                                   no_statements)
    disputed = [c for c in contradictions if any(disputes.stated_in(c["evidence"], e) for e in cited)]
    overruled = clock.attempt("superseded", partial(disputes.superseded, conn, synthesis.claims, state.evidence,
                                                    state.tenant), no_statements)
    disputed += [c for c in overruled if c not in disputed]
    state.contradictions = contradictions + [c for c in overruled if c not in contradictions]
    if disputed and synthesis.answer is not None:
        synthesis.answer += " Note: the sources disagree: " + "; ".join(c["statement"] for c in disputed)
