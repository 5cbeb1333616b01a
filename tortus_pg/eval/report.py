"""A markdown report with plots from an evaluation summary (the JSON `tortus-pg eval` writes)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from tortus_pg.errors import InvalidInput
from tortus_pg.eval import abstention
from tortus_pg.eval.summary import ABSTENTION, TAXONOMY
from tortus_pg.query.support import THRESHOLD

TABLE_METRICS = ("recall@2", "recall@5", "recall@10", "ndcg@10", "mrr", "all_gold@5")
HEADINGS = {"recall@2": "R@2", "recall@5": "R@5", "recall@10": "R@10", "ndcg@10": "nDCG@10", "mrr": "MRR",
            "all_gold@5": "all-gold@5", "all_gold@10": "all-gold@10"}
CI_METRICS = ("recall@5", "all_gold@5", "ndcg@10")
PLOTS = {"recall_at_k.png": "Recall@k per strategy", "latency_recall.png": "Latency (p50, bar to p95) against recall@5",
         "ci_bars.png": "Means with 95% bootstrap intervals"}


def _f(value: Any, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _ci(entry: dict[str, Any], metric: str) -> str:
    lo, hi = entry.get("ci95", {}).get(metric, [None, None])
    return f"{_f(entry.get(metric))} [{_f(lo)}, {_f(hi)}]" if lo is not None else _f(entry.get(metric))


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header), *("| " + " | ".join(r) + " |" for r in rows)]


def _strategy_table(done: dict[str, dict[str, Any]]) -> list[str]:
    header = ["strategy", *(HEADINGS[m] for m in TABLE_METRICS), "p50 ms", "p95 ms", "fan-out", "scored"]
    rows = [
        [name, *(_ci(e, m) if m == "recall@5" else _f(e.get(m)) for m in TABLE_METRICS),
         _f(e.get("latency_p50_ms"), 1), _f(e.get("latency_p95_ms"), 1), _f(e.get("fan_out"), 2),
         f"{e['scored']}/{e['questions']}"]
        for name, e in done.items()
    ]
    return _table(header, rows)


def _paired_table(done: dict[str, dict[str, Any]]) -> list[str]:
    rows = []
    for name, e in done.items():
        if "vs_baseline" not in e:
            continue
        cells = []
        for metric in CI_METRICS:
            p = e["vs_baseline"][metric]
            lo, hi = p["ci95"]
            mark = " *" if p.get("p_holm") is not None and p["p_holm"] < 0.05 else ""
            cells.append(f"{p['diff']:+.3f} [{_f(lo)}, {_f(hi)}]{mark}" if p["diff"] is not None else "–")
        rows.append([name, *cells])
    return _table(["strategy", *(f"Δ {HEADINGS[m]}" for m in CI_METRICS)], rows)


def _type_table(done: dict[str, dict[str, Any]], metrics: tuple[str, ...], scored_only: bool = False) -> list[str]:
    """One row per question type with each strategy's `metrics` ("a / b / …"); with `scored_only`,
    not the types where no strategy has the first of them."""
    types = sorted({t for e in done.values() for t, b in e.get("by_type", {}).items()
                    if not scored_only or b.get(metrics[0]) is not None})
    rows = []
    for t in types:
        n = next(e["by_type"][t]["n"] for e in done.values() if t in e["by_type"])
        cells = [" / ".join(_f(b.get(m)) for m in metrics) if (b := e["by_type"].get(t)) else "–"
                 for e in done.values()]
        rows.append([t, str(n), *cells])
    return _table(["type", "n", *done], rows)


def _answer_type_table(done: dict[str, dict[str, Any]]) -> list[str]:
    """Answer match, short-answer exact match and F1 by question type, for strategies that answer."""
    answering = {n: e for n, e in done.items() if e.get("abstention")}
    table = _type_table(answering, ("answer_match", "answer_em", "answer_f1"), scored_only=True)
    if len(table) <= 2:  # header and rule only: no type has an answer metric
        return []
    return ["## Answers by question type (answer match / short EM / short F1)", "", *table, ""]


def _failure_table(summary: dict[str, Any], done: dict[str, dict[str, Any]]) -> list[str]:
    classes = [c for c, _ in _in_order(summary["taxonomy"]["classes"], TAXONOMY)]
    rows = [[name, str(e["scored"]), str(e["scored"] - sum(e["failures"].values())),
             *(str(e["failures"][c]) for c in classes)] for name, e in done.items()]
    k = summary["taxonomy"]["k"]
    return _table(["strategy", "scored", f"all gold in top {k}", *(c.replace("_", " ") for c in classes)], rows)


def _abstention(summary: dict[str, Any], done: dict[str, dict[str, Any]]) -> list[str]:
    answering = {n: e["abstention"] for n, e in done.items() if e.get("abstention")}
    if not answering:
        return ["Abstention is not scored: no strategy in this run answers (or withholds) questions.", ""]
    rows = [[n, _f(a["accuracy_on_negatives"]), str(a["negatives"]), _f(a["answered_when_answerable"]),
             str(a["wrong_abstention"]), _f(a.get("answer_match")), _f(a.get("answer_em")), _f(a.get("answer_f1"))]
            for n, a in answering.items()]
    lines = ["## Abstention and answers", "", *_table(
        ["strategy", "negatives withheld", "negatives", "answerable answered", "wrong abstentions", "answer match",
         "short EM", "short F1"], rows)]
    notes = _in_order(summary["taxonomy"]["abstention"], ABSTENTION)
    return [*lines, "", *(f"- {c.replace('_', ' ')}: {t}" for c, t in notes), ""]


def _in_order(notes: dict[str, str], reference: dict[str, str]) -> list[tuple[str, str]]:
    """`notes` in the order `reference` defines them (a summary read back from jsonb has its keys
    reordered), any others after."""
    order = list(reference)
    return sorted(notes.items(), key=lambda note: order.index(note[0]) if note[0] in order else len(order))


def _curves(summary: dict[str, Any], done: dict[str, dict[str, Any]], out_dir: Path) -> list[str]:
    """The abstention curve of each answering strategy over the answerable questions and the
    negatives, when the run asked negatives, and their unanswerable twins, when it asked twins."""
    lines = []
    for name, e in done.items():
        if points := (e.get("abstention") or {}).get("curve"):
            lines += _curve(summary, name, points, "negatives", out_dir / f"abstention-negatives-{name}.png")
    for name, points in summary.get("twins", {}).get("abstention_curve", {}).items():
        lines += _curve(summary, name, points, "unanswerable twins", out_dir / f"abstention-{name}.png")
    return lines


def _curve(summary: dict[str, Any], name: str, points: list[dict[str, float]], unanswerable: str,
           png: Path) -> list[str]:
    curve = [abstention.CurvePoint(**p) for p in points]
    best = abstention.best_balance(curve)
    abstention.plot(curve, f"{name} on {summary['dataset']} ({unanswerable})", png, chosen=best.threshold)
    rows = [[f"{p.threshold:.2f}", _f(p.answered_when_answerable), _f(p.answer_match),
             _f(p.withheld_when_unanswerable)] for p in curve[::2]]
    return [f"## Abstention curve of `{name}` (answerable questions and the {unanswerable})", "",
            *_table(["support threshold", "answered when answerable", "with the expected text",
                     "withheld when unanswerable"], rows), "",
            f"The best balance of answering and withholding (their mean) is at support {best.threshold:.2f}: "
            f"{_f(best.answered_when_answerable)} of the answerable questions answered "
            f"({_f(best.answer_match)} with the expected text), {_f(best.withheld_when_unanswerable)} of the "
            f"{unanswerable} withheld. The engine answers at {THRESHOLD:.2f} unless the tenant or the question "
            "sets `min_support`.", "", f"![abstention curve]({png.name})", ""]


class Miss(Enum):
    """How a reply missed, worst for a reader of the answer first."""

    NEGATIVE_ANSWERED = "answered a question its sources cannot answer"
    ANSWERED_WRONG = "answered without the expected text"
    DRAFT_WITHHELD = "withheld, though its draft holds the expected text"
    WITHHELD = "withheld"


MISSES_SHOWN = 40  # per strategy; the JSON rows and `tortus.eval_reply` hold every reply


def miss_of(negative: bool, metrics: dict[str, Any]) -> Miss | None:
    """How a strategy's reply to one question missed, from its metrics; None when it did not."""
    if negative:
        return None if metrics.get("withheld") else Miss.NEGATIVE_ANSWERED
    if metrics.get("withheld"):
        return Miss.DRAFT_WITHHELD if metrics.get("reply_match") else Miss.WITHHELD
    return None if metrics.get("answer_match") else Miss.ANSWERED_WRONG


