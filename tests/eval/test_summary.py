"""Abstention scoring in evaluation summaries: only strategies that answer are scored."""

from pathlib import Path

from tortus_pg.eval import abstention
from tortus_pg.eval.datasets import Dataset, Question
from tortus_pg.eval.report import render
from tortus_pg.eval.strategies import StrategyResult
from tortus_pg.eval.summary import EvalRun, Result, document, question_metrics, summarize

QUESTIONS = (
    Question("a", "Who owns Key Vault?", {"kv.md": 1.0}, "Platform Team", ("a",), "single-hop"),
    Question("b", "Who owns Ledger?", {"ledger.md": 1.0}, "Core Ledger Team", (), "single-hop"),
    Question("n1", "Weather in Lisbon?", {}, None, (), "negative"),
    Question("n2", "Which stocks to buy?", {}, None, (), "negative"),
)


def run_with(answers: dict[str, bool]) -> EvalRun:
    """An engine that withholds per `answers` and a search strategy that cannot withhold."""
    results = []
    for q in QUESTIONS:
        said = None if answers[q.id] else f"It is {q.id}."
        engine = StrategyResult(list(q.gold), withheld=answers[q.id], answer=said,
                                short_answer=None if answers[q.id] else q.answer, confidence=0.8)
        metrics = question_metrics(engine, q.gold, negative=q.is_negative, expected=(q.answer, *q.aliases))
        results.append(Result(q.id, "engine", metrics, [], 5.0))
        search = StrategyResult(list(q.gold))
        results.append(Result(q.id, "search", question_metrics(search, q.gold, negative=q.is_negative), [], 1.0))
    dataset = Dataset("t", "golden", None, QUESTIONS)
    return EvalRun(1, "t", dataset, {"k": 5, "strategies": ["search", "engine"]}, ["search", "engine"], {}, results)


def test_abstention_counts_withheld_negatives_and_wrong_refusals() -> None:
    summary = summarize(run_with({"a": False, "b": True, "n1": True, "n2": False}))
    engine = summary["strategies"]["engine"]["abstention"]
    curve = {p["threshold"]: p for p in engine.pop("curve")}
    # "a" is answered with its alias (short answer: the expected one), "b" is withheld: one answer
    # match, exact short answer and token F1 of 1 of two answerable questions.
    assert engine == {"accuracy_on_negatives": 0.5, "negatives": 2, "answered_when_answerable": 0.5,
                      "wrong_abstention": 1, "answer_match": 0.5, "answer_em": 0.5, "answer_f1": 0.5}
    assert "abstention" not in summary["strategies"]["search"]
    # Every reply has support 0.8: up to that threshold all would be shown, above it all withheld.
    assert curve[0.8] == {"threshold": 0.8, "answered_when_answerable": 1.0, "answer_match": 0.5,
                          "withheld_when_unanswerable": 0.0}
    assert curve[0.85] == {"threshold": 0.85, "answered_when_answerable": 0.0, "answer_match": 0.0,
                           "withheld_when_unanswerable": 1.0}


def test_the_report_has_an_abstention_table(tmp_path: Path) -> None:
    run = run_with({"a": False, "b": False, "n1": True, "n2": True})
    run.status = "done"
    text = render(document(run), tmp_path).read_text()
    assert "## Abstention and answers" in text and "| engine | 1.000 | 2 | 1.000 | 0 | 0.500 | 1.000 | 1.000 |" in text
    # The golden set's own abstention curve, from its answerable questions and its negatives.
    assert "## Abstention curve of `engine` (answerable questions and the negatives)" in text
    assert "| 0.80 | 1.000 | 0.500 | 0.000 |" in text
    # Every threshold up to 0.8 answers both answerable questions and withholds neither negative,
    # every one above withholds all four: the balance is 0.5 everywhere, and the highest wins.
    assert "The best balance of answering and withholding (their mean) is at support 1.00" in text
    assert (tmp_path / "abstention-negatives-engine.png").read_bytes()[:4] == b"\x89PNG"


def test_paraphrases_are_counted_apart_from_the_originals_per_half() -> None:
    qs = (Question("a", "Who owns Key Vault?", {"kv.md": 1.0}, "Platform Team", (), "single-hop", split="tune"),
          Question("b", "Who owns Ledger?", {"l.md": 1.0}, "Core Ledger Team", (), "single-hop", split="check"),
          Question("a1", "Key Vault belongs to which team?", {"kv.md": 1.0}, "Platform Team", (), "single-hop",
                   paraphrase_of="a", paraphrase_set="a"),
          Question("b1", "Which team runs Ledger?", {"l.md": 1.0}, "Core Ledger Team", (), "single-hop",
                   paraphrase_of="b", paraphrase_set="a"))
    said = {"a": "Platform Team", "b": "Core Ledger Team", "a1": "Platform Team", "b1": None}
    results = []
    for q in qs:
        out = StrategyResult(list(q.gold), withheld=said[q.id] is None, answer=said[q.id])
        results.append(Result(q.id, "engine", question_metrics(out, q.gold, expected=(q.answer,)), [], 5.0))
    run = EvalRun(1, "t", Dataset("t", "golden", None, qs), {"k": 5, "strategies": ["engine"]}, ["engine"], {},
                  results)
    engine = summarize(run)["strategies"]["engine"]
    assert engine["abstention"]["answer_match"] == 1.0  # the originals only
    groups = engine["answer_groups"]
    assert groups["originals / all"]["matched"] == 2 and groups["paraphrases a / all"]["matched"] == 1
    assert groups["paraphrases a / check"] == {"answerable": 1, "matched": 0, "answered": 0, "negatives": 0,
                                               "negatives_withheld": 0}
    assert groups["paraphrases a / tune"]["matched"] == 1 and groups["originals / tune"]["matched"] == 1


def test_the_best_balance_of_a_curve_withholds_no_fewer_among_equals() -> None:
    point = abstention.CurvePoint
    curve = [point(0.3, 1.0, 0.6, 0.2), point(0.4, 0.8, 0.5, 0.6), point(0.5, 0.6, 0.4, 0.8), point(0.6, 0.2, 0.1, 1.0)]
    # 0.4 and 0.5 both balance at 0.7: the higher threshold withholds more at no cost to the balance.
    assert abstention.best_balance(curve) == curve[2]
    assert abstention.best_balance(curve[:2]) == curve[1]
