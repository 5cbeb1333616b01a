"""Torus coordinates for chunk nodes, from their embeddings.

`torus` reads two circular coordinates off the first four principal components (the angle of
components 1-2, and of 3-4), so nearby embeddings get nearby angles and wrap-around is
meaningful. `euclidean` spreads the first two components over the square without wrap-around
meaning, and `random` ignores the embeddings: both exist so evaluation can ablate the layout.
"""

from __future__ import annotations

import numpy as np

from tortus_pg.errors import InvalidInput

LAYOUTS = ("torus", "euclidean", "random")
TAU = 2 * np.pi


def _components(x: np.ndarray, k: int) -> np.ndarray:
    centered = x - x.mean(axis=0)
    _, _, vt = np.linalg.svd(centered, full_matrices=False)
    out: np.ndarray = centered @ vt[:k].T
    if out.shape[1] < k:  # fewer points or dimensions than components
        out = np.hstack([out, np.zeros((out.shape[0], k - out.shape[1]))])
    return out


def _ranks(v: np.ndarray) -> np.ndarray:
    """Values spread evenly over [0, 2*pi) by rank, so clusters do not pile up at one angle."""
    order = np.argsort(np.argsort(v, kind="stable"), kind="stable")
    return (order + 0.5) / len(v) * TAU


def coordinates(embeddings: np.ndarray, layout: str = "torus", seed: int = 0) -> np.ndarray:
    """(n, 2) array of (theta, phi) in [0, 2*pi) for n embeddings."""
    if layout not in LAYOUTS:
        raise InvalidInput(f"unknown layout {layout!r}; choose from {', '.join(LAYOUTS)}")
    n = len(embeddings)
    if n == 0:
        return np.zeros((0, 2))
    if layout == "random":
        return np.random.default_rng(seed).uniform(0, TAU, size=(n, 2))
    pcs = _components(np.asarray(embeddings, dtype=np.float64), 4)
    if layout == "euclidean":
        return np.column_stack([_ranks(pcs[:, 0]), _ranks(pcs[:, 1])])
    theta = np.mod(np.arctan2(pcs[:, 1], pcs[:, 0]), TAU)
    phi = np.mod(np.arctan2(pcs[:, 3], pcs[:, 2]), TAU)
    # mod can return exactly 2*pi for -0.0 inputs; the schema wants [0, 2*pi).
    return np.column_stack([np.where(theta >= TAU, 0.0, theta), np.where(phi >= TAU, 0.0, phi)])
