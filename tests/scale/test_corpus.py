"""The scale suite's synthetic corpus: a Zipfian vocabulary, documents linked by cue phrases,
deterministic by seed."""

from collections import Counter

import numpy as np

from tortus_pg.scale.corpus import ZIPF_EXPONENT, SyntheticCorpus, draw, made_up_words, zipf_cdf


def test_made_up_words_are_distinct_and_the_same_for_a_seed() -> None:
    words = made_up_words(2_000, seed=3)
    assert len(set(words)) == 2_000
    assert words == made_up_words(2_000, seed=3)
    assert words != made_up_words(2_000, seed=4)


def test_draws_follow_the_zipfian_law() -> None:
    ranks = draw(np.random.default_rng(0), zipf_cdf(1_000), 400_000)
    counts = Counter(ranks.tolist())
    # P(rank 1) / P(rank 10) = 10^s; sampling noise at these counts is a few per cent.
    assert abs(np.log10(counts[0] / counts[9]) - ZIPF_EXPONENT) < 0.05
    assert counts[0] > counts[1] > counts[4] > counts[49]


def test_documents_link_named_things_by_cue_phrases_in_several_subgraphs() -> None:
    corpus = SyntheticCorpus.make(500, vocabulary=2_000, subgraphs=3)
    docs = list(corpus.passages(0, 30))
    assert len(docs) == 30 and len({p.id for _, p in docs}) == 30
    assert {g for g, _ in docs} == {"part-0", "part-1", "part-2"}
    for _, p in docs:
        assert p.title in corpus.names
        assert p.text.startswith(f"{p.title} depends on ") and " It is owned by the " in p.text
    again = list(corpus.passages(10, 12))
    assert [p for _, p in again] == [p for _, p in docs[10:12]]


def test_queries_name_only_documents_the_tenant_holds_and_frequent_ones_use_common_words() -> None:
    corpus = SyntheticCorpus.make(1_000, vocabulary=3_000)
    held = set(corpus.names[:40])
    for q in corpus.queries(50, 40):
        assert any(name in q for name in held)
    common = set(corpus.vocabulary[:10])
    frequent = corpus.queries(20, 40, frequent=True)
    assert all(any(f" {w} " in q for w in common) for q in frequent)
    assert corpus.queries(5, 40) == corpus.queries(5, 40)


def test_documents_of_a_topic_share_its_words() -> None:
    corpus = SyntheticCorpus.make(2_000, vocabulary=6_000, subgraphs=2)
    topic_of = {n: corpus.topic_words(n) for n in range(200)}
    words = {n: set(p.text.lower().replace(".", "").split()) for n, (_, p) in enumerate(corpus.passages(0, 200))}
    same = [len(words[a] & words[b]) for a in range(100) for b in range(a + 1, 200) if topic_of[a] == topic_of[b]]
    other = [len(words[a] & words[b]) for a in range(100) for b in range(a + 1, 200) if topic_of[a] != topic_of[b]]
    assert same and other and np.mean(same) > 1.5 * np.mean(other)
