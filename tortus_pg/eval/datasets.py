"""Evaluation datasets: BEIR directories, multi-hop QA sets and golden question files.

`load_dataset` tells the layout from the path and turns every question into a `Question`
whose `gold` maps the ids a retriever should return (BEIR corpus ids, multi-hop passage ids,
golden-set source paths) to graded relevance. Every malformed line is reported with its
file and line number.
"""

from __future__ import annotations

import gzip
import io
import json
import math
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from importlib.resources import files
from pathlib import Path
from typing import Any

from tortus_pg.errors import InvalidInput
from tortus_pg.eval.metrics import contains_answer
from tortus_pg.ingest.corpus import read_passages

MAX_LINE_BYTES = 1 << 20  # one question or qrels row; a longer line is not a question
QRELS_HEADER = ("query-id", "corpus-id", "score")

Triple = tuple[str, str, str]


@dataclass(frozen=True)
class Question:
    """One evaluation question; a negative has no gold and no answer and should be refused."""

    id: str
    text: str
    gold: dict[str, float]
    answer: str | None
    aliases: tuple[str, ...]
    type: str
    path: tuple[Triple, ...] = ()
    hops: int | None = None
    status: str = ""
    split: str = ""  # "tune" or "check": the half of a golden set it belongs to
    paraphrase_of: str = ""  # the id of the question this one rephrases
    paraphrase_set: str = ""  # which set of paraphrases ("a", "b"): each set rephrases every question once

    @property
    def is_negative(self) -> bool:
        return not self.gold and self.answer is None


@dataclass(frozen=True)
class Dataset:
    """Questions of one dataset and where its corpus is.

    The corpus is a passages file for `tortus_pg.ingest.corpus.read_passages` (BEIR and
    multi-hop), the sources.toml manifest next to a golden set, or None when there is none.
    """

    name: str
    kind: str  # 'beir' | 'multihop' | 'golden'
    corpus_path: Path | None
    questions: tuple[Question, ...] = field(repr=False)
    excluded: frozenset[str] = frozenset()  # passage ids left out of the corpus (unanswerable twins)


TWIN = "unanswerable twin"  # the question type of a twin


class TwinGap(StrEnum):
    """What the snapshot of a multi-hop set's unanswerable twins leaves out."""

    GOLD = "gold"  # every gold passage: the documents about what a question names go too
    # Only the gold passages that state the answer (the last gold passage when none does): what
    # the question names stays and what it asks is gone, as with a real question the corpus
    # cannot answer.
    ANSWER = "answer"


def twins(dataset: Dataset, limit: int | None = None, gap: TwinGap = TwinGap.GOLD) -> Dataset:
    """The unanswerable twins of a multi-hop dataset's first `limit` questions, as MuSiQue-Full's
    contrast questions are built: the same questions asked over the corpus without their gold
    passages (`gap` GOLD) or without those stating the answer (ANSWER), so each one should be
    withheld."""
    if dataset.kind != "multihop" or dataset.corpus_path is None:
        raise InvalidInput(f"{dataset.name}: unanswerable twins need a multi-hop dataset (gold passage ids)")
    asked = dataset.questions[:limit] if limit else dataset.questions
    if gap is TwinGap.GOLD:
        excluded, name = frozenset(g for q in asked for g in q.gold), f"{dataset.name}-twins"
    else:
        excluded, name = _stating(asked, dataset.corpus_path), f"{dataset.name}-answer-twins"
    questions = tuple(replace(q, gold={}, answer=None, aliases=(), type=TWIN, path=()) for q in asked)
    return Dataset(name, dataset.kind, dataset.corpus_path, questions, excluded)


def _stating(questions: Sequence[Question], corpus: Path) -> frozenset[str]:
    """The gold passages of `questions` that contain the answer (or an alias); a question whose
    gold passages all miss it gives its last one."""
    gold = {g for q in questions for g in q.gold}
    texts = {p.id: f"{p.title}\n{p.text}" for p in read_passages(corpus) if p.id in gold}
    stating: set[str] = set()
    for q in questions:
        found = [g for g in q.gold if contains_answer(texts.get(g, ""), (q.answer, *q.aliases))]
        stating.update(found or list(q.gold)[-1:])
    return frozenset(stating)


