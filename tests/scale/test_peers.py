"""The scale suite's BM25 peer ranks as bm25s's own retrieval does."""

from __future__ import annotations

import numpy as np
import pytest

from tortus_pg.scale.peers import bm25s_search

bm25s = pytest.importorskip("bm25s")
Stemmer = pytest.importorskip("Stemmer")


def test_the_bm25s_peer_finds_the_top_k_bm25s_retrieves() -> None:
    rng = np.random.default_rng(7)
    words = [f"word{i}" for i in range(400)]
    weights = 1 / np.arange(1, 401) ** 1.1
    texts = [" ".join(rng.choice(words, 30, p=weights / weights.sum())) for _ in range(300)]
    questions = [" ".join(rng.choice(words[:200], 3)) for _ in range(40)]
    search = bm25s_search(texts, 10)
    assert search is not None
    stemmer = Stemmer.Stemmer("english")
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False)
    for question in questions:
        found = search(question)
        _, expected = retriever.retrieve(bm25s.tokenize([question], stopwords="en", stemmer=stemmer,
                                                        show_progress=False), k=10, show_progress=False)
        tokens = bm25s.tokenize([question], stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False)[0]
        scores = retriever.get_scores([t for t in tokens if t in retriever.vocab_dict])
        assert len(found) == 10
        # The same scores in the same order (documents of equal score may come in another order).
        assert np.allclose(scores[found], expected[0])
