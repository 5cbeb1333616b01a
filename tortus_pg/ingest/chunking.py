"""Split a document into chunks whose offsets point exactly into its text.

Markdown-like text (markdown, and HTML rendered as markdown) is split by section first,
PDF text by page, plain text by paragraph. Sizes come from a `ChunkBudget`, in characters
unless the budget measures spans otherwise (an embedder's tokens). Sections, pages and
paragraphs up to the budget's `max` stay whole; longer ones are packed towards its `target`
from paragraphs, then sentences, then whitespace-separated pieces.

Policies, standards and contracts number their clauses instead of using headings. When a
PDF or plain-text document has at least three lines that start with a clause number
("7.3.2 Signing keys ...", "7.3 Key management") or are short numbered section titles
("7. Cryptographic controls"), it is chunked by clause (within each PDF page): a clause
with a sub-sub-number or of at least the budget's `min` starts a chunk of its own, bare
titles join the clause after them, short sibling clauses are packed up to its `target`, and
every chunk carries its clause path, e.g. ("7. Cryptographic controls",
"7.3 Key management", "7.3.2").
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from tortus_pg.ingest.prose import is_key_line
from tortus_pg.ingest.types import Chunk, Document

Span = tuple[int, int]

_ATX = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*\r?")
_ATX_CLOSE = re.compile(r"(?:^|[ \t]+)#+[ \t]*$")
_SETEXT = re.compile(r" {0,3}(={3,}|-{3,})[ \t]*\r?")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_BLANK_LINE = re.compile(r"\n[^\S\n]*\n")
_BLOCK_START = re.compile(r"[^\S\n]*(?:#|>|\||```|~~~|[-*+\u2022][^\S\n]|\d{1,3}[.)][^\S\n])")
_SENTENCE_END = re.compile(r"[.!?\u2026]+[\"'\u201d\u2019)\]]*\s+")
_WORD_BEFORE = re.compile(r"[^\W\d_]+$")
_ABBREVIATION_WORDS = (
    "mr mrs ms dr st jr sr prof gen col lt sgt capt rev hon mt ft inc ltd co corp vs no nos "
    "fig figs vol vols approx dept est al eg ie cf op pp ch sec art jan feb mar apr jun jul "
    "aug sep sept oct nov dec"
)
_ABBREVIATIONS = frozenset(_ABBREVIATION_WORDS.split())
# A line starting with a multi-level clause number ("7.3.2 Signing keys", "12.1. Scope") or a
# one-level section number ("7. Cryptographic controls"); a markdown `#` prefix is allowed.
_CLAUSE_NUMBER = re.compile(
    r"[^\S\n]*(?:#{1,6}[^\S\n]+)?(\d{1,3}(?:\.\d{1,3}){1,5})\.?[^\S\n]+(?=\S)"
)
_SECTION_NUMBER = re.compile(r"[^\S\n]*(?:#{1,6}[^\S\n]+)?(\d{1,3})\.[^\S\n]+(?=\S)")
_MIN_CLAUSE_LINES = 3
_MAX_TITLE_CHARS = 80


class SpanLengths(Protocol):
    """Lengths of spans of one text, in a budget's unit."""

    def length(self, start: int, end: int) -> int: ...

    def reach(self, start: int, limit: int) -> int:
        """The furthest end beyond `start` whose span from `start` is at most `limit` long,
        for `limit` >= 1 and a rest of the text longer than `limit`."""
        ...


class _CharLengths:
    def length(self, start: int, end: int) -> int:
        return end - start

    def reach(self, start: int, limit: int) -> int:
        return start + limit


def character_lengths(_text: str) -> SpanLengths:
    """Spans measured in characters, which needs nothing from the text."""
    return _CharLengths()


@dataclass(frozen=True)
class ChunkBudget:
    """Chunk sizes in one unit: pack towards `target`, never exceed `max`, and let a piece
    shorter than `min` join a neighbour. `lengths` measures the spans of a document's text."""

    target: int
    max: int
    min: int
    unit: str = "characters"
    lengths: Callable[[str], SpanLengths] = character_lengths


CHARACTERS = ChunkBudget(target=1200, max=2000, min=200)


