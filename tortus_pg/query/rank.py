"""The ranking of every candidate chunk: the search hits fused with the walk's strong evidence,
then the rest of the walk, by the replaceable scorer."""

from __future__ import annotations

from collections.abc import Sequence

import psycopg

from tortus_pg.evidence import Chunk, Reached, chunk_info
from tortus_pg.query.state import State
from tortus_pg.retrieve import Hit, rrf
from tortus_pg.scoring import Features, Scorer

FUSE_SEEDS = 2  # definitions reached from these seeds are fused with the search ranking


def rank(conn: psycopg.Connection, state: State) -> None:
    """Stage: what ranking needs of the hits and the chunks the walk reached (stage
    `candidates`), and their ranking (`ranked`)."""
    state.info = candidates(conn, state, [*(h.node_id for h in state.hits), *(r.node_id for r in state.reached)])
    rerank(state)


def candidates(conn: psycopg.Connection, state: State, ids: list[int]) -> dict[int, Chunk]:
    """The chunks among `ids` (stage `candidates`), with their similarity to the question."""
    return state.clock.attempt("candidates", lambda: chunk_info(conn, ids, state.question.vector), {})


def rerank(state: State) -> None:
    """The ranking of the candidates, and the scorer's score of each chunk the walk reached."""
    state.ranking, state.scores = ranked(state.hits, state.reached, state.info, state.options.scorer, state.roots)


def ranked(
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
