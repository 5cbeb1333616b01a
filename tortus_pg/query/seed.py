"""Where the walk starts: the question's best hybrid search hits, the concepts it names, and
what those implement."""

from __future__ import annotations

from functools import partial

import psycopg

from tortus_pg.query.implements import implemented
from tortus_pg.query.state import State
from tortus_pg.retrieve import search

SEEDS = 20  # hybrid hits considered
WALK_SEEDS = 5  # of which the walk starts from the best


def seed(conn: psycopg.Connection, state: State) -> None:
    """Stage: the hybrid search hits (stage `seed`), the best of which start the walk, and what
    the concepts the question names implement (stage `implements`)."""
    q, options, clock = state.question, state.options, state.clock
    state.hits = clock.attempt("seed", lambda: search(
        conn, q.text, mode="hybrid", k=SEEDS, embedder=options.embedder, ts_config=options.ts_config,
        query_vector=q.vector, tenant=state.tenant), [])
    state.walk_seeds = [h.node_id for h in state.hits[:WALK_SEEDS]]
    # What a named thing implements (a standard, a clause, a decision) applies to it: a defined
    # one starts the walk too, and synthesis may quote it.
    state.implements = clock.attempt("implements", partial(implemented, conn, q.named), []) if q.named else []
    state.roots = list(dict.fromkeys([*q.named, *(i.standard for i in state.implements if i.defined)]))
