"""The built-in demo corpus and its golden questions are consistent (no database needed)."""

from __future__ import annotations

import json
import re
import tomllib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

DEMO = Path(__file__).resolve().parent.parent / "tortus_pg" / "demo"
DOC_SUFFIXES = {".md", ".html", ".pdf"}
EDGE_TYPES = {
    "depends_on",
    "caused_by",
    "implements",
    "supports",
    "contradicts",
    "owned_by",
    "affects",
    "supersedes",
    "part_of",
    "mentions",
}
QUESTION_TYPES = {"single-hop", "multi-hop", "clause", "contradiction", "negative"}
SLUG = re.compile(r"^[a-z][a-z0-9-]*$")


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def _manifest() -> list[dict[str, Any]]:
    with (DEMO / "sources.toml").open("rb") as fh:
        entries: list[dict[str, Any]] = tomllib.load(fh)["source"]
    return entries


def _golden() -> list[dict[str, Any]]:
    lines = (DEMO / "golden.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _text_source(rel: str) -> Path:
    """The file whose text a document's answers are checked against (PDF -> its source)."""
    path = Path(rel)
    if path.suffix == ".pdf":
        return DEMO / "pdf-src" / f"{path.stem}.txt"
    return DEMO / path


def _text(rel: str) -> str:
    return _text_source(rel).read_text(encoding="utf-8")


MANIFEST = _manifest()
MANIFEST_PATHS = [entry["path"] for entry in MANIFEST]
GOLDEN = _golden()


def test_manifest_paths_exist_inside_demo() -> None:
    assert MANIFEST, "manifest lists no documents"
    assert len(MANIFEST_PATHS) == len(set(MANIFEST_PATHS)), "duplicate manifest paths"
    root = DEMO.resolve()
    for entry in MANIFEST:
        path = (DEMO / entry["path"]).resolve()
        assert path.is_file(), entry["path"]
        assert path.is_relative_to(root), entry["path"]
        assert SLUG.match(entry["subgraph"]), entry["subgraph"]
        assert isinstance(entry.get("metadata", {}).get("team"), str), entry["path"]


def test_every_document_is_in_the_manifest() -> None:
    on_disk = {
        p.relative_to(DEMO).as_posix()
        for p in DEMO.rglob("*")
        if p.is_file() and p.suffix in DOC_SUFFIXES and p.parent != DEMO
    }
    assert on_disk == set(MANIFEST_PATHS)


def test_corpus_shape() -> None:
    subgraphs = Counter(entry["subgraph"] for entry in MANIFEST)
    assert 4 <= len(subgraphs) <= 6, subgraphs
    kinds = Counter(Path(p).suffix for p in MANIFEST_PATHS)
    assert kinds[".html"] >= 3 and kinds[".pdf"] >= 2 and kinds[".md"] >= 8, kinds
    total = sum((DEMO / p).stat().st_size for p in MANIFEST_PATHS if not p.endswith(".pdf"))
    total += sum(_text_source(p).stat().st_size for p in MANIFEST_PATHS if p.endswith(".pdf"))
    assert 40_000 <= total <= 90_000, total


def test_texts_are_utf8_and_pdf_sources_ascii() -> None:
    for rel in MANIFEST_PATHS:
        source = _text_source(rel)
        data = source.read_bytes()
        data.decode("ascii" if rel.endswith(".pdf") else "utf-8")
        assert data.strip(), rel


def test_golden_ids_unique_and_fields_valid() -> None:
    ids = [row["id"] for row in GOLDEN]
    assert len(ids) == len(set(ids))
    for row in GOLDEN:
        assert row["type"] in QUESTION_TYPES, row["id"]
        assert row["status"] == "draft", row["id"]
        assert row["question"].strip().endswith("?"), row["id"]
        assert isinstance(row["answer_aliases"], list), row["id"]
        for triple in row["path"]:
            assert len(triple) == 3 and triple[1] in EDGE_TYPES, (row["id"], triple)


def test_golden_sources_are_in_the_manifest() -> None:
    known = set(MANIFEST_PATHS)
    for row in GOLDEN:
        for source in row["sources"]:
            assert source in known, (row["id"], source)


def test_golden_mix() -> None:
    types = Counter(row["type"] for row in GOLDEN)
    assert types["multi-hop"] >= 6 and types["negative"] >= 6, types
    assert types["contradiction"] >= 1 and types["clause"] >= 1, types
    for row in GOLDEN:
        if row["type"] in {"multi-hop", "contradiction"}:
            assert row["hops"] >= 2 and len(row["sources"]) >= 2, row["id"]
    # multi-hop chains must cross subgraphs, or portals would never matter
    subgraph_of = {entry["path"]: entry["subgraph"] for entry in MANIFEST}
    crossing = [
        row
        for row in GOLDEN
        if row["type"] == "multi-hop" and len({subgraph_of[s] for s in row["sources"]}) > 1
    ]
    assert len(crossing) >= 6


@pytest.mark.parametrize(
    "row", [r for r in GOLDEN if r["type"] != "negative"], ids=lambda r: r["id"]
)
def test_answer_occurs_in_a_source(row: dict[str, Any]) -> None:
    assert isinstance(row["answer"], str) and row["answer"], row["id"]
    assert row["sources"] and 1 <= row["hops"] <= 3
    texts = [_norm(_text(source)) for source in row["sources"]]
    candidates = [row["answer"], *row["answer_aliases"]]
    assert any(_norm(c) in text for c in candidates for text in texts), candidates
    # every entity on the expected path is named in one of the question's sources
    for src, _edge, dst in row["path"]:
        for name in (src, dst):
            assert any(_norm(name) in text for text in texts), (row["id"], name)


@pytest.mark.parametrize(
    "row", [r for r in GOLDEN if r["type"] == "negative"], ids=lambda r: r["id"]
)
def test_negatives_have_no_answer(row: dict[str, Any]) -> None:
    assert row["answer"] is None
    assert row["sources"] == [] and row["path"] == [] and row["answer_aliases"] == []


def test_unanswerable_terms_are_absent() -> None:
    corpus = {rel: _norm(_text(rel)) for rel in MANIFEST_PATHS}
    for term in ("e-1099", "inc-2025-030", "7.3.5", "chief executive"):
        assert not [rel for rel, text in corpus.items() if term in text], term
    assert "p99" not in corpus["payments/ledger-service.md"]
    assert "p99" not in corpus["incidents/inc-2025-021.html"]


def test_clause_7_3_2_is_in_exactly_one_document() -> None:
    clause = re.compile(r"^\s*7\.3\.2\s+\w", re.MULTILINE)
    holders = [rel for rel in MANIFEST_PATHS if clause.search(_text(rel))]
    assert holders == ["security/information-security-policy.pdf"]
    distinctive = "rotated at least every 90 days"
    assert [rel for rel in MANIFEST_PATHS if distinctive in _norm(_text(rel))] == holders


def test_contradiction_is_stated_in_the_newer_document() -> None:
    adr = _norm(_text("platform/adr-007-retry-budget.md"))
    runbook = _norm(_text("payments/checkout-retry-runbook.md"))
    assert "adr-007 contradicts the checkout retry runbook" in adr
    assert "adr-007 supersedes the checkout retry runbook" in adr
    assert "retries are capped at 5" in adr and "retries are capped at 3" in runbook


@pytest.mark.parametrize("rel", [p for p in MANIFEST_PATHS if p.endswith(".pdf")])
def test_pdf_matches_its_source(rel: str) -> None:
    pypdf = pytest.importorskip("pypdf")
    reader = pypdf.PdfReader(DEMO / rel)
    assert len(reader.pages) >= 2
    pdf_text = _norm(" ".join(page.extract_text() for page in reader.pages))
    for block in re.split(r"\n\s*\n", _text(rel)):
        lines = [ln.strip().lstrip("#").strip() for ln in block.splitlines()]
        expected = _norm(" ".join(ln for ln in lines if ln and ln != "---"))
        if expected:
            assert expected in pdf_text, (rel, expected[:80])


def test_every_answerable_question_has_two_paraphrases_and_a_half() -> None:
    originals = {row["id"]: row for row in GOLDEN if not row.get("paraphrase_of")}
    assert {row["split"] for row in originals.values()} == {"tune", "check"}
    halves = Counter(row["split"] for row in originals.values())
    assert abs(halves["tune"] - halves["check"]) <= 1
    paraphrases = [row for row in GOLDEN if row.get("paraphrase_of")]
    for qid, row in originals.items():
        mine = [p for p in paraphrases if p["paraphrase_of"] == qid]
        assert len(mine) == (0 if row["type"] == "negative" else 2), qid
        assert {p["paraphrase_set"] for p in mine} == ({"a", "b"} if mine else set())
        for p in mine:
            assert (p["answer"], p["sources"], p["type"], p["split"]) == (row["answer"], row["sources"], row["type"],
                                                                          row["split"])
            assert p["question"] != row["question"]
