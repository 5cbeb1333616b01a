"""Frontier scoring: how the engine ranks the chunks a walk reached. Replaceable.

A scorer is any function from `Features` to a non-negative float; the engine ranks reached
chunks by it before fusing them with the search ranking. `default_score` multiplies the
factors the design names, each in (0, 1], so no factor can be bought back by another.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Features:
    """What is known about a reached chunk and the path that reached it."""

    similarity: float | None  # cosine similarity of the chunk to the question, in [-1, 1]
    path_strength: float  # product of the walk's hop scores (edge weight x confidence x decay ...)
    hops: int  # edges taken from the seed
    min_confidence: float  # weakest edge confidence on the path (uncertainty = 1 - this)
    evidence_spans: int  # spans backing the path's edges
    defined: bool  # the last hop arrives through a `defines` edge: the chunk defines that concept
    age_days: float  # since the chunk's evidence was last refreshed
    torus_distance: float | None  # to the nearest seed


Scorer = Callable[[Features], float]

FRESHNESS_HALF_LIFE_DAYS = 365.0


def default_score(f: Features) -> float:
    """relevance x path strength x evidence quality x freshness x certainty."""
    relevance = (1 + f.similarity) / 2 if f.similarity is not None else 0.5
    evidence = 1.0 if f.defined else (0.9 if f.evidence_spans else 0.7)
    freshness = 0.8 + 0.2 * math.pow(0.5, max(f.age_days, 0.0) / FRESHNESS_HALF_LIFE_DAYS)
    certainty = 0.5 + 0.5 * min(max(f.min_confidence, 0.0), 1.0)
    return max(relevance, 0.0) * f.path_strength * evidence * freshness * certainty
