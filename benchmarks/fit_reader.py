"""Fit the reader's answer-sentence model (`query.read.ANSWERS`) on development sets and check
it on others.

Run it from the workspace where each set was evaluated once (`tortus-pg eval SET`), which
leaves the set's snapshot tenant in the workspace's database (the embedded server unless
TORTUS_DATABASE_URL is set). Every answerable question that is not a comparison is
answered by the engine as usual, while the reader's signals of every sentence of its last
reading are recorded, each sentence labelled by whether it holds the expected answer. The
model is fitted on the --fit sets (each set's two classes weighing alike), and for every set
the script prints how many questions' quoted sentences hold the expected answer with the
shipped model and with the refit one.

    python benchmarks/fit_reader.py --fit PATH/musique-train100 PATH/hotpotqa-train100 \
        --check PATH/2wiki-train500 PATH/enterprise/aldermoor/golden.jsonl
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import psycopg

from tortus_pg.config import load_settings
from tortus_pg.db import connect, database_url, tenant_scope
from tortus_pg.embed import Embedder, make_embedder
from tortus_pg.engine import answer
from tortus_pg.eval.datasets import load_dataset
from tortus_pg.eval.metrics import contains_answer
from tortus_pg.eval.runner import tenant_for
from tortus_pg.query import logistic
from tortus_pg.query.question import Question
from tortus_pg.query.read import ANSWERS, Sentence, Signals, quoted, signals
from tortus_pg.query.similarity import SentenceSimilarity
from tortus_pg.query.terms import Terms
from tortus_pg.synth import Source, Synthesis, extractive, page_of

COMPARISON_TYPES = {"comparison", "bridge_comparison"}  # answered by the compared values, not a sentence


@dataclass(frozen=True)
class Read:
    """One question's last reading: the reader's signals and which sentences hold the answer."""

    measured: Signals
    holds: np.ndarray


class Recorder:
    """The extractive synthesizer, recording the reader's signals of what it reads."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.last: tuple[Signals, list[Sentence]] | None = None

    def __call__(self, conn: psycopg.Connection, question: Question, evidence: Sequence[Source],
                 chains: Sequence[Sequence[int]], terms: Terms, ts_config: str = "english") -> Synthesis:
        similarity = SentenceSimilarity(self.embedder, question.vector)
        page = page_of(conn, evidence, chains, terms, ts_config, similarity, True)
        if page.sentences:
            measured = signals(page, terms.weights, question.answer_type, question.asked)
            self.last = measured, list(page.sentences)
        return extractive(conn, question, evidence, chains, terms, ts_config, similarity)


def readings(url: str, path: Path, embedder: Embedder) -> list[Read]:
    """The last reading of every answerable, non-comparison question of the set at `path`."""
    dataset = load_dataset(path)
    recorder = Recorder(embedder)
    out: list[Read] = []
    with connect(url) as conn, tenant_scope(conn, tenant_for(dataset)):
        for q in dataset.questions:
            expected = [x for x in (q.answer, *q.aliases) if x]
            if not expected or q.type in COMPARISON_TYPES:
                continue
            recorder.last = None
            answer(conn, q.text, embedder=embedder, store=False, synthesizer=recorder)
            if recorder.last is not None:
                measured, sentences = recorder.last
                holds = [bool(contains_answer(s.read_as, expected)) for s in sentences]
                out.append(Read(measured, np.array(holds)))
    return out


def sides(reads: Sequence[Read]) -> tuple[list[dict[str, float]], list[dict[str, float]]]:
    """The signals of the sentences that hold the answer, and of those that do not."""
    holding: list[dict[str, float]] = []
    other: list[dict[str, float]] = []
    for r in reads:
        for j, holds in enumerate(r.holds):
            (holding if holds else other).append({f: float(a[j]) for f, a in r.measured.arrays.items()})
    return holding, other


def answered(reads: Sequence[Read], model: logistic.Model) -> int:
    """How many questions' quoted sentences hold the expected answer under `model`."""
    return sum(bool(r.holds[quoted(r.measured, model.probabilities(r.measured.arrays, len(r.holds)))].any())
               for r in reads)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fit", nargs="+", type=Path, required=True, help="evaluated sets to fit on")
    parser.add_argument("--check", nargs="*", type=Path, default=[], help="evaluated sets to check on")
    parser.add_argument("--embedder", default="minilm")
    args = parser.parse_args()
    url = database_url(load_settings())
    embedder = make_embedder(args.embedder)
    data = {p: readings(url, p, embedder) for p in [*args.fit, *args.check]}
    refit = logistic.fit([sides(data[p]) for p in args.fit], tuple(ANSWERS.weights))
    print(f"ANSWERS = Model({refit.bias}, {dict(refit.weights)})")
    for path, reads in data.items():
        role = "fit" if path in args.fit else "check"
        print(f"{role:5s} {path}: quoted sentences hold the expected answer for {answered(reads, ANSWERS)} "
              f"(shipped) and {answered(reads, refit)} (refit) of {len(reads)} questions")


if __name__ == "__main__":
    main()
