"""`tortus-pg golden-set` and `tortus-pg audit`: summary, copy, review sheet round trip and
line-numbered refusals that leave the golden file untouched (no database needed)."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from tortus_pg.cli.main import app
from typer.testing import CliRunner, Result

from tortus_pg.errors import InvalidInput
from tortus_pg.eval import golden
from tortus_pg.eval.datasets import Question, demo_golden, load_dataset

runner = CliRunner()
DEMO_LINES = demo_golden().read_text(encoding="utf-8").splitlines()
DEMO = [json.loads(line) for line in DEMO_LINES]


def cli(ws: Path, *args: str) -> Result:
    return runner.invoke(app, ["--workspace", str(ws), *args], env={"TORTUS_DATABASE_URL": ""})


def fails(result: Result, message: str) -> None:
    assert result.exit_code != 0 and isinstance(result.exception, InvalidInput), result.output
    assert message in str(result.exception), str(result.exception)


def read_sheet(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8"))))


def write_sheet(path: Path, rows: list[dict[str, str]], *, delimiter: str = ",") -> Path:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, list(rows[0]), delimiter=delimiter)
        writer.writeheader()
        writer.writerows(rows)
    return path


@pytest.fixture
def copy(workspace: Path) -> Path:
    """A user's copy of the demo golden set, made with the CLI."""
    out = workspace / "my-golden.jsonl"
    result = cli(workspace, "golden-set", "--out", str(out))
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture
def sheet(workspace: Path, copy: Path) -> list[dict[str, str]]:
    out = workspace / "review.csv"
    result = cli(workspace, "audit", "export", str(copy), "--out", str(out))
    assert result.exit_code == 0, result.output
    return read_sheet(out)


def test_golden_set_summarizes_the_demo_set(workspace: Path) -> None:
    result = cli(workspace, "golden-set")
    assert result.exit_code == 0, result.output
    negatives = sum(row["type"] == "negative" for row in DEMO)
    assert f"{len(DEMO)} questions, {negatives} negative, 0 of {len(DEMO)} approved" in result.output
    for label in ("type", "hops", "status", "multi-hop", "contradiction", "draft"):
        assert label in result.output, label


def test_summarize_orders_hops_and_statuses() -> None:
    def q(qid: str, hops: int | None, status: str) -> Question:
        return Question(qid, "?", {"a.md": 1.0}, "x", (), "single-hop", hops=hops, status=status)

    questions = [q("1", 2, "approved"), q("2", None, ""), q("3", 1, "draft"), q("4", 1, "odd"), q("5", 1, "draft")]
    summary = golden.summarize(questions)
    assert list(summary.by_hops.items()) == [("-", 1), ("1", 3), ("2", 1)]
    assert list(summary.by_status.items()) == [("draft", 2), ("approved", 1), ("none", 1), ("odd", 1)]
    assert summary.approved == 1 and summary.negatives == 0


def test_golden_set_out_writes_a_copy_and_keeps_existing_files(workspace: Path, copy: Path) -> None:
    assert copy.read_bytes() == demo_golden().read_bytes()
    assert len(load_dataset(copy).questions) == len(DEMO)
    fails(cli(workspace, "golden-set", "--out", str(copy)), "already exists; pass --force")
    assert cli(workspace, "golden-set", "--out", str(copy), "--force").exit_code == 0
    fails(cli(workspace, "golden-set", "--out", str(workspace / "copy.json")), "must end in .jsonl")


def test_golden_set_names_the_malformed_line(workspace: Path) -> None:
    bad = workspace / "bad.jsonl"
    bad.write_text(DEMO_LINES[0] + "\n" + '{"id": "q2", "question": \n', encoding="utf-8")
    fails(cli(workspace, "golden-set", str(bad)), f"{bad}:2: invalid JSON")
    missing = workspace / "missing.jsonl"
    missing.write_text(DEMO_LINES[0] + "\n\n" + json.dumps({"id": "q2"}) + "\n", encoding="utf-8")
    fails(cli(workspace, "golden-set", str(missing)), f"{missing}:3: missing field 'question'")
    fails(cli(workspace, "golden-set", str(workspace / "nope.jsonl")), "no such file or directory")


