"""Abstention curves over the support threshold, and the support model fitted to separate
answerable questions from their unanswerable twins."""

from __future__ import annotations

from pathlib import Path

import pytest

from tortus_pg.eval import abstention
from tortus_pg.query import logistic, support


def test_the_curve_trades_answering_for_withholding() -> None:
    answerable = [(0.9, True), (0.7, True), (0.4, False), (0.0, True)]  # the last: a hard refusal
    unanswerable = [0.8, 0.3, 0.1, 0.0]
    points = {p.threshold: p for p in abstention.curve(answerable, unanswerable, [0.0, 0.5, 0.95])}
    assert (points[0.0].answered_when_answerable, points[0.0].withheld_when_unanswerable) == (0.75, 0.25)
    assert (points[0.5].answered_when_answerable, points[0.5].answer_match) == (0.5, 0.5)
    assert points[0.5].withheld_when_unanswerable == 0.75 and points[0.5].balanced == 0.625
    assert (points[0.95].answered_when_answerable, points[0.95].withheld_when_unanswerable) == (0.0, 1.0)
    with pytest.raises(ValueError, match="needs answerable and unanswerable"):
        abstention.curve([], [0.1])


def test_the_curve_plot_is_written(tmp_path: Path) -> None:
    points = abstention.curve([(0.9, True), (0.2, False)], [0.1, 0.6])
    out = abstention.plot(points, "tiny", tmp_path / "curve.png", chosen=0.5)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_support_model_separates_answerable_questions_from_their_twins() -> None:
    answerable = [{"coverage": 0.8 + 0.02 * i, "dense": 0.6, "named": 1.0} for i in range(10)]
    twins = [{"coverage": 0.3 + 0.02 * i, "dense": 0.4, "named": float(i % 2)} for i in range(10)]
    model = logistic.fit([(answerable, twins)], support.FEATURES)
    assert all(model.probability(s) > 0.5 for s in answerable) and all(model.probability(s) < 0.5 for s in twins)
    assert model.weights["coverage"] > 0 and 0.0 <= model.probability({}) <= 1.0
    with pytest.raises(ValueError, match="needs positive and negative examples"):
        logistic.fit([(answerable, twins), (answerable, [])], support.FEATURES)


def test_the_shipped_models_read_only_signals_synthesis_measures() -> None:
    assert set(support.model_for(support.MODEL.embedder).weights) == set(support.FEATURES)
    for other in (None, "hash:384", "openai:text-embedding-3-small"):
        assert set(support.model_for(other).weights) == set(support.FEATURES) - {"dense"}
    assert 0.0 < support.THRESHOLD < 1.0
