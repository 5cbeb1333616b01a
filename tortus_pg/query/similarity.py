"""How close evidence sentences are to the question in the embedder's space, for the reader.

Synthesis reads the same evidence several times per question (after each bridge) and the same
chunks recur across questions, so sentence vectors are remembered by (embedder, text)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from tortus_pg.embed import Embedder

CACHE = 20_000  # sentence vectors remembered
_cache: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
_lock = threading.Lock()


class SentenceSimilarity:
    """Each text's cosine similarity to the question vector (embedders return unit vectors, so a
    dot product), by the named embedder."""

    def __init__(self, embedder: Embedder, question: np.ndarray) -> None:
        self.embedder, self.question = embedder, question

    @property
    def name(self) -> str:
        return self.embedder.name

    def __call__(self, texts: Sequence[str]) -> list[float]:
        """The similarities, in order. The cache is shared by the process's threads: read and
        updated under a lock, never while the embedder runs, and each call answers from what it
        read itself."""
        name = self.embedder.name
        with _lock:
            known = {t: _cache[(name, t)] for t in texts if (name, t) in _cache}
        missing = [t for t in dict.fromkeys(texts) if t not in known]
        if missing:
            known.update({t: np.asarray(v, dtype=np.float32)
                          for t, v in zip(missing, self.embedder.embed(missing), strict=True)})
        with _lock:
            for text, vector in known.items():
                _cache[(name, text)] = vector
                _cache.move_to_end((name, text))
            while len(_cache) > CACHE:
                _cache.popitem(last=False)
        return [float(known[t] @ self.question) for t in texts]
