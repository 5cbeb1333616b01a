"""Evidence selection: the best-ranked chunks that fit the token budget, spread over documents."""

from __future__ import annotations

from collections.abc import Collection, Sequence

import psycopg

from tortus_pg.evidence import Chunk, Evidence
from tortus_pg.query.chains import link
from tortus_pg.query.state import State
from tortus_pg.retrieve import Hit

WALK_SLOTS = 2  # evidence places kept for chunks the walk reached
MAX_PER_SOURCE = 2  # evidence chunks from one document while others are left


def select(conn: psycopg.Connection, state: State) -> None:
    """Stage: the evidence (`select_evidence`), how the walk reached each chunk, and the links
    among the chunks (`chains.link`)."""
    options = state.options
    state.evidence = select_evidence(state.ranking, state.info, state.hits, state.scores, options.k,
                                     options.policy.max_tokens, state.question.defining)
    state.routes = {r.node_id: r for r in state.reached}
    link(conn, state)


def select_evidence(
    ranking: Sequence[int], info: dict[int, Chunk], hits: Sequence[Hit], scores: dict[int, float], k: int,
    max_tokens: int, defining: Collection[int] = (),
) -> list[Evidence]:
    """The best-ranked chunks that fit the token budget (at least the first, cut to fit), at most
    MAX_PER_SOURCE from one document while others are left (a second document reached through
    the graph is worth more than a fourth section of the first). The best-ranked chunk
    `defining` a thing the question names follows the best search hit: it is what the corpus
    says the thing is (a team page's opening with its lead, a clause), whichever section of its
    document matched the words best."""
    seeds = {h.node_id: h for h in hits}
    ordered = [n for n in ranking if n in info]
    per_source: dict[str, int] = {}
    first_pass = []
    for n in ordered:
        if per_source.get(info[n].uri, 0) < MAX_PER_SOURCE:
            per_source[info[n].uri] = per_source.get(info[n].uri, 0) + 1
            first_pass.append(n)
    searched = [n for n in first_pass if n not in scores]
    # The walk's best chunks from other documents get the last WALK_SLOTS places: the second hop
    # an answer needs is often a section that mentions the bridge concept rather than the
    # document defining it.
    own = [n for n in ordered if n in defining][:1]
    head = list(dict.fromkeys([*searched[:1], *own, *searched]))[: max(k - WALK_SLOTS, 1)]
    seen = {info[n].uri for n in head}
    walked = sorted((n for n in scores if n in info and info[n].uri not in seen), key=lambda n: (-scores[n], n))
    candidates = list(dict.fromkeys([*head, *walked[:WALK_SLOTS], *first_pass, *ordered]))
    return _within_budget(candidates, info, seeds, scores, k, max_tokens)


def _within_budget(
    candidates: Sequence[int], info: dict[int, Chunk], seeds: dict[int, Hit], scores: dict[int, float], k: int,
    max_tokens: int,
) -> list[Evidence]:
    """The first k candidates that fit `max_tokens` words together; the first is cut to fit."""
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
    return chosen
