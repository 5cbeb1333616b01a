"""Logistic models over named signals, fitted on evaluation data: the answer-support model
(`query.support`) and the reader's answer-sentence model (`query.read`) are both of this kind."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Model:
    bias: float
    weights: Mapping[str, float]
    embedder: str | None = None  # whose similarities a dense weight was fitted on

    def probability(self, signals: Mapping[str, float]) -> float:
        """The model's probability, in [0, 1], of the positive class given `signals` (a missing
        signal counts as 0)."""
        z = self.bias + sum(w * float(signals.get(f, 0.0)) for f, w in self.weights.items())
        return 1.0 / (1.0 + math.exp(-z))

    def probabilities(self, signals: Mapping[str, np.ndarray], n: int) -> np.ndarray:
        """`probability` for n items at once, each signal an array over the items."""
        z = np.full(n, self.bias)
        for f, w in self.weights.items():
            if f in signals:
                z = z + w * np.asarray(signals[f], dtype=float)
        return np.asarray(1.0 / (1.0 + np.exp(-z)))


def fit(sets: Sequence[tuple[Sequence[Mapping[str, float]], Sequence[Mapping[str, float]]]],
        features: Sequence[str], l2: float = 1.0, steps: int = 50) -> Model:
    """Logistic regression (Newton's method, L2 penalty on the weights) separating positive from
    negative signals, over `sets` of (positives, negatives). Every side of every set weighs
    alike, so a small set of another style counts as much as a large one, and a rare positive
    class as much as the common negative one."""
    rows, labels, weights = [], [], []
    for positives, negatives in sets:
        if not positives or not negatives:
            raise ValueError("fitting needs positive and negative examples in every set")
        for side, label in ((positives, 1.0), (negatives, 0.0)):
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