def chunk_document(
    doc: Document,
    *,
    target_chars: int = CHARACTERS.target,
    max_chars: int = CHARACTERS.max,
    min_chars: int = CHARACTERS.min,
    budget: ChunkBudget | None = None,
) -> list[Chunk]:
    """Split `doc` into ordered, non-overlapping chunks with exact character offsets.

    Sizes are `budget`'s when given, else the three character sizes. Every chunk satisfies
    `doc.text[c.start:c.end] == c.text`, has no leading or trailing whitespace and is at
    most the budget's `max` long; together the chunks cover every non-whitespace
    character. Markdown and HTML chunks carry their heading path, PDF chunks their page
    number and never cross a page boundary; PDF and plain-text chunks of a document with
    numbered clauses carry their clause path.
    """
    if budget is None:
        budget = ChunkBudget(target_chars, max_chars, min_chars)
    if budget.max < 1:
        raise ValueError("the chunk budget's max (max_chars) must be positive")
    text = doc.text
    if not text.strip():
        return []
    target = max(1, min(budget.target, budget.max))
    sizes = _Sizes(target, budget.max, min(budget.min, target), budget.lengths(text))
    if doc.pages:
        pieces = _chunk_pages(doc, sizes)
    elif doc.kind in ("markdown", "html"):
        pieces = _chunk_markdown(text, sizes)
    else:
        clauses = _find_clauses(text, [(0, len(text))])
        pieces = [
            (span, path, None) for span, path in _split_clauses(text, 0, len(text), sizes, clauses)
        ]
    return [
        Chunk(index=i, start=s, end=e, text=text[s:e], headings=headings, page=page)
        for i, ((s, e), headings, page) in enumerate(pieces)
    ]


def sentence_spans(text: str, start: int = 0, end: int | None = None) -> list[Span]:
    """Sentence spans of `text[start:end]`, trimmed, covering all its non-whitespace.

    Blank lines, markdown block starts (headings, list items, quotes, table rows, fences)
    and the end of a heading line always end a sentence; `.`, `!` and `?` end one unless
    the next word starts in lowercase or the period ends an abbreviation or an initial.
    """
    stop = len(text) if end is None else end
    spans: list[Span] = []
    for block_start, block_end in line_blocks(text, start, stop):
        pos = block_start
        for m in _SENTENCE_END.finditer(text, block_start, block_end):
            after = m.end()
            if after < block_end and text[after].islower():
                continue
            if text[m.start()] == "." and _ends_abbreviation(text, block_start, m.start()):
                continue
            _append_trimmed(spans, text, pos, m.end())
            pos = m.end()
        _append_trimmed(spans, text, pos, block_end)
    return spans


def code_fence_spans(text: str) -> list[Span]:
    """Spans of fenced code blocks (``` or ~~~), fence lines included."""
    spans: list[Span] = []
    opened: tuple[int, str] | None = None
    for line_start, line_end in _lines(text):
        m = _FENCE.match(text, line_start, line_end)
        if opened is None:
            if m:
                opened = (line_start, m.group(1))
        elif (
            m
            and m.group(1)[0] == opened[1][0]
            and len(m.group(1)) >= len(opened[1])
            and not text[m.end() : line_end].strip()
        ):
            spans.append((opened[0], line_end))
            opened = None
    if opened is not None:
        spans.append((opened[0], len(text)))
    return spans


@dataclass(frozen=True)
class _Sizes:
    target: int
    max: int
    min: int
    lengths: SpanLengths

    def of(self, start: int, end: int) -> int:
        return self.lengths.length(start, end)


@dataclass(frozen=True)
class _Section:
    start: int
    end: int
    heading_end: int  # end of the heading line; equals start for text before any heading
    path: tuple[str, ...]


_Piece = tuple[Span, tuple[str, ...], int | None]


@dataclass(frozen=True)
class _Clause:
    start: int  # first character of the clause number
    line_end: int  # end of its first line, trailing whitespace excluded
    depth: int  # 1 for "7.", 3 for "7.3.2"
    heading: bool  # the first line reads as a title ("7.3 Key management")
    path: tuple[str, ...]  # titles of the enclosing clauses, then this clause's label


@dataclass(frozen=True)
class _Unit:
    span: Span
    path: tuple[str, ...]
    depth: int  # 0 for text before the first clause of a segment
    title: bool  # starts with a title line: never packed after other units
    lead_in: bool  # a bare title (or a tiny leading text) that joins the unit after it


