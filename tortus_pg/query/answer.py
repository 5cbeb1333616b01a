"""The answer: grounded synthesis over the evidence chains, the bridges it names followed to
the rest of the answer, or the chain of typed relations a "Which …" question asks for."""

from __future__ import annotations

from functools import partial

import psycopg

from tortus_pg import bridges, relations
from tortus_pg.evidence import Evidence, Reached
from tortus_pg.query.chains import chains, link
from tortus_pg.query.compare import in_heading, role_sentence, titles
from tortus_pg.query.question import labels
from tortus_pg.query.refusal import HARD_REFUSALS
from tortus_pg.query.similarity import SentenceSimilarity
from tortus_pg.query.state import State
from tortus_pg.synth import Similarity, Synthesis, evidence_sentences, synthesize


def answer_from_evidence(conn: psycopg.Connection, state: State) -> None:
    """Stage: the answer from the evidence (stage `synthesis`, none without the question's
    terms). The answer may stop at a bridge ("... caused by Key Vault"), or a withheld draft may
    name one: it is followed to what the question still asks (stage `bridge`) and the answer is
    synthesized again, while the hop budget allows. A bridge is two hops, so the budget pays for
    one bridge per two hops (a second bridge from another claim under a three-hop budget
    answered 7 more musique questions, 6 of them wrongly). A comparison first reads the evidence
    about each option (`_option_documents`) and, through a role, follows each option to the
    person it names in that role (`_role_hops`)."""
    q, options, clock = state.question, state.options, state.clock
    if q.terms is None:
        return
    similarity = SentenceSimilarity(options.embedder, q.vector) if options.embedder is not None else None
    synthesized = partial(_synthesized, conn, state, similarity)
    if _option_documents(state):
        link(conn, state)
    state.synthesis = clock.attempt("synthesis", synthesized, state.synthesis)
    if _role_hops(conn, state):
        link(conn, state)
        state.synthesis = clock.attempt("synthesis", synthesized, state.synthesis)
    # The concepts the question names, and what they implement, are not bridges worth following.
    mentioned = [*q.concepts, *(i.standard for i in state.implements)]
    for _ in range(options.policy.max_hops // 2):
        said = state.synthesis.claims or state.synthesis.draft
        if not said or state.synthesis.refusal in HARD_REFUSALS or not _bridged(conn, state, mentioned):
            break
        link(conn, state)
        state.synthesis = clock.attempt("synthesis", synthesized, state.synthesis)


def _synthesized(conn: psycopg.Connection, state: State, similarity: Similarity | None) -> Synthesis:
    options = state.options
    return synthesize(conn, state.question, state.evidence, chains(state.evidence, state.routes, state.links),
                      ts_config=options.ts_config, synthesizer=options.synthesizer, similarity=similarity,
                      bridges=options.policy.max_hops >= 2, min_support=options.policy.min_support)


def _bridged(conn: psycopg.Connection, state: State, mentioned: list[int]) -> bool:
    """Whether a bridge the answer names led to a chunk (stage `bridge`) that now joins the
    evidence, in place of the last items nothing quotes when the token budget is full, and
    ranks just after the chunk it was followed from."""
    options = state.options
    bridge = state.clock.attempt("bridge", partial(
        bridges.follow, conn, mentioned, state.synthesis, state.evidence, state.routes, state.info,
        state.question.vector, options.policy, options.ts_config, state.tenant), None)
    return bridge is not None and _joined(state, bridge)


def _option_documents(state: State) -> bool:
    """Whether a comparison's option that heads no evidence item gained the best-ranked candidate
    chunk (of search or walk) that its document or a section heads, in place of the last evidence
    items when the token budget is full: a comparison is read from the evidence about each option."""
    judged = state.question.comparison or state.question.sameness or state.question.membership
    if judged is None:
        return False
    joined = False
    for option in judged.options:
        if any(titles(option, e.label) for e in state.evidence):
            continue
        taken = {e.node_id for e in state.evidence}
        found = next((n for n in state.ranking if n in state.info and n not in taken
                      and titles(option, state.info[n].label)), None)
        if found is None:
            continue
        chunk = state.info[found]
        kept = bridges.make_room(state.evidence, state.synthesis, found,
                                 state.options.policy.max_tokens - len(chunk.text.split()))
        if kept is not None:
            state.evidence = [*kept, chunk.evidence(found, "walk" if found in state.routes else "seed")]
            joined = True
    return joined


def _role_hops(conn: psycopg.Connection, state: State) -> bool:
    """Whether a comparison through a role ("Which film has the director born first, A or B?",
    "Are the directors of A and B from the same country?") gained, for an option whose sentence
    names its person in that role while no evidence item is about that person, the chunk of that
    person's own document (stage `bridge`). Each option's hop is a chain of its own (chunk ->
    person -> chunk), within the hop budget like any bridge; a comparison needs both."""
    q, options = state.question, state.options
    judged = q.comparison or q.sameness or q.membership
    if judged is None or judged.role is None or q.terms is None:
        return False
    joined = False
    for option in judged.options:
        sentences, labels = evidence_sentences(state.evidence), [e.label for e in state.evidence]
        found = role_sentence(option, judged.role, sentences, labels)
        if found is None or any(in_heading(found[1][0], label) for label in labels):
            continue
        said, item = sentences[found[0]], state.evidence[sentences[found[0]].evidence]
        hop = state.clock.attempt("bridge", partial(
            bridges.follow_named, conn, found[1], item, (item.start + said.start, item.start + said.end),
            list(q.terms.weights), state.evidence, state.routes, state.info, q.vector, options.policy,
            options.ts_config, state.tenant), None)
        joined = (hop is not None and _joined(state, hop)) or joined
    return joined


def _joined(state: State, bridge: tuple[Evidence, Reached]) -> bool:
    """Whether the chunk a bridge led to joins the evidence, in place of the last items nothing
    quotes when the token budget is full, ranking just after the chunk it was followed from."""
    options = state.options
    item, reach = bridge
    source = reach.path[-3]  # the path ends: chunk followed from -> bridge entity -> chunk found
    room = options.policy.max_tokens - len(item.text.split())
    kept = bridges.make_room(state.evidence, state.synthesis, source, room)
    if kept is None:
        return False
    state.evidence = [*kept, item]
    state.routes[item.node_id] = reach
    state.ranking = bridges.after(state.ranking, reach.path[0], item.node_id)
    return True


def answer_by_relation(conn: psycopg.Connection, state: State) -> None:
    """Stage: "Which team / system / decision / incident …", "Who leads the team …": the chain
    of typed relations from what the question names to a node of that kind answers it, when
    one covers the question (stage `relations`); when it names nothing a chain starts from and
    the evidence read alone was withheld, the chain from what the first evidence documents are
    about (a thing the question describes: `relations.described_relation`). Its edges' spans are
    the claims, the chunks holding them lead the evidence (stage `relation_evidence`) and the
    chain is their path. Not with an LLM synthesizer; a question that asks for no kind pays
    nothing."""
    q, options, clock = state.question, state.options, state.clock
    if options.synthesizer is not None or q.target is None or q.terms is None:
        return
    chain = clock.attempt("relations", partial(relations.best_relation, conn, q.target, q.terms, q.concepts,
                                               options.policy.max_hops, options.ts_config), None)
    if chain is None and state.synthesis.refusal is not None:
        # Nothing it names leads there, and the evidence read alone was not enough.
        chain = clock.attempt("relations", partial(
            relations.described_relation, conn, q.target, q.terms, labels(conn, q.concepts), state.evidence,
            options.policy.max_hops, options.ts_config), None)
    related = None if chain is None else clock.attempt("relation_evidence", partial(
        relations.answer, conn, chain, state.evidence, q.vector, options.k, options.policy.max_tokens), None)
    if chain is None or related is None or _leaves_group(
            conn, [h.chunk for h in chain.hops if h.chunk is not None], options.policy.semantic_group):
        return
    state.evidence, state.synthesis, paths = related
    state.routes.update(paths)
    link(conn, state)


_OUTSIDE = """
select exists (select 1 from unnest(%s::bigint[]) c(node_id)
               where not exists (select 1 from tortus.membership m where m.tenant_id = tortus.current_tenant()
                                   and m.node_id = c.node_id and m.subgraph = %s))
"""


def _leaves_group(conn: psycopg.Connection, chunks: list[int], group: str | None) -> bool:
    """Whether a chain quotes a chunk outside the policy's semantic group (which keeps every
    hop, as it keeps the walk, inside that subgraph)."""
    if group is None or not chunks:
        return False
    row = conn.execute(_OUTSIDE, [chunks, group]).fetchone()
    return bool(row and row[0])