def test_export_writes_one_review_row_per_question(sheet: list[dict[str, str]]) -> None:
    assert [row["id"] for row in sheet] == [row["id"] for row in DEMO]
    assert list(sheet[0]) == [*golden.QUESTION_COLUMNS, *golden.REVIEW_COLUMNS]
    by_id = {row["id"]: row for row in sheet}
    assert by_id["q06"]["path"] == "Checkout Gateway -[owned_by]-> Payments Team"
    assert by_id["q13"]["sources"] == "incidents/inc-2025-014.md; security/key-vault.md"
    assert by_id["q01"]["evidence_quote"].startswith("| E-1042 | Upstream TLS handshake failed |")
    assert by_id["q18"]["evidence_quote"] == "Event Bus is owned by the Platform Team."  # the chain's last hop
    for row, source in zip(sheet, DEMO, strict=True):
        assert row["review_status"] == row["reviewer"] == row["comment"] == "" and row["status"] == "draft"
        if source["answer"] is None:
            assert row["answer"] == row["evidence_quote"] == ""
        else:
            quote = row["evidence_quote"].casefold()
            assert any(a.casefold() in quote for a in [source["answer"], *source["answer_aliases"]]), row["id"]


def test_review_round_trip_records_verdicts_and_keeps_everything_else(
    workspace: Path, copy: Path, sheet: list[dict[str, str]]
) -> None:
    sheet[0].update(review_status="approved", reviewer="Ana Silva")
    sheet[1].update(review_status="Needs change", comment='say "timed out",\nnot "timeout"')
    sheet[24].update(review_status="rejected", reviewer="", comment="")  # q25, a negative question
    reviewed = write_sheet(workspace / "reviewed.csv", sheet)
    before = datetime.now(UTC).replace(microsecond=0)
    result = cli(workspace, "audit", "import", str(reviewed), str(copy), "--reviewer", "Bo")
    assert result.exit_code == 0, result.output
    assert "recorded 3 reviews (1 approved, 1 rejected, 1 needs_change)" in result.output
    lines = copy.read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines]
    assert [r["id"] for r in rows] == [r["id"] for r in DEMO]
    changed = {
        0: ("approved", "Ana Silva", ""),
        1: ("needs_change", "Bo", 'say "timed out",\nnot "timeout"'),
        24: ("rejected", "Bo", ""),
    }
    for i, (row, original) in enumerate(zip(rows, DEMO, strict=True)):
        if i not in changed:
            assert lines[i] == DEMO_LINES[i]
            continue
        extra = {"status", "reviewed_by", "reviewed_at", "review_comment"}
        assert list(row)[: len(original)] == list(original) and set(row) == set(original) | extra
        assert {k: v for k, v in row.items() if k not in extra} == {k: v for k, v in original.items() if k != "status"}
        assert (row["status"], row["reviewed_by"], row["review_comment"]) == changed[i]
        stamp = datetime.fromisoformat(row["reviewed_at"])
        assert stamp.utcoffset() == timedelta(0) and stamp >= before
    questions = load_dataset(copy).questions
    assert [q.status for q in questions[:2]] == ["approved", "needs_change"]
    assert f"1 of {len(DEMO)} approved" in cli(workspace, "golden-set", str(copy)).output


def test_import_accepts_semicolons_and_skips_blank_verdicts(workspace: Path, copy: Path) -> None:
    rows = [
        {"id": "q02", "review_status": "approved", "reviewer": "Ana", "comment": "ok; checked"},
        {"id": "q03", "review_status": "", "reviewer": "Ana", "comment": ""},
    ]
    reviewed = write_sheet(workspace / "reviewed.csv", rows, delimiter=";")
    result = cli(workspace, "audit", "import", str(reviewed), str(copy))
    assert result.exit_code == 0, result.output
    assert f"{len(DEMO) - 1} questions untouched" in result.output
    rows_after = [json.loads(line) for line in copy.read_text(encoding="utf-8").splitlines()]
    assert rows_after[1]["review_comment"] == "ok; checked" and rows_after[2] == DEMO[2]


