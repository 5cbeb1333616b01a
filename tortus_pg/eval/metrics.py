"""Retrieval, path, abstention and answer metrics, and bootstrap confidence intervals.

A ranked list is a sequence of ids, best first. An id that appears more than once counts
once, at its first position: the list is deduplicated before it is cut at k, so a repeat
neither earns gain twice nor takes a slot. Gold maps ids to graded relevance; as in
trec_eval, only grades above zero are relevant. Metrics that need gold return None when
a question has none (a negative), so that averages leave it out rather than count it as 0.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

Triple = tuple[str, str, str]

# Bootstrap resampling draws at most this many indices per block, to bound memory.
_BLOCK = 1_000_000


def _top(ranked: Sequence[str], k: int | None) -> list[str]:
    """The first k distinct ids of `ranked` (all of them when k is None)."""
    if k is not None and k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    distinct = list(dict.fromkeys(ranked))
    return distinct if k is None else distinct[:k]


def _relevant(gold: Mapping[str, float]) -> dict[str, float]:
    return {doc: float(grade) for doc, grade in gold.items() if grade > 0}


def recall_at_k(ranked: Sequence[str], gold: Mapping[str, float], k: int) -> float | None:
    """Recall@k = |top-k ∩ relevant| / |relevant|, where relevant = gold ids with grade > 0.

    None when there is no relevant id.
    """
    relevant = _relevant(gold)
    if not relevant:
        return None
    return sum(doc in relevant for doc in _top(ranked, k)) / len(relevant)


def ndcg_at_k(ranked: Sequence[str], gold: Mapping[str, float], k: int) -> float | None:
    """nDCG@k with linear gain, the definition of trec_eval's ndcg_cut that BEIR reports.

    DCG@k = sum over positions i = 1..k of rel_i / log2(i + 1), with rel_i the gold grade of
    the id at position i (0 when not in gold); IDCG@k is the DCG@k of the gold grades sorted
    in descending order; nDCG@k = DCG@k / IDCG@k. Linear gain (not 2^rel - 1) matches
    pytrec_eval, hence BEIR's published numbers; on binary grades both are the same.
    None when there is no relevant id.
    """
    relevant = _relevant(gold)
    if not relevant:
        return None
    dcg = sum(relevant.get(doc, 0.0) / math.log2(i + 1) for i, doc in enumerate(_top(ranked, k), 1))
    ideal = sorted(relevant.values(), reverse=True)[:k]
    idcg = sum(grade / math.log2(i + 1) for i, grade in enumerate(ideal, 1))
    return dcg / idcg


def mrr(ranked: Sequence[str], gold: Mapping[str, float], k: int | None = None) -> float | None:
    """Reciprocal rank 1/r of the first relevant id (r counts distinct ids from 1).

    0.0 when no relevant id is ranked (within the first k when k is given); None when there
    is no relevant id at all.
    """
    relevant = _relevant(gold)
    if not relevant:
        return None
    for rank, doc in enumerate(_top(ranked, k), 1):
        if doc in relevant:
            return 1.0 / rank
    return 0.0


def all_gold_at_k(ranked: Sequence[str], gold: Mapping[str, float], k: int) -> float | None:
    """1.0 when every relevant id is in the top k, else 0.0; None when there is none.

    The multi-hop success criterion: an answer that needs two passages needs both.
    """
    relevant = _relevant(gold)
    if not relevant:
        return None
    return 1.0 if set(relevant) <= set(_top(ranked, k)) else 0.0


def _label(text: str) -> str:
    return " ".join(text.split()).casefold()


def _triples(edges: Iterable[Triple]) -> set[Triple]:
    """Distinct triples with labels compared case-insensitively and whitespace collapsed."""
    return {(_label(s), _label(t), _label(o)) for s, t, o in edges}


def path_recall(found_edges: Iterable[Triple], gold_path: Iterable[Triple]) -> float | None:
    """Fraction of the distinct gold path triples that are among the returned triples.

    Triples are directed (source, type, target); two match when all three labels are equal
    ignoring case and runs of whitespace. None when there is no gold path.
    """
    gold = _triples(gold_path)
    if not gold:
        return None
    return len(gold & _triples(found_edges)) / len(gold)


def hop_precision(found_hops: Iterable[Triple], gold_path: Iterable[Triple]) -> float | None:
    """Fraction of the distinct returned hops that lie on the gold path.

    Hops and gold triples match as in `path_recall`. None when there is no gold path;
    0.0 when no hop was returned although there is one (nothing returned is nothing right).
    """
    gold = _triples(gold_path)
    if not gold:
        return None
    hops = _triples(found_hops)
    return len(hops & gold) / len(hops) if hops else 0.0


def abstention_correct(is_negative: bool, withheld: bool) -> bool:
    """True when the system withheld an answer exactly on the unanswerable questions."""
    return is_negative == withheld


def contains_answer(text: str | None, expected: Sequence[str | None]) -> bool | None:
    """Whether `text` contains the expected answer or one of its aliases as whole words,
    ignoring case ("no" is not in "known", "1993" not in "19930"); None when nothing is
    expected (a negative question)."""
    wanted = [e.casefold() for e in expected if e]
    if not wanted:
        return None
    found = (text or "").casefold()
    return any(re.search(rf"(?<!\w){re.escape(w)}(?!\w)", found) is not None for w in wanted)


def normalize_answer(text: str) -> str:
    """SQuAD's answer normalisation: lower case, no punctuation, no articles, single spaces."""
    text = "".join(" " if unicodedata.category(c).startswith("P") else c for c in text.casefold())
    return " ".join(w for w in text.split() if w not in ("a", "an", "the"))


