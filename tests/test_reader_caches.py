"""The reader's caches (lexemes, sentence vectors) are shared by every thread of a process (API
workers, the scale suite's clients): concurrent readers evicting each other's entries still get
each text's own."""

import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from tortus_pg.db import connect
from tortus_pg.embed import HashEmbedder
from tortus_pg.query import similarity, terms


def test_threads_evicting_each_others_entries_get_their_own_lexemes(
    db_url: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    texts = [[f"Service {c} owns cluster number {n} in region {c}{n}" for n in range(40)] for c in "abcd"]
    with connect(db_url) as conn:  # the reference: one reader, nothing evicted while it reads
        expected = {t: words for own in texts for t, words in zip(own, terms.lexemes(conn, own), strict=True)}
    monkeypatch.setattr(terms, "_lexeme_cache", type(terms._lexeme_cache)())
    monkeypatch.setattr(terms, "LEXEME_CACHE", 2)  # every call evicts what the others just cached

    def read(own: list[str]) -> list[tuple[str, set[str]]]:
        with connect(db_url) as conn:
            return [(t, w) for text in own for t, w in zip((text, own[0]), terms.lexemes(conn, [text, own[0]]),
                                                             strict=True)]

    with ThreadPoolExecutor(max_workers=4) as pool:
        found = [pair for pairs in pool.map(read, texts) for pair in pairs]
    assert len(found) == 2 * 160 and all(words == expected[text] for text, words in found)
    assert all({"servic", "cluster", "region"} <= words for words in expected.values())


def test_threads_evicting_each_others_sentence_vectors_get_their_own_similarities(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    embedder = HashEmbedder(dim=64)
    question = np.asarray(embedder.embed(["which cluster holds the orders"])[0], dtype=np.float32)
    texts = [[f"Service {c} keeps its orders on cluster {n}" for n in range(60)] for c in "abcd"]
    expected = {t: float(np.asarray(v, dtype=np.float32) @ question)
                for own in texts for t, v in zip(own, embedder.embed(own), strict=True)}
    monkeypatch.setattr(similarity, "_cache", type(similarity._cache)())
    monkeypatch.setattr(similarity, "CACHE", 2)

    def read(own: list[str]) -> list[tuple[str, float]]:
        score = similarity.SentenceSimilarity(embedder, question)
        return [pair for text in own for pair in zip((text, own[0]), score([text, own[0]]), strict=True)]

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads take turns between almost any two bytecodes
    try:
        with ThreadPoolExecutor(max_workers=4) as pool:
            found = [pair for pairs in pool.map(read, texts) for pair in pairs]
    finally:
        sys.setswitchinterval(interval)
    assert len(found) == 2 * 240 and all(s == pytest.approx(expected[t]) for t, s in found)