BAD_ROWS: list[tuple[str, dict[str, str], str]] = [
    ("unknown id", {"id": "q99", "review_status": "approved"}, "unknown id 'q99'"),
    ("duplicate id", {"id": "q01", "review_status": "rejected"}, "duplicate id 'q01' (first on line 2)"),
    ("invalid status", {"id": "q05", "review_status": "maybe"}, "review_status 'maybe' of 'q05' is not one of"),
    ("empty id", {"id": "", "review_status": "approved"}, "empty id"),
    ("orphan comment", {"id": "q05", "review_status": "", "comment": "hm"}, "comment on 'q05' without a review_status"),
]


@pytest.mark.parametrize(("row", "message"), [(r, m) for _, r, m in BAD_ROWS], ids=[n for n, _, _ in BAD_ROWS])
def test_import_names_the_bad_line_and_writes_nothing(
    workspace: Path, copy: Path, row: dict[str, str], message: str
) -> None:
    good: list[dict[str, Any]] = [
        {"id": "q01", "review_status": "approved", "reviewer": "Ana", "comment": "spans\ntwo lines"},
        {"id": "q02", "review_status": "approved", "reviewer": "Ana", "comment": ""},
    ]
    # q01's comment spans lines 2-3, so the third record starts on line 5
    sheet = write_sheet(workspace / "bad.csv", [*good, {"reviewer": "Ana", "comment": "", **row}])
    fails(cli(workspace, "audit", "import", str(sheet), str(copy)), f"{sheet}:5: {message}")
    assert copy.read_bytes() == demo_golden().read_bytes()


def test_import_needs_a_reviewer_and_the_review_columns(workspace: Path, copy: Path) -> None:
    sheet = write_sheet(workspace / "r.csv", [{"id": "q01", "review_status": "approved", "reviewer": ""}])
    fails(cli(workspace, "audit", "import", str(sheet), str(copy)), f"{sheet}:2: no reviewer for 'q01'")
    columns = write_sheet(workspace / "c.csv", [{"id": "q01", "status": "approved"}])
    fails(cli(workspace, "audit", "import", str(columns), str(copy)), f"{columns}:1: missing column 'review_status'")
    assert copy.read_bytes() == demo_golden().read_bytes()


def test_failed_write_leaves_the_golden_file_and_no_temporary(
    workspace: Path, copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sheet = write_sheet(workspace / "r.csv", [{"id": "q01", "review_status": "approved", "reviewer": "Ana"}])

    def broken(*_: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(golden.os, "replace", broken)
    with pytest.raises(InvalidInput, match="cannot write"):
        golden.import_csv(sheet, copy)
    assert copy.read_bytes() == demo_golden().read_bytes()
    assert sorted(p.name for p in workspace.iterdir()) == ["my-golden.jsonl", "r.csv"]


def test_import_refuses_the_packaged_demo_set(workspace: Path) -> None:
    sheet = write_sheet(workspace / "r.csv", [{"id": "q01", "review_status": "approved", "reviewer": "Ana"}])
    before = demo_golden().read_bytes()
    for target in ([], ["demo"], [str(demo_golden())]):
        result = cli(workspace, "audit", "import", str(sheet), *target)
        fails(result, "is the packaged demo golden set")
        assert "tortus-pg golden-set --out my-golden.jsonl" in str(result.exception)
    assert demo_golden().read_bytes() == before


def test_export_keeps_an_existing_sheet(workspace: Path) -> None:
    out = workspace / "review.csv"
    out.write_text("filled in\n", encoding="utf-8")
    fails(cli(workspace, "audit", "export", "--out", str(out)), "already exists; pass --force")
    assert out.read_text(encoding="utf-8") == "filled in\n"
    assert cli(workspace, "audit", "export", "--out", str(out), "--force").exit_code == 0
    assert len(read_sheet(out)) == len(DEMO)


@pytest.mark.parametrize("command", [["golden-set"], ["audit"], ["audit", "export"], ["audit", "import"]])
def test_commands_have_help(workspace: Path, command: list[str]) -> None:
    result = cli(workspace, *command, "--help")
    assert result.exit_code == 0 and "Usage" in result.output
    assert "golden" in result.output.lower()
