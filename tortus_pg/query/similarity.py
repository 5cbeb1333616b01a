"""How close evidence sentences are to the question in the embedder's space, for the reader.

Synthesis reads the same evidence several times per question (after each bridge) and the same
chunks recur across questions, so sentence vectors are remembered by (embedder, text)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from tortus_pg.embed import Embedder

CACHE = 20_000  # sentence vectors remembered
_cache: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()


class SentenceSimilarity:
    """Each text's cosine similarity to the question vector (embedders return unit vectors, so a
    dot product), by the named embedder."""

    def __init__(self, embedder: Embedder, question: np.ndarray) -> None:
        self.embedder, self.question = embedder, question

    @property
    def name(self) -> str:
        return self.embedder.name

    def __call__(self, texts: Sequence[str]) -> list[float]:
        name = self.embedder.name
        missing = list(dict.fromkeys(t for t in texts if (name, t) not in _cache))
        if missing:
            for text, vector in zip(missing, self.embedder.embed(missing), strict=True):
                _cache[(name, text)] = np.asarray(vector, dtype=np.float32)
        out = []
        for text in texts:
            _cache.move_to_end((name, text))
            out.append(float(_cache[(name, text)] @ self.question))
        while len(_cache) > CACHE:
            _cache.popitem(last=False)
        return out
