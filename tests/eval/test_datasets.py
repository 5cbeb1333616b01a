"""Loading evaluation datasets of each layout, and line-numbered errors for bad input."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from tortus_pg.errors import InvalidInput
from tortus_pg.eval import datasets
from tortus_pg.eval.datasets import Question, load_dataset
from tortus_pg.ingest.corpus import read_passages


def _jsonl(path: Path, rows: list[Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


GOLDEN = [
    {
        "id": "g1",
        "question": "Which team owns the Checkout Gateway?",
        "answer": "Payments Team",
        "answer_aliases": ["payments"],
        "sources": ["payments/checkout-gateway.md"],
        "hops": 1,
        "path": [["Checkout Gateway", "owned_by", "Payments Team"]],
        "type": "single-hop",
        "status": "checked",
    },
    {
        "id": "g2",
        "question": "Who owns the cluster the Ledger Service writes to?",
        "answer": "Platform Team",
        "answer_aliases": [],
        "sources": ["payments/ledger-service.md", "platform/postgres-clusters.md"],
        "hops": 2,
        "path": [],
        "type": "multi-hop",
        "status": "draft",
    },
    {
        "id": "g3",
        "question": "What will the weather be tomorrow?",
        "answer": None,
        "answer_aliases": [],
        "sources": [],
        "hops": 0,
        "path": [],
        "type": "negative",
        "status": "draft",
    },
]


def test_golden_file_loads_sources_as_gold(tmp_path: Path) -> None:
    ds = load_dataset(_jsonl(tmp_path / "mine.jsonl", GOLDEN))
    assert (ds.name, ds.kind, ds.corpus_path) == ("mine", "golden", None)
    g1, g2, g3 = ds.questions
    assert g1 == Question(
        id="g1",
        text="Which team owns the Checkout Gateway?",
        gold={"payments/checkout-gateway.md": 1.0},
        answer="Payments Team",
        aliases=("payments",),
        type="single-hop",
        path=(("Checkout Gateway", "owned_by", "Payments Team"),),
        hops=1,
        status="checked",
    )
    assert g2.gold == {"payments/ledger-service.md": 1.0, "platform/postgres-clusters.md": 1.0}
    assert [q.is_negative for q in ds.questions] == [False, False, True]
    assert g3.gold == {} and g3.answer is None


def test_golden_corpus_is_the_manifest_beside_it(tmp_path: Path) -> None:
    (tmp_path / "sources.toml").write_text("", encoding="utf-8")
    ds = load_dataset(_jsonl(tmp_path / "golden.jsonl", GOLDEN[:1]))
    assert ds.corpus_path == tmp_path / "sources.toml"


def test_golden_sets_beside_their_manifests_are_named_by_folder(tmp_path: Path) -> None:
    names = []
    for corpus in ("north", "south"):
        (tmp_path / corpus).mkdir()
        (tmp_path / corpus / "sources.toml").write_text("", encoding="utf-8")
        names.append(load_dataset(_jsonl(tmp_path / corpus / "golden.jsonl", GOLDEN[:1])).name)
    assert names == ["north", "south"]


def test_golden_optional_fields_default(tmp_path: Path) -> None:
    row = {"id": 7, "question": "q?", "answer": "a", "sources": ["s.md"], "type": "single-hop"}
    (q,) = load_dataset(_jsonl(tmp_path / "g.jsonl", [row])).questions
    assert (q.id, q.aliases, q.path, q.hops, q.status) == ("7", (), (), None, "")


def test_packaged_demo_golden_set_loads() -> None:
    ds = load_dataset(Path("demo"))
    assert (ds.name, ds.kind) == ("demo", "golden")
    assert ds.corpus_path is not None and ds.corpus_path.name == "sources.toml"
    assert len(ds.questions) >= 30
    negatives = [q for q in ds.questions if q.is_negative]
    assert negatives, "the demo golden set has unanswerable questions"
    assert {q.id for q in negatives} == {q.id for q in ds.questions if q.type == "negative"}
    assert all(q.gold and q.answer for q in ds.questions if not q.is_negative)
    assert any(len(q.path) >= 2 for q in ds.questions)
    assert load_dataset(datasets.demo_golden()).questions == ds.questions


def _multihop(root: Path, questions: list[Any]) -> Path:
    _jsonl(
        root / "corpus.jsonl",
        [
            {"id": "p0", "title": "Get Low", "text": "Get Low is a song by Dillon Francis."},
            {"id": "p1", "title": "Dillon Francis", "text": "Dillon Francis was born on October 5, 1987."},
        ],
    )
    _jsonl(root / "questions.jsonl", questions)
    return root


def test_multihop_directory_loads_gold_ids_and_evidence(tmp_path: Path) -> None:
    root = _multihop(
        tmp_path / "tiny-2wiki",
        [
            {
                "id": "m1",
                "question": "When was the performer of Get Low born?",
                "answer": "October 5, 1987",
                "answer_aliases": ["5 October 1987"],
                "gold_ids": ["p0", "p1"],
                "gold_titles": ["Get Low", "Dillon Francis"],
                "type": "compositional",
                "evidence_triples": [["Get Low", "performer", "Dillon Francis"]],
                "gold_complete": True,
            },
            {"id": "m2", "question": "Who?", "answer": "x", "gold_ids": ["p1"], "n_hops": 2},
        ],
    )
    ds = load_dataset(root)
    assert (ds.name, ds.kind, ds.corpus_path) == ("tiny-2wiki", "multihop", root / "corpus.jsonl")
    m1, m2 = ds.questions
    assert m1.gold == {"p0": 1.0, "p1": 1.0}
    assert m1.aliases == ("5 October 1987",)
    assert m1.path == (("Get Low", "performer", "Dillon Francis"),)
    assert (m1.type, m1.hops) == ("compositional", None)
    assert (m2.type, m2.hops, m2.path) == ("multi-hop", 2, ())
    assert ds.corpus_path is not None
    assert [p.id for p in read_passages(ds.corpus_path)] == ["p0", "p1"]


def _beir(root: Path, qrels: str, queries: str = "queries.jsonl") -> Path:
    _jsonl(root / "corpus.jsonl", [{"_id": "c1", "title": "", "text": "one"}, {"_id": "c2", "text": "two"}])
    _jsonl(
        root / queries,
        [
            {"_id": "q1", "text": "first", "metadata": {}},
            {"_id": "q2", "text": "no judgements"},
            {"_id": "3", "text": "third"},
        ],
    )
    (root / "qrels").mkdir(exist_ok=True)
    (root / "qrels" / "test.tsv").write_text(qrels, encoding="utf-8")
    return root


def test_beir_directory_keeps_judged_queries_with_graded_gold(tmp_path: Path) -> None:
    root = _beir(tmp_path / "tiny", "query-id\tcorpus-id\tscore\nq1\tc1\t2\nq1\tc2\t1\n3\tc2\t1\n3\tc1\t0\n")
    ds = load_dataset(root)
    assert (ds.name, ds.kind, ds.corpus_path) == ("tiny", "beir", root / "corpus.jsonl")
    assert [(q.id, q.text, q.gold) for q in ds.questions] == [
        ("q1", "first", {"c1": 2.0, "c2": 1.0}),
        ("3", "third", {"c2": 1.0}),  # the grade-0 judgement is not gold
    ]
    assert not any(q.is_negative for q in ds.questions)
    assert ds.corpus_path is not None
    assert [p.id for p in read_passages(ds.corpus_path)] == ["c1", "c2"]


def test_beir_prefers_the_split_queries_file_and_reads_gzip(tmp_path: Path) -> None:
    root = _beir(tmp_path / "b", "query-id\tcorpus-id\tscore\nq1\tc1\t1\n")
    split = root / "queries.test.jsonl.gz"
    split.write_bytes(gzip.compress(b'{"_id": "q1", "text": "from the test split"}\n'))
    (q,) = load_dataset(root).questions
    assert q.text == "from the test split"


def test_beir_uses_a_single_other_qrels_file(tmp_path: Path) -> None:
    root = _beir(tmp_path / "b", "")
    (root / "qrels" / "test.tsv").rename(root / "qrels" / "dev.tsv")
    (root / "qrels" / "dev.tsv").write_text("q1 c2 1\n", encoding="utf-8")  # no header, spaces
    assert [q.gold for q in load_dataset(root).questions] == [{"c2": 1.0}]
    (root / "qrels" / "train.tsv").write_text("q1\tc1\t1\n", encoding="utf-8")
    with pytest.raises(InvalidInput, match="expected test.tsv or a single .tsv file, found dev.tsv, train.tsv"):
        load_dataset(root)


def test_invalid_json_names_the_line(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "g.jsonl", [GOLDEN[0], GOLDEN[1], '{"id": "g3", "question": '])
    with pytest.raises(InvalidInput, match=r"g\.jsonl:3: invalid JSON"):
        load_dataset(path)


def test_missing_field_names_the_line_and_field(tmp_path: Path) -> None:
    row = {k: v for k, v in GOLDEN[1].items() if k != "question"}
    path = _jsonl(tmp_path / "g.jsonl", [GOLDEN[0], row])
    with pytest.raises(InvalidInput, match=r"g\.jsonl:2: missing field 'question'"):
        load_dataset(path)


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("sources", "payments/a.md", "field 'sources' must be an array of strings, got string"),
        ("sources", ["a.md", 3], "field 'sources' must be an array of strings"),
        ("question", None, "field 'question' must be a string, got null"),
        ("answer", 42, "field 'answer' must be a string or null, got number"),
        ("hops", True, "field 'hops' must be an integer or null, got boolean"),
        ("path", [["a", "b"]], "field 'path' must hold [source, type, target] string triples"),
        ("id", ["g1"], "field 'id' must be a string or number, got array"),
    ],
)
def test_wrong_types_name_the_line_and_field(tmp_path: Path, field: str, value: Any, problem: str) -> None:
    path = _jsonl(tmp_path / "g.jsonl", [GOLDEN[0], GOLDEN[2], {**GOLDEN[1], field: value}])
    with pytest.raises(InvalidInput) as info:
        load_dataset(path)
    assert str(info.value) == f"{path}:3: {problem}"


def test_blank_lines_are_skipped_but_counted(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "g.jsonl", [GOLDEN[0], "", "   ", "[1, 2]"])
    with pytest.raises(InvalidInput, match=r"g\.jsonl:4: expected a JSON object, got array"):
        load_dataset(path)


def test_duplicate_ids_are_refused(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "g.jsonl", [GOLDEN[0], GOLDEN[2], GOLDEN[0]])
    with pytest.raises(InvalidInput, match=r"g\.jsonl:3: duplicate id 'g1' \(first on line 1\)"):
        load_dataset(path)


def test_overlong_lines_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(datasets, "MAX_LINE_BYTES", 400)
    path = _jsonl(tmp_path / "g.jsonl", [GOLDEN[2], {**GOLDEN[2], "id": "g4", "question": "x" * 500}])
    with pytest.raises(InvalidInput, match=r"g\.jsonl:2: line longer than 400 bytes"):
        load_dataset(path)


def test_non_utf8_line_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "g.jsonl"
    path.write_bytes(json.dumps(GOLDEN[0]).encode() + b'\n{"id": "\xff"}\n')
    with pytest.raises(InvalidInput, match=r"g\.jsonl:2: not UTF-8 text"):
        load_dataset(path)


def test_multihop_error_names_the_questions_file(tmp_path: Path) -> None:
    root = _multihop(tmp_path / "set", [{"id": "m1", "question": "q", "answer": "a"}])
    with pytest.raises(InvalidInput, match=r"questions\.jsonl:1: missing field 'gold_ids'"):
        load_dataset(root)


def test_qrels_score_must_be_a_number(tmp_path: Path) -> None:
    root = _beir(tmp_path / "b", "query-id\tcorpus-id\tscore\nq1\tc1\t1\nq1\tc2\thigh\n")
    with pytest.raises(InvalidInput, match=r"test\.tsv:3: score 'high' is not a number"):
        load_dataset(root)


@pytest.mark.parametrize(
    ("row", "problem"),
    [
        ("q1\tc1", "expected 3 tab-separated columns"),
        ("q1\tc1\tnan", "score 'nan' is not a finite number"),
    ],
)
def test_bad_qrels_rows_name_the_line(tmp_path: Path, row: str, problem: str) -> None:
    root = _beir(tmp_path / "b", f"query-id\tcorpus-id\tscore\n{row}\n")
    with pytest.raises(InvalidInput, match=rf"test\.tsv:2: {problem}"):
        load_dataset(root)


def test_beir_without_queries_is_refused(tmp_path: Path) -> None:
    root = _beir(tmp_path / "b", "q1\tc1\t1\n")
    (root / "queries.jsonl").unlink()
    with pytest.raises(InvalidInput, match="no queries file"):
        load_dataset(root)


def test_unknown_layouts_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="no such file or directory"):
        load_dataset(tmp_path / "missing")
    (tmp_path / "notes.txt").write_text("hello", encoding="utf-8")
    with pytest.raises(InvalidInput, match="not a dataset"):
        load_dataset(tmp_path / "notes.txt")
    with pytest.raises(InvalidInput, match="not a dataset"):
        load_dataset(tmp_path)