def exact_match(prediction: str | None, expected: Sequence[str | None]) -> float | None:
    """1.0 when the normalised prediction equals a normalised expected answer (or alias), else
    0.0; None when nothing is expected (a negative question)."""
    wanted = [normalize_answer(e) for e in expected if e]
    if not wanted:
        return None
    return float(prediction is not None and normalize_answer(prediction) in wanted)


def token_f1(prediction: str | None, expected: Sequence[str | None]) -> float | None:
    """SQuAD's token F1 of the prediction against the best-matching expected answer (or alias);
    None when nothing is expected."""
    wanted = [normalize_answer(e).split() for e in expected if e]
    if not wanted:
        return None
    said = normalize_answer(prediction or "").split()
    best = 0.0
    for gold in wanted:
        common = sum((Counter(said) & Counter(gold)).values())
        if common:
            precision, recall = common / len(said), common / len(gold)
            best = max(best, 2 * precision * recall / (precision + recall))
    return best


def _resampled_means(values: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n = len(values)
    rows = max(1, _BLOCK // n)
    means = [
        values[rng.integers(0, n, size=(min(rows, resamples - start), n))].mean(axis=1)
        for start in range(0, resamples, rows)
    ]
    return np.concatenate(means)


def bootstrap_ci(
    values: Sequence[float], *, resamples: int = 1000, alpha: float = 0.05, seed: int = 0
) -> tuple[float, float]:
    """Percentile-bootstrap (1 - alpha) confidence interval of the mean.

    Draws `resamples` samples of len(values) with replacement, takes each sample's mean, and
    returns the alpha/2 and 1 - alpha/2 percentiles of those means (linear interpolation).
    The same seed gives the same interval. One value gives (v, v); no values give (nan, nan).
    """
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be between 0 and 1, got {alpha}")
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return (math.nan, math.nan)
    if data.size == 1:
        return (float(data[0]), float(data[0]))
    means = _resampled_means(data, resamples, seed)
    lo, hi = np.percentile(means, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    return (float(lo), float(hi))


def paired_bootstrap_p(a: Sequence[float], b: Sequence[float], *, resamples: int = 1000, seed: int = 0) -> float:
    """Two-sided bootstrap p-value of the mean difference a[i] - b[i]: twice the share of the
    resampled mean differences on the far side of zero (at most 1), from the same resamples as
    `paired_bootstrap_diff`'s interval; 1 when every pair is equal, nan for no pairs."""
    if len(a) != len(b):
        raise ValueError(f"paired scores need equal lengths, got {len(a)} and {len(b)}")
    diffs = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    if diffs.size == 0:
        return math.nan
    if not diffs.any():
        return 1.0
    means = _resampled_means(diffs, resamples, seed)
    return float(min(1.0, 2 * min((means <= 0).mean(), (means >= 0).mean())))


def holm(pvalues: Mapping[str, float]) -> dict[str, float]:
    """Holm's step-down adjustment of p-values tested together, so that the chance of any false
    finding among them stays at the level (nan stays nan and takes no part)."""
    ranked = sorted((p, name) for name, p in pvalues.items() if not math.isnan(p))
    adjusted = dict.fromkeys(pvalues, math.nan)
    running = 0.0
    for i, (p, name) in enumerate(ranked):
        running = max(running, min(1.0, (len(ranked) - i) * p))
        adjusted[name] = running
    return adjusted


def paired_ratio_diff(
    a: Sequence[tuple[float, float]], b: Sequence[tuple[float, float]], *, resamples: int = 1000, alpha: float = 0.05,
    seed: int = 0,
) -> tuple[float, float, float]:
    """The difference of two pooled ratios, sum of numerators over sum of denominators, a's
    minus b's over the same questions ((numerator, denominator) per question), with its
    percentile-bootstrap interval (questions resampled as pairs). nan where a denominator sums
    to zero."""
    if len(a) != len(b):
        raise ValueError(f"paired ratios need equal lengths, got {len(a)} and {len(b)}")
    x, y = np.asarray(a, dtype=float).reshape(-1, 2), np.asarray(b, dtype=float).reshape(-1, 2)

    def ratio(rows: np.ndarray) -> np.ndarray:
        num, den = rows[..., 0].sum(axis=-1), rows[..., 1].sum(axis=-1)
        shares: np.ndarray = np.divide(num, den, out=np.full(np.shape(num), math.nan), where=den != 0)
        return shares

    if not len(x):
        return (math.nan, math.nan, math.nan)
    picks = np.random.default_rng(seed).integers(0, len(x), size=(resamples, len(x)))
    diffs = ratio(x[picks]) - ratio(y[picks])
    lo, hi = np.nanpercentile(diffs, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    return (float(ratio(x) - ratio(y)), float(lo), float(hi))


def paired_bootstrap_diff(
    a: Sequence[float], b: Sequence[float], *, resamples: int = 1000, alpha: float = 0.05, seed: int = 0
) -> tuple[float, float, float]:
    """Mean of a[i] - b[i] over the same questions, with its percentile-bootstrap interval.

    Questions are resampled as pairs, so the interval reflects per-question differences
    rather than the spread of each strategy on its own. When the interval excludes zero,
    a beats (or loses to) b at level alpha. Returns (mean_diff, lo, hi); nan for no pairs.
    """
    if len(a) != len(b):
        raise ValueError(f"paired scores need equal lengths, got {len(a)} and {len(b)}")
    diffs = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    lo, hi = bootstrap_ci(diffs.tolist(), resamples=resamples, alpha=alpha, seed=seed)
    mean = float(diffs.mean()) if diffs.size else math.nan
    return (mean, lo, hi)
