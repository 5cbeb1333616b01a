"""Reviewing a golden question set by hand: summarize it, copy it, export a review sheet (CSV)
and record the reviewers' verdicts back into the .jsonl file.

Parsing and validation are `load_dataset`'s; this module only reads what it accepted. Writes
go to a temporary file in the target's directory and replace the target in one step, so a
failed run leaves every file as it was.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import uuid
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from tortus_pg.errors import InvalidInput
from tortus_pg.eval.datasets import Dataset, Question, _rows, demo_golden, load_dataset
from tortus_pg.ingest.chunking import sentence_spans
from tortus_pg.ingest.parse import parse_document
from tortus_pg.ingest.sources import demo_manifest, from_manifest

REVIEW_STATUSES = ("approved", "rejected", "needs_change")
STATUS_ORDER = ("draft", *REVIEW_STATUSES)
QUESTION_COLUMNS = ("id", "question", "answer", "sources", "path", "type", "hops", "status", "evidence_quote")
REVIEW_COLUMNS = ("review_status", "reviewer", "comment")
_SPACES = re.compile(r"\s+")
_TOKEN = re.compile(r"\w+(?:[.\-]\w+)*")
_FILLER = frozenset({"the", "and", "for", "what", "which", "does", "who", "how", "that", "this", "with", "from"})


@dataclass(frozen=True)
class GoldenSummary:
    """Question counts of a golden set, each mapping in a stable display order."""

    questions: int
    negatives: int
    by_type: dict[str, int]
    by_hops: dict[str, int]
    by_status: dict[str, int]

    @property
    def approved(self) -> int:
        return self.by_status.get("approved", 0)


@dataclass(frozen=True)
class ImportResult:
    """What an import recorded: verdicts per review status, and how many questions kept theirs."""

    reviewed: dict[str, int]
    untouched: int


def load_golden(path: Path | None) -> tuple[Path, Dataset]:
    """The golden-set file (the packaged demo set for None or 'demo') and its validated questions."""
    if path is None or (str(path) == "demo" and not path.exists()):
        path = demo_golden()
    dataset = load_dataset(path)
    if dataset.kind != "golden":
        raise InvalidInput(f"{path}: not a golden-set .jsonl file")
    return path, dataset


def summarize(questions: Iterable[Question]) -> GoldenSummary:
    """Counts by type (in file order), hops, negatives and review status (draft first, unset as 'none')."""
    qs = list(questions)
    hops = Counter(q.hops for q in qs)
    status = Counter(q.status or "none" for q in qs)
    known = [s for s in STATUS_ORDER if s in status]
    return GoldenSummary(
        questions=len(qs),
        negatives=sum(q.is_negative for q in qs),
        by_type=dict(Counter(q.type for q in qs)),
        by_hops={"-" if h is None else str(h): hops[h] for h in sorted(hops, key=lambda h: -1 if h is None else h)},
        by_status={s: status[s] for s in [*known, *sorted(set(status) - set(known))]},
    )


def copy_golden(path: Path, out: Path, *, force: bool = False) -> None:
    """Write a byte-identical copy of a golden set (already validated), to start a reviewed set."""
    if not out.name.endswith(".jsonl"):
        raise InvalidInput(f"{out}: the copy must end in .jsonl, or it cannot be loaded as a golden set")
    _refuse_overwrite(out, force)
    _write_atomic(out, path.read_bytes())


def export_csv(golden: Path | None, out: Path, *, force: bool = False) -> int:
    """Write the review sheet of a golden set (None: the demo set), one row per question with an
    evidence quote and empty review columns; return the number of rows.

    The quote is the sentence of an expected source that holds the answer (or an alias), read
    from the files of the sources.toml beside the golden set, else of the packaged demo corpus.
    """
    _refuse_overwrite(out, force)
    _, dataset = load_golden(golden)
    sentences = _SourceSentences(dataset.corpus_path or demo_manifest())
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, (*QUESTION_COLUMNS, *REVIEW_COLUMNS), restval="", lineterminator="\n")
    writer.writeheader()
    for q in dataset.questions:
        writer.writerow(
            {
                "id": q.id,
                "question": q.text,
                "answer": q.answer or "",
                "sources": "; ".join(q.gold),
                "path": "; ".join(f"{s} -[{r}]-> {t}" for s, r, t in q.path),
                "type": q.type,
                "hops": "" if q.hops is None else q.hops,
                "status": q.status,
                "evidence_quote": _evidence_quote(q, sentences),
            }
        )
    _write_atomic(out, buffer.getvalue().encode("utf-8"))
    return len(dataset.questions)


def import_csv(
    csv_path: Path, golden: Path | None, *, reviewer: str | None = None, now: datetime | None = None
) -> ImportResult:
    """Record the verdicts of a filled-in review sheet in a golden .jsonl file: status,
    reviewed_by, reviewed_at (UTC) and review_comment, keeping the order and every other field.

    Rows with an empty review_status leave their question as it was. Every row is checked
    first (known id, once only, a valid review_status, a reviewer from the row or `reviewer`);
    the first problem raises InvalidInput naming the CSV line, and nothing is written. The
    packaged demo set is never edited.
    """
    path = demo_golden() if golden is None else golden
    if path.resolve() == demo_golden().resolve() or (str(path) == "demo" and not path.exists()):
        raise InvalidInput(
            f"{path} is the packaged demo golden set and is not edited in place; make your own copy with "
            "`tortus-pg golden-set --out my-golden.jsonl` and import into that"
        )
    path, dataset = load_golden(path)
    verdicts = _read_verdicts(csv_path, {q.id for q in dataset.questions}, reviewer)
    stamp = (now or datetime.now(UTC)).astimezone(UTC).isoformat(timespec="seconds")
    lines = []
    for row in _rows(path):
        record = dict(row.data)
        key = str(record["id"])  # load_dataset accepted it as a string or a number
        if key in verdicts:
            status, by, comment = verdicts[key]
            record.update(status=status, reviewed_by=by, reviewed_at=stamp, review_comment=comment)
        lines.append(json.dumps(record, ensure_ascii=False) + "\n")
    _write_atomic(path, "".join(lines).encode("utf-8"))
    reviewed = Counter(status for status, _, _ in verdicts.values())
    return ImportResult({s: reviewed[s] for s in REVIEW_STATUSES}, len(dataset.questions) - len(verdicts))


def _read_verdicts(csv_path: Path, known: set[str], reviewer: str | None) -> dict[str, tuple[str, str, str]]:
    """id -> (review status, reviewer, comment) of the rows that carry a verdict."""
    try:
        text = csv_path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"{csv_path}: cannot read the review sheet ({exc})") from None
    header_line = text.partition("\n")[0]
    delimiter = max(",;\t", key=header_line.count)  # spreadsheets in some locales save with ';'
    reader = csv.reader(io.StringIO(text), delimiter=delimiter)
    header = [cell.strip().lower() for cell in next(reader, [])]
    for column in ("id", "review_status"):
        if column not in header:
            raise InvalidInput(
                f"{csv_path}:1: missing column {column!r}; export a new sheet with `tortus-pg audit export`"
            )
    verdicts: dict[str, tuple[str, str, str]] = {}
    first: dict[str, int] = {}
    start = reader.line_num + 1
    for cells in reader:
        number, start = start, reader.line_num + 1  # a quoted cell may span lines; report the row's first
        if not any(cell.strip() for cell in cells):
            continue
        row = dict(zip(header, (cell.strip() for cell in cells), strict=False))
        qid, status = row.get("id", ""), _status(row.get("review_status", ""))
        by, comment = row.get("reviewer", "") or (reviewer or "").strip(), row.get("comment", "")
        problem = _row_problem(qid, status, by, comment, known, first)
        if problem:
            raise InvalidInput(f"{csv_path}:{number}: {problem}")
        first[qid] = number
        if status:
            verdicts[qid] = (status, by, comment)
    return verdicts


def _status(cell: str) -> str:
    return _SPACES.sub("_", cell.strip().lower()).replace("-", "_")


def _row_problem(qid: str, status: str, by: str, comment: str, known: set[str], first: dict[str, int]) -> str | None:
    if not qid:
        return "empty id"
    if qid not in known:
        return f"unknown id {qid!r}: not in the golden set"
    if qid in first:
        return f"duplicate id {qid!r} (first on line {first[qid]})"
    if not status:
        return f"comment on {qid!r} without a review_status" if comment else None
    if status not in REVIEW_STATUSES:
        return f"review_status {status!r} of {qid!r} is not one of {', '.join(REVIEW_STATUSES)}"
    if not by:
        return f"no reviewer for {qid!r}; fill the reviewer column or pass --reviewer NAME"
    return None


class _SourceSentences:
    """Sentences of the documents a sources.toml lists, keyed by their path in it, parsed on demand."""

    def __init__(self, manifest: Path) -> None:
        base = manifest.parent.resolve()
        specs = from_manifest(manifest) if manifest.is_file() else []
        self._files = {Path(s.location).relative_to(base).as_posix(): Path(s.location) for s in specs if not s.is_url}
        self._cache: dict[str, list[tuple[str, str]]] = {}

    def of(self, source: str) -> list[tuple[str, str]]:
        """(sentence, its casefolded form) pairs of one source; none when it is not listed or unreadable."""
        if source not in self._cache:
            self._cache[source] = []
            file = self._files.get(source)
            if file is not None and file.is_file():
                try:
                    text = parse_document(file.read_bytes(), name=file.name).text
                except InvalidInput:
                    text = ""  # an unreadable source only costs the quote
                spans = [_SPACES.sub(" ", text[s:e]).strip() for s, e in sentence_spans(text)]
                self._cache[source] = [(sentence, sentence.casefold()) for sentence in spans]
        return self._cache[source]


def _evidence_quote(q: Question, sentences: _SourceSentences) -> str:
    """The sentence holding the answer or an alias that shares most words with the question, or ''."""
    if q.answer is None:
        return ""
    asked = _words(q.text)
    best, best_score = "", -1
    for candidate in (q.answer, *q.aliases):
        pattern = re.compile(rf"(?<!\w){re.escape(_norm(candidate))}(?!\w)")
        for source in reversed(q.gold):  # a chain's answer is in its last hop; ties go to the later source
            for sentence, folded in sentences.of(source):
                if pattern.search(folded) and (score := len(asked & _words(sentence))) > best_score:
                    best, best_score = sentence, score
    return best


def _norm(text: str) -> str:
    return _SPACES.sub(" ", text).strip().casefold()


def _words(text: str) -> set[str]:
    return {w for w in _TOKEN.findall(_norm(text)) if len(w) > 2 and w not in _FILLER}


def _refuse_overwrite(out: Path, force: bool) -> None:
    if out.exists() and not force:
        raise InvalidInput(f"{out} already exists; pass --force to replace it")


def _write_atomic(path: Path, data: bytes) -> None:
    """Replace `path` with `data` in one step; an existing file keeps its permissions."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        mode = path.stat().st_mode & 0o777 if path.exists() else None
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # a new file gets the umask's mode
    except OSError as exc:
        raise InvalidInput(f"{path}: cannot write ({exc.strerror or exc})") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise InvalidInput(f"{path}: cannot write ({exc.strerror or exc})") from None
