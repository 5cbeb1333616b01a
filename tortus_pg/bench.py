"""`tortus-pg bench`: where the query engine's time goes, stage by stage, and where its answers
are lost, over a set of questions."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import psycopg

from tortus_pg.embed import Embedder
from tortus_pg.engine import answer
from tortus_pg.errors import InvalidInput
from tortus_pg.eval.datasets import Question
from tortus_pg.eval.metrics import contains_answer
from tortus_pg.query.refusal import Refusal


@dataclass(frozen=True)
class StageTiming:
    stage: str
    questions: int  # that ran the stage (a second walk or a bridge runs for some only)
    mean_ms: float
    p95_ms: float


def stage_timings(
    conn: psycopg.Connection, questions: Sequence[str], embedder: Embedder | None, *, ts_config: str = "english",
    on_progress: Callable[[int, int], None] | None = None,
) -> list[StageTiming]:
    """Ask each question with the default policy (inside a tenant scope; no trace stored) and
    summarize the engine's per-stage timings, slowest first; `embed + stages` is each question's
    whole time. The first question is asked once before timing, so a model load is not counted."""
    if not questions:
        raise InvalidInput("no questions to time")
    answer(conn, questions[0], embedder=embedder, store=False, ts_config=ts_config)
    stages: dict[str, list[float]] = {}
    for done, question in enumerate(questions, 1):
        timings = answer(conn, question, embedder=embedder, store=False, ts_config=ts_config).diagnostics["timings"]
        for name, ms in timings.items():
            stages.setdefault("stages" if name == "total_ms" else name.removesuffix("_ms"), []).append(ms)
        stages.setdefault("embed + stages", []).append(timings["embed_ms"] + timings["total_ms"])
        if on_progress is not None:
            on_progress(done, len(questions))
    rows = [StageTiming(name, len(ms), float(np.mean(ms)), float(np.percentile(ms, 95))) for name, ms in stages.items()]
    return sorted(rows, key=lambda r: -r.mean_ms)


@dataclass
class AnswerLosses:
    """Where the answers to a set of questions are lost. The expected text counts as in the
    evidence when any evidence chunk contains it (as the eval's answer match does, ignoring case)."""

    answerable: int = 0
    answered: int = 0
    matched: int = 0  # the answer contains the expected text
    in_evidence: int = 0  # the evidence contains it
    wrong_with_evidence: int = 0  # answered without it although the evidence has it
    withheld_with_evidence: Counter[Refusal | None] = field(default_factory=Counter)  # why -> questions
    negatives: int = 0
    negatives_withheld: int = 0


def answer_losses(
    conn: psycopg.Connection, questions: Sequence[Question], embedder: Embedder | None, *, ts_config: str = "english",
    on_progress: Callable[[int, int], None] | None = None,
) -> AnswerLosses:
    """Ask each question with the default policy (inside a tenant scope; no trace stored) and
    count where the answers are lost: withheld or wrong although the evidence holds the answer."""
    if not questions:
        raise InvalidInput("no questions to ask")
    losses = AnswerLosses()
    for done, question in enumerate(questions, 1):
        out = answer(conn, question.text, embedder=embedder, store=False, ts_config=ts_config)
        expected = (question.answer, *question.aliases)
        if question.is_negative:
            losses.negatives += 1
            losses.negatives_withheld += out.withheld
        elif any(expected):  # BEIR queries have gold passages but no answer text
            losses.answerable += 1
            losses.answered += not out.withheld
            matched = not out.withheld and bool(contains_answer(out.answer, expected))
            losses.matched += matched
            if any(contains_answer(e.text, expected) for e in out.evidence):
                losses.in_evidence += 1
                if out.withheld:
                    losses.withheld_with_evidence[out.refusal] += 1
                elif not matched:
                    losses.wrong_with_evidence += 1
        if on_progress is not None:
            on_progress(done, len(questions))
    return losses