def _cell(text: str | None, width: int = 160) -> str:
    flat = " ".join((text or "").split()).replace("|", "\\|")
    return flat if len(flat) <= width else flat[:width - 1] + "…"


def _misses(summary: dict[str, Any]) -> list[str]:
    """The replies of each answering strategy that missed, to read: the negatives it answered,
    the answers without the expected text, the withheld ones (highest support first)."""
    lines = []
    for name in summary.get("strategy_order") or list(summary["strategies"]):
        rows = []
        for q in summary.get("questions", []):
            result = q["results"].get(name, {})
            if "reply" in result and (miss := miss_of(q["negative"], result["metrics"])) is not None:
                rows.append((miss, q, result))
        if not rows:
            continue
        order = list(Miss)
        rows.sort(key=lambda r: (order.index(r[0]), -(r[2]["metrics"].get("support") or 0.0)))
        table = [[f"{q['id']}: {_cell(q['question'], 100)}", _cell(q.get("answer") or "(none)", 40), miss.value,
                  _f(result["metrics"].get("support"), 2), _cell(result["reply"]["answer"] or result["reply"]["draft"])]
                 for miss, q, result in rows[:MISSES_SHOWN]]
        more = len(rows) - MISSES_SHOWN
        lines += [f"## Replies of `{name}` that missed ({len(rows)})", "",
                  *_table(["question", "expected", "miss", "support", "reply (or its draft)"], table), "",
                  *([f"{more} more in the JSON rows and in `tortus.eval_reply`.", ""] if more > 0 else [])]
    return lines


