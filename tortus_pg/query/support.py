"""How well the evidence supports an answer: one calibrated score, and the threshold to answer.

Synthesis measures signals of the claims it drafts; `Model.support` combines them by logistic
regression into a probability that the question is answerable from this corpus. The weights
are fitted on public multi-hop sets, each question asked twice: over the full corpus
(answerable) and over the corpus without its gold passages (its unanswerable twin, as
MuSiQue-Full builds contrast questions), and on a handbook by another author with its
unanswerable questions. `benchmarks/calibrate.py` fits them from `tortus-pg
eval SET --twins --json-out …` files and prints the curves the threshold is chosen from
(docs/evaluation.md); nothing in them is keyed to a corpus's wording.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

# The share of the question's weight the best evidence chain covers, the best claim's dense
# similarity to the question, and whether the question names something the corpus has a
# document about (a concept some chunk defines). Richer sets (the claims' and all the
# evidence's coverage, the named things found or heading an evidence item, the old rule
# checks) fitted no better on the development sets (docs/benchmarks.md).
FEATURES = ("coverage", "dense", "named")


@dataclass(frozen=True)
class Model:
    bias: float
    weights: Mapping[str, float]
    embedder: str | None = None  # whose similarities a dense weight was fitted on

    def support(self, signals: Mapping[str, float]) -> float:
        """The probability, in [0, 1], that the evidence answers the question."""
        z = self.bias + sum(w * float(signals.get(f, 0.0)) for f, w in self.weights.items())
        return 1.0 / (1.0 + math.exp(-z))


# Fitted by `python benchmarks/calibrate.py --fit hotpotqa musique aldermoor` (multi-hop sets
# with their unanswerable twins, and a handbook with its negatives, each weighing alike);
# checked on 2wiki-train500 and quillon (docs/evaluation.md has the command and the curves).
MODEL = Model(-3.372, {"coverage": 1.84, "dense": 3.448, "named": 1.46}, "minilm:all-MiniLM-L6-v2")
# The same fit without the dense signal: for another embedder (its similarities have another
# scale) or none.
LEXICAL = Model(-1.961, {"coverage": 2.549, "named": 1.561})
THRESHOLD = 0.5  # answer when support is at least this


def model_for(embedder: str | None) -> Model:
    """The support model for the signals at hand: with the dense signal only for the embedder
    it was fitted on."""
    return MODEL if embedder is not None and embedder == MODEL.embedder else LEXICAL


def fit(sets: Sequence[tuple[Sequence[Mapping[str, float]], Sequence[Mapping[str, float]]]],
        features: Sequence[str] = FEATURES, l2: float = 1.0, steps: int = 50) -> Model:
    """Logistic regression (Newton's method, L2 penalty on the weights) separating the signals
    of answerable questions from those of unanswerable ones (twins, negatives), over `sets` of
    (answerable, unanswerable) signals. Every side of every set weighs alike, so a small set
    of another style counts as much as a large one."""
    rows, labels, weights = [], [], []
    for answerable, unanswerable in sets:
        if not answerable or not unanswerable:
            raise ValueError("fitting needs answerable and unanswerable questions in every set")
        for side, label in ((answerable, 1.0), (unanswerable, 0.0)):
            rows += [[1.0, *(float(s.get(f, 0.0)) for f in features)] for s in side]
            labels += [label] * len(side)
            weights += [1.0 / len(side)] * len(side)
    x, y = np.array(rows), np.array(labels)
    share = np.array(weights) * len(y) / sum(weights)
    penalty = l2 * np.diag([0.0, *np.ones(len(features))])
    w = np.zeros(x.shape[1])
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(x @ w)))
        gradient = x.T @ (share * (p - y)) + penalty @ w
        hessian = x.T @ (x * (share * p * (1 - p))[:, None]) + penalty
        w -= np.linalg.solve(hessian, gradient)
    return Model(round(float(w[0]), 3), {f: round(float(v), 3) for f, v in zip(features, w[1:], strict=True)})
