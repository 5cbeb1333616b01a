"""`tortus-pg bench`: where the query engine's time goes, stage by stage, over a set of questions."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import psycopg

from tortus_pg.embed import Embedder
from tortus_pg.engine import answer
from tortus_pg.errors import InvalidInput


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
