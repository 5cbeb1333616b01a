"""Abstention as a curve: what an answer threshold trades between answering the answerable
questions and withholding their unanswerable twins.

Every answer (or withheld draft) carries a support score in [0, 1]. At threshold t, a reply is
shown when its support is at least t (and above zero: a hard refusal has none). Sweeping t
gives, for answerable questions, the share answered and the share answered with the expected
text, and for their twins (`datasets.twins`), the share withheld. The engine's threshold is
chosen on development sets from such curves (docs/evaluation.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

THRESHOLDS = tuple(round(t, 2) for t in np.arange(0.0, 1.0001, 0.05))


@dataclass(frozen=True)
class CurvePoint:
    threshold: float
    answered_when_answerable: float
    answer_match: float  # answered with the expected text
    withheld_when_unanswerable: float

    @property
    def balanced(self) -> float:
        """The mean of answered-when-answerable and withheld-when-unanswerable."""
        return (self.answered_when_answerable + self.withheld_when_unanswerable) / 2


def curve(
    answerable: Sequence[tuple[float, bool]], unanswerable: Sequence[float],
    thresholds: Sequence[float] = THRESHOLDS,
) -> list[CurvePoint]:
    """The curve from (support, reply holds the expected text) of each answerable question and
    the support of each unanswerable one."""
    if not answerable or not unanswerable:
        raise ValueError("a curve needs answerable and unanswerable questions")
    support = np.array([s for s, _ in answerable])
    matched = np.array([m for _, m in answerable])
    twin = np.array(unanswerable)
    points = []
    for t in thresholds:
        shown = (support >= t) & (support > 0)
        points.append(CurvePoint(float(t), float(shown.mean()), float((shown & matched).mean()),
                                 float(((twin < t) | (twin <= 0)).mean())))
    return points


def from_results(answerable: Sequence[dict[str, Any]], twins: Sequence[dict[str, Any]]) -> list[CurvePoint]:
    """The curve from the per-question metrics of an answering strategy on a dataset and on its twins."""
    return curve([(float(m.get("support", 0.0)), bool(m.get("reply_match"))) for m in answerable],
                 [float(m.get("support", 0.0)) for m in twins])


def best_balance(points: Sequence[CurvePoint]) -> CurvePoint:
    """The point whose mean of answered-when-answerable and withheld-when-unanswerable is highest
    (of equals, the highest threshold: it withholds no fewer): a starting point for choosing a
    corpus's `min_support`, to check on questions it was not chosen on."""
    return max(points, key=lambda p: (round(p.balanced, 9), p.threshold))


def to_json(points: Sequence[CurvePoint]) -> list[dict[str, float]]:
    return [{k: round(v, 4) for k, v in asdict(p).items()} for p in points]


def plot(points: Sequence[CurvePoint], title: str, out: Path, chosen: float | None = None) -> Path:
    """A PNG of the curve against the threshold, with the chosen threshold marked."""
    fig = Figure(figsize=(6, 4), layout="constrained")
    ax = fig.add_subplot()
    x = [p.threshold for p in points]
    ax.plot(x, [p.answered_when_answerable for p in points], marker="o", label="answered when answerable")
    ax.plot(x, [p.answer_match for p in points], marker="s", label="answered with the expected text")
    ax.plot(x, [p.withheld_when_unanswerable for p in points], marker="^", label="withheld when unanswerable")
    if chosen is not None:
        ax.axvline(chosen, color="grey", linestyle="--", label=f"threshold {chosen:.2f}")
    ax.set(xlabel="support threshold", ylabel="share of questions", ylim=(0, 1.02), title=title)
    ax.legend(loc="lower left", fontsize="small")
    fig.savefig(out, dpi=120)
    return out