class _Clauses:
    """Accepted clause starts of a document, in text order."""

    def __init__(self, clauses: list[_Clause]) -> None:
        self.clauses = clauses
        self.starts = [c.start for c in clauses]

    def between(self, start: int, end: int) -> tuple[tuple[str, ...], list[_Clause]]:
        """The clause path in force at `start`, and the clauses starting in [start, end)."""
        lo, hi = bisect_left(self.starts, start), bisect_left(self.starts, end)
        return (self.clauses[lo - 1].path if lo else ()), self.clauses[lo:hi]


def _chunk_pages(doc: Document, sizes: _Sizes) -> list[_Piece]:
    text = doc.text
    segments: list[tuple[int, int, int | None]] = []
    pos = 0
    for page in sorted(doc.pages, key=lambda p: (p.start, p.end)):
        start, end = max(page.start, pos), min(page.end, len(text))
        if start >= end:
            continue
        # Text between pages (or outside any page) is still evidence: chunk it unpaged.
        segments += [(pos, start, None), (start, end, page.number)]
        pos = end
    segments.append((pos, len(text), None))
    clauses = _find_clauses(text, [(s, e) for s, e, _ in segments])
    return [
        (span, path, number)
        for s, e, number in segments
        for span, path in _split_clauses(text, s, e, sizes, clauses)
    ]


def _find_clauses(text: str, segments: Sequence[Span]) -> _Clauses | None:
    """Numbered clause lines of the segments, or None when there are fewer than three.

    A candidate counts only at the start of a line, and only if its number comes after
    the previous clause's ("7.3.2" after "7.3.1", "8." after "7.5.1") or the line before
    it is a title or ends a statement (a blank line, a full stop). A candidate whose text
    starts in lowercase is a wrapped sentence ("TLS 1.2 or / 1.3 for transport") unless
    the line before it ends a statement. Numbering continues across segments, so a PDF
    page knows which clause it opens in.
    """
    found: list[_Clause] = []
    last: tuple[int, ...] | None = None
    stack: list[tuple[tuple[int, ...], str]] = []
    for seg_start, seg_end in segments:
        lines = _segment_lines(text, seg_start, seg_end)
        ended = True  # the previous line ended a statement (or there was none)
        after_title = False  # the previous line was a title
        for i, (ls, le) in enumerate(lines):
            line = text[ls:le].strip()
            candidate = None
            if (line[:1].isdigit() or line[:1] == "#") and _at_line_start(text, ls):
                nxt = text[lines[i + 1][0] : lines[i + 1][1]] if i + 1 < len(lines) else ""
                candidate = _clause_candidate(text, ls, le, nxt.strip())
            if candidate is not None:
                number, heading, label, lower = candidate
                if ended or ((after_title or last is None or number > last) and not lower):
                    while stack and stack[-1][0] != number[: len(stack[-1][0])]:
                        stack.pop()
                    stack.append((number, label))
                    start, line_end = _trim(text, ls, le)
                    path = tuple(t for _, t in stack)
                    found.append(_Clause(start, line_end, len(number), heading, path))
                    last = number
                    ended, after_title = _ends_statement(line), heading
                    continue
            ended, after_title = _ends_statement(line), line.startswith("#")
    return _Clauses(found) if len(found) >= _MIN_CLAUSE_LINES else None


def _clause_candidate(
    text: str, ls: int, le: int, next_line: str
) -> tuple[tuple[int, ...], bool, str, bool] | None:
    """(number, reads as a title, label, text starts in lowercase) for a numbered line."""
    m = _CLAUSE_NUMBER.match(text, ls, le)
    line = text[ls:le].strip()
    # A title is short, has no closing punctuation, and the next line does not carry on its
    # sentence (a line whose first letter is lowercase: "of the handbook", "1.3 for transport").
    first_letter = next((ch for ch in next_line if ch.isalpha()), "")
    heading = (
        len(line) <= _MAX_TITLE_CHARS
        and line[-1:] not in (".", ",", ";", ":", "-")
        and not first_letter.islower()
    )
    if m is None:
        m = _SECTION_NUMBER.match(text, ls, le)
        if m is None or not heading:
            return None
    body = text[m.end() : le].strip()
    if not any(ch.isalpha() for ch in body):
        return None
    number = tuple(int(part) for part in m.group(1).split("."))
    label = _ATX_CLOSE.sub("", line.lstrip("#").strip()).strip() if heading else m.group(1)
    return number, heading, label, body[0].islower()


