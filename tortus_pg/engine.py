"""The query engine: a question in; evidence, the paths that reached it and an answer out.

The question is analysed once (`query.question`); then each stage reads and extends one state
(`query.state`): hybrid seeding -> a bounded walk over typed edges with a density-aware torus
radius -> the ranking of what search and walk found (a replaceable `Scorer`) -> portal hops when
the ranking covers too little -> evidence selection under the hop, time and token budgets ->
grounded synthesis (`synth`), following the bridges it names -> the chain of typed relations a
"Which …" question asks for -> the path behind the answer -> disagreement between its sources.
The trace is stored in `tortus.query_trace` (`trace`). Every SQL stage runs under a statement
timeout taken from the remaining time (`query.clock`); a stage cut short leaves the answer
degraded, not failed, and says so.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import psycopg

from tortus_pg import telemetry
from tortus_pg.db import generic_plans
from tortus_pg.embed import Embedder
from tortus_pg.errors import InvalidInput
from tortus_pg.evidence import Evidence
from tortus_pg.policy import TraversalPolicy
from tortus_pg.query.answer import answer_by_relation, answer_from_evidence
from tortus_pg.query.clock import Clock
from tortus_pg.query.disagreement import disagreement
from tortus_pg.query.explain import budget, diagnostics, explain
from tortus_pg.query.portals import through_portals
from tortus_pg.query.question import analyse
from tortus_pg.query.rank import rank
from tortus_pg.query.refusal import Refusal
from tortus_pg.query.results import Budget, Claim, PathHop
from tortus_pg.query.seed import seed
from tortus_pg.query.select import select
from tortus_pg.query.state import Options, State
from tortus_pg.query.tenant_policy import for_tenant
from tortus_pg.query.walk import walk
from tortus_pg.retrieve import check_text, embed_query
from tortus_pg.scoring import Scorer, default_score
from tortus_pg.synth import Synthesizer
from tortus_pg.trace import store_trace

MAX_EVIDENCE = 50

Stage = Callable[[psycopg.Connection, State], None]
STAGES: tuple[Stage, ...] = (
    seed,
    walk,
    rank,
    through_portals,
    select,
    answer_from_evidence,
    answer_by_relation,
    explain,
    disagreement,
)


@dataclass
class Answer:
    """The answer to a question (or why it is withheld) with the evidence, the path that reached
    it, the budget it used and what each stage found."""

    question: str
    answer: str | None
    withheld: bool
    confidence: float
    path: list[PathHop]
    evidence: list[Evidence]
    claims: list[Claim]
    warnings: list[str]
    budget: Budget
    diagnostics: dict[str, Any]
    ranking: list[int] = field(default_factory=list)  # every candidate chunk, best first
    trace_id: int | None = None
    refusal: Refusal | None = None  # why it is withheld

    @property
    def short_answer(self) -> str | None:
        """The span of the asked type in the claim that answers, when the reader found one."""
        if self.withheld:
            return None
        return next((c.short_answer for c in self.claims if c.short_answer), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "question": self.question, "answer": self.answer, "short_answer": self.short_answer,
            "withheld": self.withheld, "refusal": self.refusal.name if self.refusal else None,
            "confidence": round(self.confidence, 4), "path": [hop.to_json() for hop in self.path],
            "evidence": [
                {"node_id": e.node_id, "label": e.label, "uri": e.uri, "span": [e.start, e.end], "page": e.page,
                 "text": e.text, "score": round(e.score, 6), "origin": e.origin}
                for e in self.evidence
            ],
            "claims": [c.to_json() for c in self.claims], "warnings": self.warnings, "budget": self.budget.to_json(),
            "diagnostics": self.diagnostics, "trace_id": self.trace_id,
        }


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
    check_text(question, "question")
    if not 1 <= k <= MAX_EVIDENCE:
        raise InvalidInput(f"k must be between 1 and {MAX_EVIDENCE} evidence chunks")
    policy = for_tenant(conn, policy)
    # The question is embedded before the clock starts: the first call may load a local model,
    # which is not the question's cost. Its time is reported with the stages.
    began = time.perf_counter()
    vector = embed_query(embedder, question, "the query engine")
    embed_ms = round((time.perf_counter() - began) * 1000, 2)
    clock = Clock(conn, policy.max_ms)
    clock.timings["embed_ms"] = embed_ms
    options = Options(embedder, policy, k, ts_config, scorer, synthesizer, layout)
    # The stages' savepoints need a transaction: an autocommit connection gets one for the plan.
    idle = conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    with telemetry.span("tortus.query", max_hops=policy.max_hops, max_ms=policy.max_ms, max_tokens=policy.max_tokens,
                        k=k, embed_ms=embed_ms) as span, conn.transaction() if idle else nullcontext(), \
            generic_plans(conn):
        before = conn.execute("select current_setting('statement_timeout'), tortus.current_tenant()").fetchone()
        tenant = before[1] if before else None
        try:
            state = State(analyse(conn, question, vector, clock, policy, ts_config, tenant), options, clock,
                          list(warnings), tenant)
            for stage in STAGES:
                stage(conn, state)
            result = _answer(state)
            span.set(evidence_node_ids=[e.node_id for e in result.evidence], withheld=result.withheld,
                     refusal=result.refusal.name if result.refusal else None, **telemetry.budget_use(result.budget))
        finally:
            clock.close()
            restore = before[0] if before else "0"
            conn.execute("select set_config('statement_timeout', %s, true)", [restore])
    if store:
        result.trace_id = _stored(conn, result, policy, clock.remaining_ms())
    return result


TRACE_FLOOR_MS = 100  # a trace may take this long even when the question's budget is spent


def _stored(conn: psycopg.Connection, result: Answer, policy: TraversalPolicy, remaining_ms: int) -> int | None:
    """The answer's trace id, stored within what is left of the time budget: a trace table that
    is locked or slow costs the answer its trace (with a warning), never the budget."""
    limit = max(remaining_ms, TRACE_FLOOR_MS)
    timeouts = "select set_config('statement_timeout', %s, true), set_config('lock_timeout', %s, true)"
    try:
        with conn.transaction():
            before = conn.execute("select current_setting('statement_timeout'), current_setting('lock_timeout')"
                                  ).fetchone()
            conn.execute(timeouts, [str(limit), str(limit)])
            trace_id = store_trace(conn, result, policy)
            conn.execute(timeouts, list(before or ("0", "0")))  # what the caller's transaction had
            return trace_id
    except (psycopg.errors.QueryCanceled, psycopg.errors.LockNotAvailable):
        result.warnings.append(f"the trace was not stored: it did not get through within {limit} ms")
        return None


def _answer(state: State) -> Answer:
    """The answer the stages reached, with the warnings of synthesis and of a time budget that ran out."""
    synthesis, clock, policy = state.synthesis, state.clock, state.options.policy
    state.notes += synthesis.warnings
    if clock.degraded:
        state.notes.append(f"degraded: the time budget ({policy.max_ms} ms) ran out at stage(s) "
                           f"{', '.join(clock.degraded)}")
    clock.timings["total_ms"] = round(clock.elapsed_ms(), 2)
    return Answer(state.question.text, synthesis.answer, synthesis.withheld, synthesis.confidence, state.path,
                  state.evidence, synthesis.claims, state.notes, budget(state), diagnostics(state), state.ranking,
                  refusal=synthesis.refusal)
