"""Evaluation metrics against values worked out by hand on small fixtures."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tortus_pg.eval.metrics import (
    abstention_correct,
    all_gold_at_k,
    bootstrap_ci,
    contains_answer,
    exact_match,
    holm,
    hop_precision,
    mrr,
    ndcg_at_k,
    normalize_answer,
    paired_bootstrap_diff,
    paired_bootstrap_p,
    paired_ratio_diff,
    path_recall,
    recall_at_k,
    token_f1,
)

# d1 is highly relevant (2), d2 and d3 relevant (1), d4 judged not relevant (0).
GOLD = {"d1": 2.0, "d2": 1.0, "d3": 1.0, "d4": 0.0}
RANKED = ["d3", "d1", "d9", "d2", "d5"]
LOG2_3 = math.log2(3)  # 1.5849625


def test_recall_counts_relevant_ids_in_the_top_k() -> None:
    assert recall_at_k(RANKED, GOLD, 1) == pytest.approx(1 / 3)  # d3 of {d1, d2, d3}
    assert recall_at_k(RANKED, GOLD, 3) == pytest.approx(2 / 3)  # d3, d1
    assert recall_at_k(RANKED, GOLD, 5) == 1.0  # d3, d1, d2; d4 (grade 0) is not relevant


def test_recall_with_k_beyond_the_list_uses_the_whole_list() -> None:
    assert recall_at_k(["d1"], GOLD, 100) == pytest.approx(1 / 3)
    assert recall_at_k([], GOLD, 10) == 0.0


def test_metrics_are_none_without_gold() -> None:
    for gold in ({}, {"d4": 0.0}):
        assert recall_at_k(RANKED, gold, 5) is None
        assert ndcg_at_k(RANKED, gold, 5) is None
        assert mrr(RANKED, gold) is None
        assert all_gold_at_k(RANKED, gold, 5) is None


def test_ndcg_uses_linear_gain_like_trec_eval() -> None:
    # top 3: d3 (1), d1 (2), d9 (0)
    # DCG@3  = 1/log2(2) + 2/log2(3) + 0/log2(4) = 1 + 1.2618595 = 2.2618595
    # IDCG@3 = 2/log2(2) + 1/log2(3) + 1/log2(4) = 2 + 0.6309298 + 0.5 = 3.1309298
    # nDCG@3 = 2.2618595 / 3.1309298 = 0.7224242
    expected = (1 + 2 / LOG2_3) / (2 + 1 / LOG2_3 + 0.5)
    assert ndcg_at_k(RANKED, GOLD, 3) == pytest.approx(expected)
    assert ndcg_at_k(RANKED, GOLD, 3) == pytest.approx(0.7224242, abs=1e-7)
    # exponential gain (2^rel - 1) would give (1 + 3/log2 3) / (3 + 1/log2 3 + 0.5) = 0.7002756
    assert ndcg_at_k(RANKED, GOLD, 3) != pytest.approx(0.7002756, abs=1e-4)


def test_ndcg_at_5_adds_the_late_relevant_passage() -> None:
    # DCG@5 = 1 + 2/log2(3) + 0 + 1/log2(5) + 0 = 1 + 1.2618595 + 0.4306766 = 2.6925361
    # IDCG@5 = IDCG@3 = 3.1309298 (only three relevant ids); nDCG@5 = 0.8599797
    expected = (1 + 2 / LOG2_3 + 1 / math.log2(5)) / (2 + 1 / LOG2_3 + 0.5)
    assert ndcg_at_k(RANKED, GOLD, 5) == pytest.approx(expected)
    assert ndcg_at_k(RANKED, GOLD, 5) == pytest.approx(0.8599797, abs=1e-7)


def test_ndcg_is_one_for_the_ideal_order_and_zero_without_hits() -> None:
    assert ndcg_at_k(["d1", "d2", "d3"], GOLD, 10) == pytest.approx(1.0)
    assert ndcg_at_k(["d1", "d3", "d2"], GOLD, 10) == pytest.approx(1.0)  # equal grades tie
    assert ndcg_at_k(["x", "y"], GOLD, 10) == 0.0


def test_ndcg_ideal_is_cut_at_k() -> None:
    # k = 1: DCG = 1/log2(2) for d3; IDCG = 2/log2(2) for d1; nDCG = 0.5
    assert ndcg_at_k(RANKED, GOLD, 1) == pytest.approx(0.5)


def test_mrr_is_the_reciprocal_rank_of_the_first_relevant_id() -> None:
    assert mrr(RANKED, GOLD) == 1.0  # d3 first
    assert mrr(["x", "y", "d2"], GOLD) == pytest.approx(1 / 3)
    assert mrr(["x", "y", "d2"], GOLD, k=2) == 0.0  # cut before d2
    assert mrr(["x", "d4"], GOLD) == 0.0  # grade 0 is not relevant


def test_all_gold_needs_every_relevant_id() -> None:
    ranked = ["d1", "d2", "x", "d3"]
    assert all_gold_at_k(ranked, GOLD, 3) == 0.0  # d3 is fourth
    assert all_gold_at_k(ranked, GOLD, 4) == 1.0  # d4 (grade 0) is not needed
    assert all_gold_at_k(ranked, GOLD, 50) == 1.0


def test_duplicate_ids_count_once_at_their_first_position() -> None:
    ranked = ["d3", "d3", "d1"]  # deduplicated: d3, d1
    assert recall_at_k(ranked, GOLD, 2) == pytest.approx(2 / 3)
    # DCG@2 = 1/log2(2) + 2/log2(3); IDCG@2 = 2/log2(2) + 1/log2(3)
    assert ndcg_at_k(ranked, GOLD, 2) == pytest.approx((1 + 2 / LOG2_3) / (2 + 1 / LOG2_3))
    assert mrr(["x", "x", "d1"], GOLD) == 0.5  # d1 is the second distinct id
    assert ndcg_at_k(["d1", "d1", "d1"], {"d1": 1.0}, 3) == 1.0  # no gain earned twice


def test_k_must_be_positive() -> None:
    with pytest.raises(ValueError, match="k must be at least 1"):
        recall_at_k(RANKED, GOLD, 0)
    with pytest.raises(ValueError, match="k must be at least 1"):
        mrr(RANKED, GOLD, k=0)


GOLD_PATH = [
    ("Checkout Gateway", "depends_on", "Ledger Service"),
    ("Ledger Service", "depends_on", "Postgres Cluster A"),
]


def test_path_recall_matches_triples_ignoring_case_and_spacing() -> None:
    found = [
        ("checkout gateway", "DEPENDS_ON", "Ledger  Service"),  # on the path
        ("Ledger Service", "owned_by", "Payments Team"),  # not on the path
    ]
    assert path_recall(found, GOLD_PATH) == 0.5  # 1 of 2 gold triples
    assert path_recall(found + [GOLD_PATH[1]], GOLD_PATH) == 1.0
    assert path_recall([], GOLD_PATH) == 0.0
    assert path_recall(found, []) is None


def test_path_triples_are_directed() -> None:
    reversed_edge = ("Ledger Service", "depends_on", "Checkout Gateway")
    assert path_recall([reversed_edge], GOLD_PATH) == 0.0
    assert hop_precision([reversed_edge], GOLD_PATH) == 0.0


def test_hop_precision_is_the_share_of_returned_hops_on_the_path() -> None:
    hops = [
        ("Checkout Gateway", "depends_on", "Ledger Service"),  # on the path
        ("CHECKOUT GATEWAY", "depends_on", "ledger service"),  # the same hop again
        ("Ledger Service", "owned_by", "Payments Team"),  # off the path
        ("Payments Team", "part_of", "Larkfield Pay"),  # off the path
    ]
    assert hop_precision(hops, GOLD_PATH) == pytest.approx(1 / 3)  # 1 of 3 distinct hops
    assert hop_precision(GOLD_PATH, GOLD_PATH) == 1.0
    assert hop_precision([], GOLD_PATH) == 0.0
    assert hop_precision(hops, []) is None


def test_abstention_is_correct_exactly_on_negatives() -> None:
    assert abstention_correct(is_negative=True, withheld=True)
    assert abstention_correct(is_negative=False, withheld=False)
    assert not abstention_correct(is_negative=True, withheld=False)
    assert not abstention_correct(is_negative=False, withheld=True)


def _scores(n: int) -> list[float]:
    """n scores with mean 0.5: alternating hits and misses."""
    return [float(i % 2) for i in range(n)]


def test_bootstrap_is_deterministic_for_a_seed() -> None:
    values = np.random.default_rng(1).random(60).tolist()
    assert bootstrap_ci(values, seed=7) == bootstrap_ci(values, seed=7)
    assert bootstrap_ci(values, seed=7) != bootstrap_ci(values, seed=8)


def test_bootstrap_interval_contains_the_mean_and_narrows_with_more_data() -> None:
    small, large = _scores(20), _scores(400)
    lo_s, hi_s = bootstrap_ci(small)
    lo_l, hi_l = bootstrap_ci(large)
    assert lo_s < 0.5 < hi_s
    assert lo_l < 0.5 < hi_l
    # the standard error shrinks like 1/sqrt(n): 20x the data, about 1/4.5 the width
    assert hi_l - lo_l < (hi_s - lo_s) / 3


def test_bootstrap_of_two_values_spans_both() -> None:
    # resampled means of [0, 1] are 0, 0.5 or 1 with chance 1/4, 1/2, 1/4, so the
    # 2.5th percentile is 0 and the 97.5th is 1
    assert bootstrap_ci([0.0, 1.0]) == (0.0, 1.0)


def test_bootstrap_edge_cases() -> None:
    assert all(math.isnan(x) for x in bootstrap_ci([]))
    assert bootstrap_ci([0.25]) == (0.25, 0.25)
    assert bootstrap_ci([0.5] * 30) == (0.5, 0.5)
    with pytest.raises(ValueError, match="alpha"):
        bootstrap_ci([1.0, 2.0], alpha=1.5)


def test_bootstrap_handles_more_data_than_one_block() -> None:
    values = _scores(3000)  # 1000 resamples x 3000 draws, spread over several blocks
    lo, hi = bootstrap_ci(values, resamples=1000)
    assert lo < 0.5 < hi
    assert hi - lo < 0.05  # standard error 0.5 / sqrt(3000) = 0.0091, interval about 0.036


def test_paired_bootstrap_finds_a_clear_difference() -> None:
    # b trails a by 0.2 on every question, give or take 0.05: the mean difference is 0.2
    a = [0.9 if i % 3 else 0.6 for i in range(40)]
    b = [x - 0.2 + (0.05 if i % 2 else -0.05) for i, x in enumerate(a)]
    diff, lo, hi = paired_bootstrap_diff(a, b)
    assert diff == pytest.approx(0.2)
    assert 0 < lo < diff < hi
    diff_ba, lo_ba, hi_ba = paired_bootstrap_diff(b, a)
    assert diff_ba == pytest.approx(-0.2)
    assert hi_ba < 0


def test_paired_bootstrap_of_identical_strategies_is_zero() -> None:
    a = np.random.default_rng(2).random(25).tolist()
    assert paired_bootstrap_diff(a, a) == (0.0, 0.0, 0.0)


def test_paired_bootstrap_without_a_difference_includes_zero() -> None:
    a = _scores(40)
    b = [1.0 - x for x in a]  # wins and losses cancel: differences +1, -1, ...
    diff, lo, hi = paired_bootstrap_diff(a, b)
    assert diff == 0.0
    assert lo < 0 < hi


def test_paired_ratio_difference_pools_each_side_before_dividing() -> None:
    # a keeps 3 of 4 hops on every question (0.75); b keeps 1 of 4 on half and 3 of 4 on the rest (0.5).
    a = [(3.0, 4.0)] * 40
    b = [(1.0, 4.0) if i % 2 else (3.0, 4.0) for i in range(40)]
    diff, lo, hi = paired_ratio_diff(a, b)
    assert diff == pytest.approx(0.25) and 0 < lo < diff < hi
    # Pooled, not averaged per question: 1 of 1 and 0 of 9 pool to 0.1, not to a mean of 0.5.
    assert paired_ratio_diff([(1.0, 1.0), (0.0, 9.0)], [(0.0, 1.0), (0.0, 9.0)])[0] == pytest.approx(0.1)
    same = [(1.0, 2.0), (2.0, 3.0), (0.0, 1.0)]
    assert paired_ratio_diff(same, same) == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="equal lengths"):
        paired_ratio_diff(same, same[:2])


def test_paired_bootstrap_needs_pairs() -> None:
    with pytest.raises(ValueError, match="equal lengths"):
        paired_bootstrap_diff([1.0, 2.0], [1.0])
    assert all(math.isnan(x) for x in paired_bootstrap_diff([], []))


@pytest.mark.parametrize(("prediction", "expected", "em", "f1"), [
    ("The Platform Team", ["Platform Team"], 1.0, 1.0),  # articles and case do not count
    ("platform team.", ["Platform Team"], 1.0, 1.0),  # nor punctuation
    ("the Platform", ["Platform Team"], 0.0, 2 / 3),  # precision 1, recall 1/2
    ("Core Ledger Team", ["Platform Team", "Ledger Team"], 0.0, 0.8),  # the best alias counts
    ("five", ["5"], 0.0, 0.0),
    (None, ["5"], 0.0, 0.0),  # no short answer
])
def test_short_answer_exact_match_and_token_f1(
    prediction: str | None, expected: list[str], em: float, f1: float
) -> None:
    assert exact_match(prediction, expected) == em
    assert token_f1(prediction, expected) == pytest.approx(f1)


@pytest.mark.parametrize(("text", "expected", "found"), [
    ("It is owned by the Platform Team. [1]", ["platform team"], True),  # case does not count
    ("Released in 1993–94 [1]", ["1993"], True),  # punctuation bounds a word
    ("kestrel-3, one of the clusters", ["kestrel-3"], True),
    ("He is best known for it.", ["no"], False),  # a short answer inside a longer word is not said
    ("The code 19930 was filed.", ["1993"], False),
    ("No, they are not. [1]", ["yes", "no"], True),  # any alias
    (None, ["no"], False),
])
def test_an_answer_contains_the_expected_text_as_whole_words(
    text: str | None, expected: list[str], found: bool
) -> None:
    assert contains_answer(text, expected) is found


def test_answer_metrics_are_none_without_an_expected_answer() -> None:
    assert exact_match("anything", [None]) is None and token_f1("anything", []) is None
    assert contains_answer("anything", [None, ""]) is None
    assert normalize_answer("  An  Answer, (it is!) ") == "answer it is"


def test_the_bootstrap_p_value_agrees_with_the_interval() -> None:
    a = [0.9 if i % 3 else 0.6 for i in range(40)]
    clear = [x - 0.2 + (0.05 if i % 2 else -0.05) for i, x in enumerate(a)]
    assert paired_bootstrap_p(a, clear) < 0.01  # its interval excludes zero (test above)
    noisy = [1.0 - x for x in _scores(40)]
    diff, lo, hi = paired_bootstrap_diff(_scores(40), noisy)
    assert lo < 0 < hi and paired_bootstrap_p(_scores(40), noisy) > 0.05
    assert paired_bootstrap_p(a, a) == 1.0 and math.isnan(paired_bootstrap_p([], []))


def test_holm_multiplies_the_smallest_p_by_the_number_of_tests_and_keeps_the_order() -> None:
    adjusted = holm({"a": 0.01, "b": 0.04, "c": 0.03, "d": math.nan})
    # sorted 0.01, 0.03, 0.04 -> x3, x2, x1, each at least the one before
    assert adjusted["a"] == pytest.approx(0.03) and adjusted["c"] == pytest.approx(0.06)
    assert adjusted["b"] == pytest.approx(0.06) and math.isnan(adjusted["d"])
    assert holm({"only": 0.04}) == {"only": 0.04} and holm({}) == {}



def test_ranking_metrics_agree_with_ir_measures_on_random_runs() -> None:
    """recall@k, nDCG@k (linear gain) and MRR against ir-measures (pytrec_eval) on random graded
    judgements and random rankings, duplicates and unjudged ids included."""
    import ir_measures  # a dev dependency

    rng = np.random.default_rng(7)
    docs = [f"d{i}" for i in range(30)]
    for trial in range(60):
        # grades 0 (judged, not relevant), 1 and 2
        gold = {d: float(rng.integers(0, 3)) for d in rng.choice(docs, size=rng.integers(1, 8), replace=False)}
        if not any(gold.values()):
            continue
        ranked = list(dict.fromkeys(rng.choice(docs, size=rng.integers(1, 25)).tolist()))
        qrels = [ir_measures.Qrel("q", d, int(g)) for d, g in gold.items()]
        run = [ir_measures.ScoredDoc("q", d, float(len(ranked) - i)) for i, d in enumerate(ranked)]
        theirs = ir_measures.calc_aggregate([ir_measures.R @ 5, ir_measures.nDCG @ 10, ir_measures.RR], qrels, run)
        assert recall_at_k(ranked, gold, 5) == pytest.approx(theirs[ir_measures.R @ 5]), trial
        assert ndcg_at_k(ranked, gold, 10) == pytest.approx(theirs[ir_measures.nDCG @ 10]), trial
        assert mrr(ranked, gold) == pytest.approx(theirs[ir_measures.RR]), trial