def _split_clauses(
    text: str, start: int, end: int, sizes: _Sizes, clauses: _Clauses | None
) -> list[tuple[Span, tuple[str, ...]]]:
    """Pieces of [start, end) with their clause paths; plain splitting without clauses."""
    if clauses is None:
        return [(span, ()) for span in _split_segment(text, start, end, sizes, ())]
    path, inside = clauses.between(start, end)
    units: list[_Unit] = []
    head = _trim(text, start, inside[0].start if inside else end)
    if head[0] < head[1]:
        # A running header or a stray line before the page's first clause joins that clause.
        units.append(_Unit(head, path, 0, False, sizes.of(*head) < sizes.min // 4))
    for k, clause in enumerate(inside):
        stop = inside[k + 1].start if k + 1 < len(inside) else end
        span = _trim(text, clause.start, stop)
        lead_in = clause.heading and span[1] <= clause.line_end
        units.append(_Unit(span, clause.path, clause.depth, clause.heading, lead_in))
    return _pack_clauses(text, units, sizes)


def _pack_clauses(
    text: str, units: list[_Unit], sizes: _Sizes
) -> list[tuple[Span, tuple[str, ...]]]:
    """Group clause units into chunks; see the module docstring for the rules."""
    out: list[tuple[Span, tuple[str, ...]]] = []
    group: list[_Unit] = []
    anchor: tuple[str, ...] = ()  # units joining the group must sit below this path
    tiny = sizes.min // 4

    def flush() -> None:
        if group:
            out.append(((group[0].span[0], group[-1].span[1]), _clause_label(group)))
            group.clear()

    for unit in units:
        length = sizes.of(*unit.span)
        leading = bool(group) and all(u.lead_in for u in group)
        if length > sizes.max:
            pieces = _split_segment(text, unit.span[0], unit.span[1], sizes, ())
            if leading and sizes.of(group[0].span[0], pieces[0][1]) <= sizes.max:
                first = _Unit((group[0].span[0], pieces[0][1]), unit.path, 0, False, False)
                out.append((first.span, _clause_label([*group, first])))
                group.clear()
                pieces = pieces[1:]
            flush()
            out += [(piece, unit.path) for piece in pieces]
            continue
        if leading:
            limit = sizes.target if unit.lead_in else sizes.max
            if sizes.of(group[0].span[0], unit.span[1]) <= limit:
                group.append(unit)
                anchor = _anchor(unit)
                continue
        elif group:
            breaks = unit.title or length >= sizes.min or (unit.depth >= 3 and length >= tiny)
            below = len(unit.path) > len(anchor) and unit.path[: len(anchor)] == anchor
            if not breaks and below and sizes.of(group[0].span[0], unit.span[1]) <= sizes.target:
                group.append(unit)
                continue
        flush()
        group.append(unit)
        anchor = _anchor(unit)
    flush()
    return out


def _anchor(unit: _Unit) -> tuple[str, ...]:
    """Units packed after `unit` must be its siblings or descendants."""
    return unit.path if unit.depth == 0 or unit.lead_in else unit.path[:-1]


def _clause_label(group: list[_Unit]) -> tuple[str, ...]:
    """The longest path true of every unit; titles leading into a subclause do not count."""
    paths = [
        u.path
        for i, u in enumerate(group)
        if not (
            u.lead_in
            and any(
                len(v.path) > len(u.path) and v.path[: len(u.path)] == u.path
                for v in group[i + 1 :]
            )
        )
    ]
    common = paths[0]
    for path in paths[1:]:
        n = 0
        while n < min(len(common), len(path)) and common[n] == path[n]:
            n += 1
        common = common[:n]
    return common


def _segment_lines(text: str, start: int, end: int) -> list[Span]:
    spans: list[Span] = []
    pos = start
    while pos < end:
        nl = text.find("\n", pos, end)
        if nl < 0:
            spans.append((pos, end))
            break
        spans.append((pos, nl))
        pos = nl + 1
    return spans


def _at_line_start(text: str, pos: int) -> bool:
    line_start = text.rfind("\n", 0, pos) + 1
    return not text[line_start:pos].strip()


def _ends_statement(line: str) -> bool:
    stripped = line.rstrip().rstrip("\"')]\u201d\u2019")
    return not stripped or stripped[-1] in ".!?:;"


def _chunk_markdown(text: str, sizes: _Sizes) -> list[_Piece]:
    fences = code_fence_spans(text)
    sections = _sections(text, fences)
    pieces: list[_Piece] = []
    pending: tuple[int, tuple[str, ...]] | None = None  # text waiting to join the next section
    for i, sec in enumerate(sections):
        spans = _split_segment(text, sec.start, sec.end, sizes, fences, sec.heading_end)
        if pending is not None:
            if spans and sizes.of(pending[0], spans[0][1]) <= sizes.max:
                spans[0] = (pending[0], spans[0][1])
            else:
                pieces.append((_trim(text, pending[0], sec.start), pending[1], None))
            pending = None
        if not spans:
            continue
        nxt = sections[i + 1] if i + 1 < len(sections) else None
        if nxt is not None and len(spans) == 1 and _joins_next(text, sec, spans[0], nxt, sizes):
            pending = (spans[0][0], sec.path)
            continue
        pieces += [(span, sec.path, None) for span in spans]
    return pieces


def _joins_next(text: str, sec: _Section, span: Span, nxt: _Section, sizes: _Sizes) -> bool:
    """A bare heading, or a short intro before its first subsection, joins what follows.

    The subsection's heading path contains the parent's, so the joined chunk stays
    truthfully labelled; short sibling sections stay separate to keep their labels.
    """
    if not text[sec.heading_end : sec.end].strip():
        return True
    parent = len(nxt.path) > len(sec.path) and nxt.path[: len(sec.path)] == sec.path
    return parent and sizes.of(*span) < sizes.min


def _sections(text: str, fences: list[Span]) -> list[_Section]:
    headings: list[tuple[int, int, int, str]] = []  # start, line end, level, title
    fence_starts = {s: e for s, e in fences}
    lines = _lines(text)
    skip_until = -1
    prev_blank = True
    for n, (ls, le) in enumerate(lines):
        if ls < skip_until:
            continue
        if ls in fence_starts:
            skip_until = fence_starts[ls]
            prev_blank = False
            continue
        atx = _ATX.fullmatch(text, ls, le)
        if atx:
            title = _ATX_CLOSE.sub("", (atx.group(2) or "").strip()).strip()
            headings.append((ls, le, len(atx.group(1)), title))
            prev_blank = True
            continue
        line = text[ls:le]
        if prev_blank and line.strip() and n + 1 < len(lines):
            nxt = lines[n + 1]
            setext = _SETEXT.fullmatch(text, nxt[0], nxt[1])
            if setext and not _BLOCK_START.match(line):
                level = 1 if setext.group(1)[0] == "=" else 2
                headings.append((ls, nxt[1], level, line.strip()))
                skip_until = nxt[1]
                prev_blank = True
                continue
        prev_blank = not line.strip()

    if not headings:
        return [_Section(0, len(text), 0, ())]
    sections: list[_Section] = []
    if text[: headings[0][0]].strip():
        sections.append(_Section(0, headings[0][0], 0, ()))
    stack: list[tuple[int, str]] = []
    for k, (start, line_end, level, title) in enumerate(headings):
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        end = headings[k + 1][0] if k + 1 < len(headings) else len(text)
        sections.append(_Section(start, end, line_end, tuple(t for _, t in stack)))
    return sections


def _split_segment(
    text: str,
    start: int,
    end: int,
    sizes: _Sizes,
    fences: Sequence[Span],
    heading_end: int = -1,
) -> list[Span]:
    """Trimmed pieces of [start, end): whole if it fits, else packed paragraphs."""
    whole = _trim(text, start, end)
    if whole[0] >= whole[1]:
        return []
    if sizes.of(*whole) <= sizes.max:
        return [whole]
    units: list[Span] = []
    if heading_end > start:
        _append_trimmed(units, text, start, heading_end)
        start = heading_end
    units += _paragraphs(text, start, end, fences)
    pieces = _pack(text, units, sizes)
    return _absorb_tiny(pieces, sizes)


def _paragraphs(text: str, start: int, end: int, fences: Sequence[Span]) -> list[Span]:
    spans: list[Span] = []
    pos = start
    for m in _BLANK_LINE.finditer(text, start, end):
        if any(fs < m.start() < fe for fs, fe in fences):
            continue
        _append_trimmed(spans, text, pos, m.start())
        pos = m.end()
    _append_trimmed(spans, text, pos, end)
    return spans


def _pack(text: str, units: list[Span], sizes: _Sizes) -> list[Span]:
    pieces: list[Span] = []
    current: Span | None = None
    for unit in units:
        if sizes.of(*unit) > sizes.max:
            subunits = [
                piece
                for sentence in sentence_spans(text, unit[0], unit[1])
                for piece in _hard_split(text, sentence, sizes)
            ]
            if current is not None:
                pieces.append(current)
                current = None
            pieces += _pack(text, subunits, sizes)
            continue
        if current is not None and sizes.of(current[0], unit[1]) <= sizes.target:
            current = (current[0], unit[1])
        else:
            if current is not None:
                pieces.append(current)
            current = unit
    if current is not None:
        pieces.append(current)
    return pieces


def _absorb_tiny(pieces: list[Span], sizes: _Sizes) -> list[Span]:
    """Merge pieces shorter than min into a neighbour of the same segment when it fits."""
    out: list[Span] = []
    for piece in pieces:
        if out and (
            (sizes.of(*piece) < sizes.min or sizes.of(*out[-1]) < sizes.min)
            and sizes.of(out[-1][0], piece[1]) <= sizes.max
        ):
            out[-1] = (out[-1][0], piece[1])
        else:
            out.append(piece)
    return out


def _hard_split(text: str, span: Span, sizes: _Sizes) -> list[Span]:
    pieces: list[Span] = []
    pos, end = span
    while pos < end:
        if sizes.of(pos, end) <= sizes.max:
            _append_trimmed(pieces, text, pos, end)
            break
        cut = sizes.lengths.reach(pos, sizes.max)
        ws = cut
        while ws > pos and not text[ws].isspace():
            ws -= 1
        if ws > pos:
            cut = ws
        _append_trimmed(pieces, text, pos, cut)
        pos = cut
        while pos < end and text[pos].isspace():
            pos += 1
    return pieces


def _lines(text: str) -> list[Span]:
    spans: list[Span] = []
    pos = 0
    while True:
        nl = text.find("\n", pos)
        if nl < 0:
            spans.append((pos, len(text)))
            return spans
        spans.append((pos, nl))
        pos = nl + 1


def line_blocks(text: str, start: int, end: int) -> list[Span]:
    """Split at blank lines, before markdown block starts and around heading lines and key–value
    lines: "Lead: Priya Raman" on the line above "Services owned: Ledger API" is a statement of
    its own, as a heading is, not the start of one sentence running over both."""
    if text.find("\n", start, end) < 0:
        return [(start, end)]
    blocks: list[Span] = []
    block_start = start
    line_start = start
    ends_block = False  # the line before was a heading or a key–value line
    wraps = False  # the line before stopped mid-sentence: this one goes on with it
    while line_start <= end:
        nl = text.find("\n", line_start, end)
        line_end = end if nl < 0 else nl
        line = text[line_start:line_end]
        blank = not line.strip()
        # "Rotation is\nautomated: Key Vault creates …" is one sentence wrapped, not a key.
        key_line = not (wraps and not ends_block) and is_key_line(text, line_start)
        if line_start > block_start and (blank or ends_block or key_line or _BLOCK_START.match(line)):
            blocks.append((block_start, line_start))
            block_start = line_start
        ends_block = line.lstrip().startswith("#") or key_line
        wraps = not blank and line.rstrip()[-1:] not in ".!?:;"
        if nl < 0:
            break
        line_start = nl + 1
    blocks.append((block_start, end))
    return blocks


def _ends_abbreviation(text: str, block_start: int, period: int) -> bool:
    m = _WORD_BEFORE.search(text, max(block_start, period - 12), period)
    if m is None:
        return False
    word = m.group(0)
    return len(word) == 1 or word.casefold() in _ABBREVIATIONS


def _trim(text: str, start: int, end: int) -> Span:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _append_trimmed(spans: list[Span], text: str, start: int, end: int) -> None:
    s, e = _trim(text, start, end)
    if s < e:
        spans.append((s, e))
