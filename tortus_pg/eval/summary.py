"""Scoring one answer of a strategy, and summarizing a run: means with bootstrap intervals,
latency percentiles, per-type breakdown, paired differences and a failure taxonomy."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from tortus_pg.eval import abstention
from tortus_pg.eval.datasets import Dataset, Question
from tortus_pg.eval.metrics import (
    abstention_correct,
    all_gold_at_k,
    bootstrap_ci,
    contains_answer,
    exact_match,
    holm,
    mrr,
    ndcg_at_k,
    paired_bootstrap_diff,
    paired_bootstrap_p,
    paired_ratio_diff,
    recall_at_k,
    token_f1,
)
from tortus_pg.eval.strategies import StrategyResult

METRICS = ("recall@2", "recall@5", "recall@10", "ndcg@10", "mrr", "all_gold@5", "all_gold@10")
DIAGNOSTICS = ("fan_out", "portal_hops", "shard_crossings", "path_hops", "tokens")
TYPE_METRICS = ("recall@5", "all_gold@5", "ndcg@10", "mrr", "answer_match", "answer_em", "answer_f1")
PAIRED_METRICS = ("recall@5", "all_gold@5", "ndcg@10")
# The failure taxonomy classifies misses of the multi-hop success criterion, all gold in the top 5.
TAXONOMY_K = 5
TAXONOMY = {
    "seed_miss": "no gold id in the top 5 of the seed stage (for one-stage strategies: of the result)",
    "over_expansion": "the seed stage had gold ids in its top 5 that expansion pushed out of the final top 5",
    "traversal_miss": "the seed stage found some gold, the rest was never reached "
    "(one-stage strategies have no traversal, so each of their partial hits lands here)",
}
# Scored for strategies that answer (withhold or not); the others cannot abstain.
ABSTENTION = {
    "wrong_abstention": "an answerable question was withheld (strategies that answer only)",
    "accuracy_on_negatives": "share of the unanswerable (negative) questions withheld",
    "answer_match": "share of the answerable questions whose answer contains the expected answer or an alias",
    "answer_em": "share of the answerable questions whose short answer equals the expected one (SQuAD normalisation)",
    "answer_f1": "mean token F1 of the short answer against the expected answer and its aliases (SQuAD)",
}


@dataclass(frozen=True)
class Reply:
    """What a strategy that answers replied to one question, kept beside its metrics so a miss can
    be read without asking again: the answer, its short answer, whether it was withheld and why
    (the engine's `Refusal` name), and what a withheld answer would have said (its draft)."""

    answer: str | None
    short_answer: str | None
    withheld: bool
    refusal: str | None = None
    draft: str | None = None

    @classmethod
    def of(cls, out: StrategyResult) -> Reply | None:
        """The reply of a strategy's result; None for a strategy that only retrieves."""
        if out.withheld is None:
            return None
        return cls(out.answer, None if out.withheld else out.short_answer, out.withheld, out.refusal,
                   out.draft if out.withheld else None)

    @classmethod
    def stored(cls, row: Mapping[str, Any] | None) -> Reply | None:
        """The reply as `tortus.eval_result.reply` holds it (a JSON object, or null)."""
        if row is None:
            return None
        return cls(row.get("answer"), row.get("short_answer"), bool(row.get("withheld")), row.get("refusal"),
                   row.get("draft"))

    def json(self) -> dict[str, Any]:
        """The reply as JSON holds it: the stored column and a question's `--json-out` row."""
        return asdict(self)


@dataclass(frozen=True)
class Result:
    """One strategy on one question: metrics (None where undefined), ranked ids, latency, and what
    it replied when it answers."""

    question_id: str
    strategy: str
    metrics: dict[str, Any]
    retrieved: list[str]
    latency_ms: float
    reply: Reply | None = None

    def replied(self) -> dict[str, Any]:
        """The reply as a question's JSON row holds it: `{"reply": {…}}`, or nothing for a
        strategy that only retrieves."""
        return {"reply": self.reply.json()} if self.reply is not None else {}


@dataclass
class EvalRun:
    """One evaluation run: its rows so far, the strategies that ran and those skipped (with why)."""

    run_id: int
    tenant: str
    dataset: Dataset
    config: dict[str, Any]
    strategies: list[str]
    skipped: dict[str, str]
    results: list[Result] = field(default_factory=list)
    status: str = "running"


def question_metrics(
    out: StrategyResult, gold: Mapping[str, float], *, negative: bool = False,
    expected: Sequence[str | None] = (),
) -> dict[str, float | None]:
    """Retrieval metrics of one answer (None for a negative question), the recall@5 of its seed
    stage, whether it abstained correctly and whether its answer contains the expected answer
    or an alias (strategies that answer), and the diagnostics."""
    ranked = out.ranked_ids
    metrics: dict[str, float | None] = {f"recall@{c}": recall_at_k(ranked, gold, c) for c in (2, 5, 10)}
    metrics["ndcg@10"] = ndcg_at_k(ranked, gold, 10)
    metrics["mrr"] = mrr(ranked, gold)
    metrics["all_gold@5"] = all_gold_at_k(ranked, gold, 5)
    metrics["all_gold@10"] = all_gold_at_k(ranked, gold, 10)
    seed = ranked if out.seed_ids is None else out.seed_ids
    metrics[f"seed_recall@{TAXONOMY_K}"] = recall_at_k(seed, gold, TAXONOMY_K)
    if out.withheld is not None:
        metrics["withheld"] = float(out.withheld)
        metrics["abstention_correct"] = float(abstention_correct(negative, out.withheld))
        match = contains_answer(out.answer, expected)
        if match is not None:
            metrics["answer_match"] = float(not out.withheld and match)
            short = None if out.withheld else out.short_answer
            metrics["answer_em"] = exact_match(short, expected)
            metrics["answer_f1"] = token_f1(short, expected)
            # Whether the reply, answered or drafted, holds the expected text: what an abstention
            # threshold decides to show or not (`abstention_curve`).
            metrics["reply_match"] = float(bool(contains_answer(out.draft if out.withheld else out.answer, expected)))
        if out.confidence is not None:
            metrics["support"] = float(out.confidence)
    return {**metrics, **out.diagnostics}


def _num(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def _values(rows: Sequence[Result], metric: str) -> list[float]:
    return [float(v) for r in rows if isinstance(v := r.metrics.get(metric), int | float)]


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _failure(result: Result, question: Question) -> str | None:
    """The taxonomy class of a scored question whose gold is not all in the top 5, else None."""
    k = TAXONOMY_K
    if not question.gold or all_gold_at_k(result.retrieved, question.gold, k) == 1.0:
        return None
    seed = result.metrics.get(f"seed_recall@{k}") or 0.0
    final = recall_at_k(result.retrieved, question.gold, k) or 0.0
    if seed == 0.0:
        return "seed_miss"
    return "over_expansion" if final < seed else "traversal_miss"


def _strategy(rows: list[Result], questions: Mapping[str, Question], k: int) -> dict[str, Any]:
    entry: dict[str, Any] = {"status": "done", "questions": len(rows), "scored": len(_values(rows, "recall@5")),
                             "failed": sum("error" in r.metrics for r in rows)}
    ci: dict[str, list[float | None]] = {}
    for metric in METRICS:
        values = _values(rows, metric)
        entry[metric] = _mean(values)
        ci[metric] = [_num(x) for x in bootstrap_ci(values)]
    entry["ci95"] = ci
    latencies = [r.latency_ms for r in rows]
    p50, p95 = (float(v) for v in np.percentile(latencies, [50, 95])) if latencies else (None, None)
    entry["latency_p50_ms"], entry["latency_p95_ms"] = p50, p95
    for name in DIAGNOSTICS:
        if values := _values(rows, name):
            entry[name] = _mean(values)
    # Of the graph hops on the evidence's paths, the share that stays inside one torus shard.
    if hops := sum(_values(rows, "path_hops")):
        entry["shard_affinity"] = round(1.0 - sum(_values(rows, "shard_crossings")) / hops, 4)
    scored = [r for r in rows if questions[r.question_id].gold]
    entry["recall_curve"] = {
        str(c): _mean([recall_at_k(r.retrieved, questions[r.question_id].gold, c) or 0.0 for r in scored])
        for c in range(1, k + 1)
    }
    by_type: dict[str, list[Result]] = {}
    for r in rows:
        by_type.setdefault(questions[r.question_id].type, []).append(r)
    entry["by_type"] = {
        t: {"n": len(group), **{m: _mean(_values(group, m)) for m in TYPE_METRICS}} for t, group in by_type.items()
    }
    failures = dict.fromkeys(TAXONOMY, 0)
    for r in rows:
        if (kind := _failure(r, questions[r.question_id])) is not None:
            failures[kind] += 1
    entry["failures"] = failures
    if any("withheld" in r.metrics for r in rows):
        originals = [r for r in rows if not questions[r.question_id].paraphrase_of]
        entry["abstention"] = _abstention(originals, questions)
        if len(originals) < len(rows):
            entry["answer_groups"] = _answer_groups(rows, questions)
    return entry


def _abstention(rows: Sequence[Result], questions: Mapping[str, Question]) -> dict[str, Any]:
    """Withheld negatives, answered answerable questions and the answers' match; with negatives
    asked, the abstention curve over the support threshold (`curve`, the golden set's own)."""
    negatives = [r for r in rows if questions[r.question_id].is_negative]
    answerable = [r for r in rows if not questions[r.question_id].is_negative and "withheld" in r.metrics]
    scored = [r.metrics for r in negatives if "support" in r.metrics]
    curve = abstention.to_json(abstention.from_results([r.metrics for r in answerable], scored)) \
        if answerable and scored else None
    return {
        "accuracy_on_negatives": _mean(_values(negatives, "abstention_correct")),
        "negatives": len(negatives),
        "answered_when_answerable": _mean([1.0 - float(r.metrics["withheld"]) for r in answerable]),
        "wrong_abstention": sum(1 for r in answerable if r.metrics["withheld"] == 1.0),
        "answer_match": _mean(_values(answerable, "answer_match")),
        "answer_em": _mean(_values(answerable, "answer_em")),
        "answer_f1": _mean(_values(answerable, "answer_f1")),
        **({"curve": curve} if curve is not None else {}),
    }


def _answer_groups(rows: Sequence[Result], questions: Mapping[str, Question]) -> dict[str, dict[str, Any]]:
    """Answers counted per set of questions (the originals, each set of paraphrases) and per
    half of the golden set (tune, check): a paraphrase set should score like the originals."""
    groups: dict[str, list[Result]] = {}
    for r in rows:
        q = questions[r.question_id]
        origin = questions.get(q.paraphrase_of, q)
        kind = f"paraphrases {q.paraphrase_set}" if q.paraphrase_of else "originals"
        for split in sorted({"all", origin.split} - {""}):
            groups.setdefault(f"{kind} / {split}", []).append(r)
    out = {}
    for name, group in sorted(groups.items()):
        answerable = [r for r in group if not questions[r.question_id].is_negative]
        negatives = [r for r in group if questions[r.question_id].is_negative]
        out[name] = {"answerable": len(answerable), "matched": int(sum(_values(answerable, "answer_match"))),
                     "answered": sum(1 for r in answerable if r.metrics.get("withheld") == 0.0),
                     "negatives": len(negatives),
                     "negatives_withheld": sum(1 for r in negatives if r.metrics.get("withheld") == 1.0)}
    return out


def _paired(rows: list[Result], base: list[Result]) -> dict[str, Any]:
    mine = {r.question_id: r.metrics for r in rows}
    theirs = {r.question_id: r.metrics for r in base}
    paired: dict[str, Any] = {}
    for metric in PAIRED_METRICS:
        both = [q for q in mine if isinstance(mine[q].get(metric), int | float)
                and isinstance(theirs.get(q, {}).get(metric), int | float)]
        a, b = [mine[q][metric] for q in both], [theirs[q][metric] for q in both]
        diff, lo, hi = paired_bootstrap_diff(a, b)
        paired[metric] = {"diff": _num(diff), "ci95": [_num(lo), _num(hi)], "n": len(both),
                          "p": _num(paired_bootstrap_p(a, b))}
    # Shard affinity is a pooled ratio (hops kept over hops), so its difference is resampled as one.
    both = [q for q in mine if "path_hops" in mine[q] and "path_hops" in theirs.get(q, {})]
    if both and sum(mine[q]["path_hops"] for q in both) and sum(theirs[q]["path_hops"] for q in both):
        diff, lo, hi = paired_ratio_diff(*([(m[q]["path_hops"] - m[q]["shard_crossings"], m[q]["path_hops"])
                                            for q in both] for m in (mine, theirs)))
        paired["shard_affinity"] = {"diff": _num(diff), "ci95": [_num(lo), _num(hi)], "n": len(both)}
    return paired


def summarize(run: EvalRun) -> dict[str, Any]:
    """Per strategy: metric means with 95% bootstrap intervals (`ci95`), latency p50/p95, mean
    diagnostics, recall@1..k curve, per-question-type breakdown, failure taxonomy, and the paired
    difference to the first strategy (`vs_baseline`). Negative questions count in latency only."""
    k = int(run.config["k"])
    questions = {q.id: q for q in run.dataset.questions}
    rows = {name: [r for r in run.results if r.strategy == name and r.question_id in questions]
            for name in run.strategies}
    strategies: dict[str, Any] = {name: _strategy(group, questions, k) for name, group in rows.items()}
    baseline = run.strategies[0] if run.strategies else None
    for name in run.strategies[1:]:
        strategies[name]["vs_baseline"] = _paired(rows[name], rows[str(baseline)])
    # Every strategy is tested against the one baseline: Holm keeps the chance of any false
    # finding among them at 5% (`p_holm`).
    for metric in PAIRED_METRICS:
        tested = {name: strategies[name]["vs_baseline"][metric] for name in run.strategies[1:]}
        for name, p in holm({n: math.nan if t["p"] is None else t["p"] for n, t in tested.items()}).items():
            tested[name]["p_holm"] = _num(p)
    for name, reason in run.skipped.items():
        strategies[name] = {"status": "skipped", "reason": reason}
    asked = [questions[q] for q in dict.fromkeys(r.question_id for r in run.results if r.question_id in questions)]
    types: dict[str, int] = {}
    for q in asked:
        types[q.type] = types.get(q.type, 0) + 1
    return {
        "dataset": run.dataset.name,
        "kind": run.dataset.kind,
        "run_id": run.run_id,
        "tenant": run.tenant,
        "status": run.status,
        "k": k,
        "embedder": run.config.get("embedder"),
        "baseline": baseline,
        "counts": {"questions": len(asked), "negative": sum(q.is_negative for q in asked), "by_type": types},
        "taxonomy": {"k": TAXONOMY_K, "classes": TAXONOMY, "abstention": ABSTENTION},
        # jsonb does not keep key order, so the listed order is kept here for the stored summary.
        "strategy_order": [n for n in run.config.get("strategies", strategies) if n in strategies],
        "strategies": {n: strategies[n] for n in run.config.get("strategies", strategies) if n in strategies},
    }


def asked(run: EvalRun) -> list[dict[str, Any]]:
    """What the dataset says of each question the run asked: its text, type, hops, whether it is
    a negative, the expected answer and the gold ids (stored with a finished run's summary, so a
    report from the database can read its replies as one from the JSON does)."""
    answered = {r.question_id for r in run.results}
    return [{"id": q.id, "question": q.text, "type": q.type, "hops": q.hops, "negative": q.is_negative,
             "answer": q.answer, "gold": sorted(q.gold)} for q in run.dataset.questions if q.id in answered]


def question_rows(questions: Sequence[dict[str, Any]], results: Sequence[Result]) -> list[dict[str, Any]]:
    """One row per question (`asked`) with each strategy's metrics, ids, latency and, for the
    strategies that answer, its reply."""
    by_question: dict[str, dict[str, Any]] = {}
    for r in results:
        by_question.setdefault(r.question_id, {})[r.strategy] = {
            "metrics": r.metrics, "retrieved": r.retrieved, "latency_ms": r.latency_ms, **r.replied()
        }
    return [{**q, "results": by_question[q["id"]]} for q in questions if q["id"] in by_question]


def document(run: EvalRun) -> dict[str, Any]:
    """The summary plus one row per question (`question_rows`)."""
    return {**summarize(run), "questions": question_rows(asked(run), run.results)}


def twins_section(answered: Sequence[Result], twin_run: int, dataset: str,
                  twin_results: Sequence[Result]) -> dict[str, Any]:
    """The twins section of a run's document: each answering strategy's abstention curve over the
    run's answerable questions (`answered`) and their unanswerable twins (run `twin_run` on the
    twins' snapshot `dataset`), and one row per twin with its metrics and reply."""
    curves: dict[str, Any] = {}
    for name in dict.fromkeys(r.strategy for r in twin_results):
        mine = [r.metrics for r in answered if r.strategy == name and "reply_match" in r.metrics]
        twin = [r.metrics for r in twin_results if r.strategy == name and "support" in r.metrics]
        if mine and twin:
            curves[name] = abstention.to_json(abstention.from_results(mine, twin))
    questions = [{"id": r.question_id, "strategy": r.strategy, "metrics": r.metrics, **r.replied()}
                 for r in twin_results]
    return {"run_id": twin_run, "dataset": dataset, "abstention_curve": curves, "questions": questions}