def load_dataset(path: Path) -> Dataset:
    """Load a BEIR directory (qrels/), a multi-hop directory (questions.jsonl + corpus.jsonl),
    a golden-set .jsonl file, or 'demo' for the packaged golden set (unless a file or
    directory of that name exists).

    BEIR: queries from queries.<split>.jsonl or queries.jsonl, judgements from qrels/test.tsv
    (or the only .tsv there); only queries with a judgement above zero are kept. Multi-hop:
    gold is each of `gold_ids` at grade 1, the path is `evidence_triples` when present.
    Golden: gold is each of `sources` at grade 1. Raises InvalidInput naming file and line.
    """
    if str(path) == "demo" and not path.exists():
        return _golden(demo_golden(), name="demo")
    if path.is_dir():
        if (path / "qrels").is_dir():
            return _beir(path)
        if (path / "questions.jsonl").is_file() and (path / "corpus.jsonl").is_file():
            return _multihop(path)
    elif path.is_file() and path.name.endswith(".jsonl"):
        # A golden set beside its manifest is named by its folder: two handbooks' golden.jsonl
        # files get snapshots (tenants) of their own.
        named_by_folder = (path.parent / "sources.toml").is_file() and path.parent.name
        return _golden(path, name=named_by_folder or path.stem)
    elif not path.exists():
        raise InvalidInput(f"{path}: no such file or directory")
    raise InvalidInput(
        f"{path}: not a dataset; expected a BEIR directory with qrels/, a directory with "
        "questions.jsonl and corpus.jsonl, a golden-set .jsonl file, or 'demo'"
    )


def demo_golden() -> Path:
    """The golden questions of the demo corpus shipped with the package."""
    return Path(str(files("tortus_pg"))) / "demo" / "golden.jsonl"


def _open(path: Path) -> io.BufferedIOBase:
    return gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb")


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """Non-blank lines of a text file (.gz read transparently), numbered from 1."""
    try:
        with _open(path) as handle:
            number = 0
            while raw := handle.readline(MAX_LINE_BYTES + 1):
                number += 1
                if len(raw.rstrip(b"\r\n")) > MAX_LINE_BYTES:
                    raise InvalidInput(f"{path}:{number}: line longer than {MAX_LINE_BYTES} bytes")
                try:
                    text = raw.decode("utf-8-sig" if number == 1 else "utf-8")  # tolerate a BOM
                except UnicodeDecodeError:
                    raise InvalidInput(f"{path}:{number}: not UTF-8 text") from None
                if text.strip():
                    yield number, text
    except (OSError, EOFError, zlib.error) as exc:
        raise InvalidInput(f"{path}: cannot read ({exc})") from None