def _plots(done: dict[str, dict[str, Any]], out_dir: Path) -> None:
    fig = Figure(figsize=(6, 4), layout="constrained")
    ax = fig.add_subplot()
    for name, e in done.items():
        curve = sorted((int(c), v or 0.0) for c, v in e.get("recall_curve", {}).items())
        ax.plot([c for c, _ in curve], [v for _, v in curve], marker="o", label=name)
    ax.set(xlabel="k", ylabel="mean recall@k", ylim=(0, 1.02), title="Recall@k")
    ax.legend()
    fig.savefig(out_dir / "recall_at_k.png", dpi=120)

    fig = Figure(figsize=(6, 4), layout="constrained")
    ax = fig.add_subplot()
    for name, e in done.items():
        p50, p95, recall = e.get("latency_p50_ms") or 0.0, e.get("latency_p95_ms") or 0.0, e.get("recall@5") or 0.0
        ax.errorbar([p50], [recall], xerr=[[0.0], [max(p95 - p50, 0.0)]], fmt="o", capsize=3, label=name)
        ax.annotate(name, (p50, recall), textcoords="offset points", xytext=(5, 5))
    ax.set(xlabel="latency ms (p50, bar to p95)", ylabel="mean recall@5", ylim=(0, 1.02), title="Latency vs recall")
    fig.savefig(out_dir / "latency_recall.png", dpi=120)

    fig = Figure(figsize=(7, 4.5), layout="constrained")
    ax = fig.add_subplot()
    width = 0.8 / max(len(done), 1)
    for i, (name, e) in enumerate(done.items()):
        means = [e.get(m) or 0.0 for m in CI_METRICS]
        bounds = [e.get("ci95", {}).get(m) or [None, None] for m in CI_METRICS]
        lower = [m - lo if lo is not None else 0.0 for m, (lo, _) in zip(means, bounds, strict=True)]
        upper = [hi - m if hi is not None else 0.0 for m, (_, hi) in zip(means, bounds, strict=True)]
        xs = [j + i * width for j in range(len(CI_METRICS))]
        ax.bar(xs, means, width, yerr=[lower, upper], capsize=3, label=name)
    ax.set_xticks([j + width * (len(done) - 1) / 2 for j in range(len(CI_METRICS))], [HEADINGS[m] for m in CI_METRICS])
    ax.set(ylim=(0, 1.05), ylabel="mean", title="Per-strategy means, 95% bootstrap CI")
    fig.legend(loc="outside lower center", ncols=min(len(done), 4), fontsize="small")
    fig.savefig(out_dir / "ci_bars.png", dpi=120)


def render(summary: dict[str, Any], out_dir: Path) -> Path:
    """Write report.md (strategy table, paired differences, per-type breakdown, failure
    taxonomy, abstention, and the replies that missed when the JSON holds them) and the PNG
    plots it links into `out_dir`; return the report's path."""
    strategies = summary.get("strategies")
    if not isinstance(strategies, dict) or "taxonomy" not in summary:
        raise InvalidInput("not an evaluation summary: expected the JSON written by `tortus-pg eval`")
    order = summary.get("strategy_order") or list(strategies)
    done = {n: strategies[n] for n in order if strategies[n].get("status") == "done"}
    skipped = {n: strategies[n].get("reason", "") for n in order if strategies[n].get("status") != "done"}
    out_dir.mkdir(parents=True, exist_ok=True)
    counts = summary["counts"]
    lines = [
        f"# Retrieval evaluation: {summary['dataset']} (run {summary['run_id']})",
        "",
        f"{counts['questions']} questions ({counts['negative']} negative, excluded from retrieval metrics), "
        f"k = {summary['k']}, embedder `{summary.get('embedder')}`, status {summary['status']}.",
        "R@5 shows the mean with its 95% percentile-bootstrap interval; latency covers every question.",
        "",
        "## Strategies",
        "",
        *_strategy_table(done),
        "",
        *(f"- `{n}` skipped: {reason}" for n, reason in skipped.items()),
        "",
        f"## Paired difference to `{summary['baseline']}`",
        "",
        "Per-question differences resampled as pairs, with their 95% intervals; * marks a difference "
        "whose p-value stays under 0.05 after Holm's adjustment over every strategy compared with the baseline.",
        "",
        *_paired_table(done),
        "",
        "## By question type (R@5 / all-gold@5)",
        "",
        *_type_table(done, ("recall@5", "all_gold@5")),
        "",
        f"## Failure taxonomy (questions whose gold is not all in the top {summary['taxonomy']['k']})",
        "",
        *_failure_table(summary, done),
        "",
        *(f"- {c.replace('_', ' ')}: {text}" for c, text in _in_order(summary["taxonomy"]["classes"], TAXONOMY)),
        "",
        *_abstention(summary, done),
        *_answer_type_table(done),
        *_curves(summary, done, out_dir),
        *_misses(summary),
        *(["## Plots", "", *(f"![{title}]({name})" for name, title in PLOTS.items()), ""] if done else []),
    ]
    if done:
        _plots(done, out_dir)
    path = out_dir / "report.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path
