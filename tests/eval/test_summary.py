"""Abstention scoring in evaluation summaries: only strategies that answer are scored."""

from pathlib import Path

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
        engine = StrategyResult(list(q.gold), withheld=answers[q.id], answer=said)
        metrics = question_metrics(engine, q.gold, negative=q.is_negative, expected=(q.answer, *q.aliases))
        results.append(Result(q.id, "engine", metrics, [], 5.0))
        search = StrategyResult(list(q.gold))
        results.append(Result(q.id, "search", question_metrics(search, q.gold, negative=q.is_negative), [], 1.0))
    dataset = Dataset("t", "golden", None, QUESTIONS)
    return EvalRun(1, "t", dataset, {"k": 5, "strategies": ["search", "engine"]}, ["search", "engine"], {}, results)


def test_abstention_counts_withheld_negatives_and_wrong_refusals() -> None:
    summary = summarize(run_with({"a": False, "b": True, "n1": True, "n2": False}))
    engine = summary["strategies"]["engine"]["abstention"]
    # "a" is answered with its alias, "b" is withheld: one answer match of two answerable questions.
    assert engine == {"accuracy_on_negatives": 0.5, "negatives": 2, "answered_when_answerable": 0.5,
                      "wrong_abstention": 1, "answer_match": 0.5}
    assert "abstention" not in summary["strategies"]["search"]


def test_the_report_has_an_abstention_table(tmp_path: Path) -> None:
    run = run_with({"a": False, "b": False, "n1": True, "n2": True})
    run.status = "done"
    text = render(document(run), tmp_path).read_text()
    assert "## Abstention and answers" in text and "| engine | 1.000 | 2 | 1.000 | 0 | 0.500 |" in text
