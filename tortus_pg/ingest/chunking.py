"""Split a document into chunks whose offsets point exactly into its text.

Markdown-like text (markdown, and HTML rendered as markdown) is split by section first,
PDF text by page, plain text by paragraph. Sections, pages and paragraphs up to
`max_chars` stay whole; longer ones are packed towards `target_chars` from paragraphs,
then sentences, then whitespace-separated pieces.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

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


def chunk_document(
    doc: Document, *, target_chars: int = 1200, max_chars: int = 2000, min_chars: int = 200
) -> list[Chunk]:
    """Split `doc` into ordered, non-overlapping chunks with exact character offsets.

    Every chunk satisfies `doc.text[c.start:c.end] == c.text`, has no leading or trailing
    whitespace and is at most `max_chars` long; together the chunks cover every
    non-whitespace character. Markdown and HTML chunks carry their heading path, PDF
    chunks their page number and never cross a page boundary.
    """
    if max_chars < 1:
        raise ValueError("max_chars must be positive")
    target_chars = max(1, min(target_chars, max_chars))
    min_chars = min(min_chars, target_chars)
    sizes = _Sizes(target_chars, max_chars, min_chars)
    text = doc.text
    if not text.strip():
        return []
    if doc.pages:
        pieces = _chunk_pages(doc, sizes)
    elif doc.kind in ("markdown", "html"):
        pieces = _chunk_markdown(text, sizes)
    else:
        pieces = [(span, (), None) for span in _split_segment(text, 0, len(text), sizes, ())]
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
    for block_start, block_end in _line_blocks(text, start, stop):
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


@dataclass(frozen=True)
class _Section:
    start: int
    end: int
    heading_end: int  # end of the heading line; equals start for text before any heading
    path: tuple[str, ...]


_Piece = tuple[Span, tuple[str, ...], int | None]


def _chunk_pages(doc: Document, sizes: _Sizes) -> list[_Piece]:
    text = doc.text
    pieces: list[_Piece] = []
    pos = 0
    for page in sorted(doc.pages, key=lambda p: (p.start, p.end)):
        start, end = max(page.start, pos), min(page.end, len(text))
        if start >= end:
            continue
        # Text between pages (or outside any page) is still evidence: chunk it unpaged.
        pieces += [(s, (), None) for s in _split_segment(text, pos, start, sizes, ())]
        pieces += [(s, (), page.number) for s in _split_segment(text, start, end, sizes, ())]
        pos = end
    pieces += [(s, (), None) for s in _split_segment(text, pos, len(text), sizes, ())]
    return pieces


def _chunk_markdown(text: str, sizes: _Sizes) -> list[_Piece]:
    fences = code_fence_spans(text)
    sections = _sections(text, fences)
    pieces: list[_Piece] = []
    pending: tuple[int, tuple[str, ...]] | None = None  # text waiting to join the next section
    for i, sec in enumerate(sections):
        spans = _split_segment(text, sec.start, sec.end, sizes, fences, sec.heading_end)
        if pending is not None:
            if spans and spans[0][1] - pending[0] <= sizes.max:
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
    return parent and span[1] - span[0] < sizes.min


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
    if whole[1] - whole[0] <= sizes.max:
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
        if unit[1] - unit[0] > sizes.max:
            subunits = [
                piece
                for sentence in sentence_spans(text, unit[0], unit[1])
                for piece in _hard_split(text, sentence, sizes.max)
            ]
            if current is not None:
                pieces.append(current)
                current = None
            pieces += _pack(text, subunits, sizes)
            continue
        if current is not None and unit[1] - current[0] <= sizes.target:
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
            (piece[1] - piece[0] < sizes.min or out[-1][1] - out[-1][0] < sizes.min)
            and piece[1] - out[-1][0] <= sizes.max
        ):
            out[-1] = (out[-1][0], piece[1])
        else:
            out.append(piece)
    return out


def _hard_split(text: str, span: Span, max_chars: int) -> list[Span]:
    pieces: list[Span] = []
    pos, end = span
    while pos < end:
        if end - pos <= max_chars:
            _append_trimmed(pieces, text, pos, end)
            break
        cut = pos + max_chars
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


def _line_blocks(text: str, start: int, end: int) -> list[Span]:
    """Split at blank lines, before markdown block starts and after heading lines."""
    if text.find("\n", start, end) < 0:
        return [(start, end)]
    blocks: list[Span] = []
    block_start = start
    line_start = start
    prev_heading = False
    while line_start <= end:
        nl = text.find("\n", line_start, end)
        line_end = end if nl < 0 else nl
        line = text[line_start:line_end]
        blank = not line.strip()
        if line_start > block_start and (blank or prev_heading or _BLOCK_START.match(line)):
            blocks.append((block_start, line_start))
            block_start = line_start
        prev_heading = line.lstrip().startswith("#")
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