def _json_type(value: object) -> str:
    names = {bool: "boolean", int: "number", float: "number", str: "string", list: "array", dict: "object"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


@dataclass(frozen=True)
class _Row:
    """One JSON object line, with typed field access that names the line on error."""

    path: Path
    number: int
    data: dict[str, Any]

    def error(self, problem: str) -> InvalidInput:
        return InvalidInput(f"{self.path}:{self.number}: {problem}")

    def _field(self, key: str, expected: str, ok: tuple[type, ...], *, required: bool = True) -> Any:
        if key not in self.data:
            if required:
                raise self.error(f"missing field {key!r}")
            return None
        value = self.data[key]
        if not isinstance(value, ok) or (isinstance(value, bool) and bool not in ok):
            raise self.error(f"field {key!r} must be {expected}, got {_json_type(value)}")
        return value

    def ident(self, key: str) -> str:
        return str(self._field(key, "a string or number", (str, int)))

    def text(self, key: str) -> str:
        value: str = self._field(key, "a string", (str,))
        return value

    def text_or_null(self, key: str, *, required: bool = True) -> str | None:
        value: str | None = self._field(key, "a string or null", (str, type(None)), required=required)
        return value

    def count(self, key: str) -> int | None:
        value: int | None = self._field(key, "an integer or null", (int, type(None)), required=False)
        return value

    def texts(self, key: str, *, required: bool = True) -> tuple[str, ...]:
        items = self._field(key, "an array of strings", (list,), required=required) or []
        if not all(isinstance(item, str) for item in items):
            raise self.error(f"field {key!r} must be an array of strings")
        return tuple(items)

    def triples(self, key: str) -> tuple[Triple, ...]:
        items = self._field(key, "an array of [source, type, target] triples", (list,), required=False) or []
        for item in items:
            if not (isinstance(item, list) and len(item) == 3 and all(isinstance(x, str) for x in item)):
                raise self.error(f"field {key!r} must hold [source, type, target] string triples")
        return tuple((s, t, o) for s, t, o in items)


def _rows(path: Path) -> Iterator[_Row]:
    for number, line in _lines(path):
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"{path}:{number}: invalid JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(data, dict):
            raise InvalidInput(f"{path}:{number}: expected a JSON object, got {_json_type(data)}")
        yield _Row(path, number, data)


def _unique(questions: list[tuple[int, Question]], path: Path) -> tuple[Question, ...]:
    first: dict[str, int] = {}
    for number, q in questions:
        if q.id in first:
            raise InvalidInput(f"{path}:{number}: duplicate id {q.id!r} (first on line {first[q.id]})")
        first[q.id] = number
    return tuple(q for _, q in questions)


def _golden(path: Path, *, name: str) -> Dataset:
    questions = []
    for row in _rows(path):
        q = Question(
            id=row.ident("id"),
            text=row.text("question"),
            gold=dict.fromkeys(row.texts("sources"), 1.0),
            answer=row.text_or_null("answer"),
            aliases=row.texts("answer_aliases", required=False),
            type=row.text("type"),
            path=row.triples("path"),
            hops=row.count("hops"),
            status=row.text_or_null("status", required=False) or "",
            split=row.text_or_null("split", required=False) or "",
            paraphrase_of=row.text_or_null("paraphrase_of", required=False) or "",
            paraphrase_set=row.text_or_null("paraphrase_set", required=False) or "",
        )
        questions.append((row.number, q))
    manifest = path.parent / "sources.toml"  # the golden set's corpus, when it sits beside it
    return Dataset(name, "golden", manifest if manifest.is_file() else None, _unique(questions, path))


def _multihop(root: Path) -> Dataset:
    path = root / "questions.jsonl"
    questions = []
    for row in _rows(path):
        q = Question(
            id=row.ident("id"),
            text=row.text("question"),
            gold=dict.fromkeys(row.texts("gold_ids"), 1.0),
            answer=row.text_or_null("answer"),
            aliases=row.texts("answer_aliases", required=False),
            type=row.text_or_null("type", required=False) or "multi-hop",
            path=row.triples("evidence_triples"),
            hops=row.count("n_hops"),
        )
        questions.append((row.number, q))
    return Dataset(root.name, "multihop", root / "corpus.jsonl", _unique(questions, path))


def _first(root: Path, names: list[str]) -> Path | None:
    return next((root / n for n in names if (root / n).is_file()), None)


def _qrels(path: Path) -> dict[str, dict[str, float]]:
    """Query id -> {corpus id: grade} for the rows with a grade above zero."""
    judged: dict[str, dict[str, float]] = {}
    for number, line in _lines(path):
        cells = line.rstrip("\r\n").split("\t") if "\t" in line else line.split()
        if number == 1 and tuple(c.strip().lower() for c in cells) == QRELS_HEADER:
            continue
        if len(cells) != 3:
            raise InvalidInput(f"{path}:{number}: expected 3 tab-separated columns (query-id corpus-id score)")
        query, doc, score = (c.strip() for c in cells)
        try:
            grade = float(score)
        except ValueError:
            raise InvalidInput(f"{path}:{number}: score {score!r} is not a number") from None
        if not math.isfinite(grade):
            raise InvalidInput(f"{path}:{number}: score {score!r} is not a finite number")
        if grade > 0:
            judged.setdefault(query, {})[doc] = grade
    return judged


def _beir(root: Path) -> Dataset:
    qrels_dir = root / "qrels"
    tables = sorted(qrels_dir.glob("*.tsv"))
    qrels_path = qrels_dir / "test.tsv" if (qrels_dir / "test.tsv").is_file() else None
    if qrels_path is None and len(tables) == 1:
        qrels_path = tables[0]
    if qrels_path is None:
        found = ", ".join(t.name for t in tables) or "none"
        raise InvalidInput(f"{qrels_dir}: expected test.tsv or a single .tsv file, found {found}")
    split = qrels_path.stem
    names = [f"queries.{split}.jsonl", "queries.jsonl"]
    queries_path = _first(root, [n + gz for n in names for gz in ("", ".gz")])
    if queries_path is None:
        raise InvalidInput(f"{root}: no queries file ({' or '.join(names)})")
    judged = _qrels(qrels_path)
    questions = []
    for row in _rows(queries_path):
        qid = row.ident("_id")
        text = row.text("text")
        if qid in judged:
            questions.append((row.number, Question(qid, text, judged[qid], None, (), "retrieval")))
    corpus = _first(root, ["corpus.jsonl", "corpus.jsonl.gz"])
    return Dataset(root.name, "beir", corpus, _unique(questions, queries_path))
