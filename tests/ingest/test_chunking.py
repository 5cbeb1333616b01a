"""Chunking keeps exact offsets, follows headings and pages, and packs by size."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tortus_pg.ingest.budget import TokenLengths
from tortus_pg.ingest.chunking import ChunkBudget, chunk_document, code_fence_spans, sentence_spans
from tortus_pg.ingest.types import Chunk, Document, Page

SERVICE_DOC = """# Payments service

The payments service takes card payments for the shop and hands them to the ledger.

## Dependencies

The Payments Service depends on the Ledger API. It retries failed postings three times
before it raises an alert in the on-call channel.

## Owners

Team Atlas owns the service.

# Ledger

```bash
# this comment is not a heading
ledger-cli replay --since yesterday
```

The ledger keeps every posting forever.
"""


def assert_exact(
    doc: Document, chunks: list[Chunk], max_size: int, size: Callable[[str], int] = len
) -> None:
    """The invariants every chunking must satisfy; `size` measures in the budget's unit."""
    covered = bytearray(len(doc.text))
    previous_end = 0
    for i, c in enumerate(chunks):
        assert c.index == i
        assert doc.text[c.start : c.end] == c.text
        assert c.text and c.text == c.text.strip()
        assert c.start >= previous_end
        assert size(c.text) <= max_size
        previous_end = c.end
        covered[c.start : c.end] = b"\x01" * (c.end - c.start)
    missed = [i for i, ch in enumerate(doc.text) if not ch.isspace() and not covered[i]]
    assert missed == []


def test_empty_and_whitespace_documents_have_no_chunks() -> None:
    assert chunk_document(Document("", "text")) == []
    assert chunk_document(Document(" \n\t\n  ", "markdown")) == []


def test_short_passage_is_exactly_one_chunk() -> None:
    text = (
        "  Ada Lovelace was an English mathematician and writer, chiefly known for her work on "
        "Charles Babbage's proposed mechanical general-purpose computer, the Analytical "
        "Engine. She was the first to recognise that the machine had applications beyond "
        "pure calculation.\n"
    )
    chunks = chunk_document(Document(text, "text", title="Ada Lovelace"))
    assert len(chunks) == 1
    assert chunks[0].text == text.strip()
    assert (chunks[0].start, chunks[0].end) == (2, len(text) - 1)
    assert chunks[0].headings == () and chunks[0].page is None


def test_markdown_chunks_carry_their_heading_path() -> None:
    doc = Document(SERVICE_DOC, "markdown")
    chunks = chunk_document(doc)
    assert_exact(doc, chunks, 2000)
    by_path = {c.headings: c.text for c in chunks}
    assert list(by_path) == [
        ("Payments service", "Dependencies"),
        ("Payments service", "Owners"),
        ("Ledger",),
    ]
    # The short intro joins its first subsection; the subsection path includes the parent.
    assert by_path[("Payments service", "Dependencies")].startswith("# Payments service")
    assert "depends on the Ledger API" in by_path[("Payments service", "Dependencies")]
    assert by_path[("Payments service", "Owners")] == "## Owners\n\nTeam Atlas owns the service."
    assert "not a heading" in by_path[("Ledger",)]


def test_html_is_chunked_like_markdown() -> None:
    chunks = chunk_document(Document(SERVICE_DOC, "html"))
    assert ("Payments service", "Dependencies") in {c.headings for c in chunks}


def test_sections_are_never_merged_with_siblings_or_across_top_level_sections() -> None:
    text = "# Alpha\n\n## One\n\nFirst.\n\n## Two\n\nSecond.\n\n# Beta\n\nIntro.\n\n# Gamma\n"
    chunks = chunk_document(Document(text, "markdown"))
    assert [c.headings for c in chunks] == [
        ("Alpha", "One"),
        ("Alpha", "Two"),
        ("Beta",),
        ("Gamma",),
    ]
    assert chunks[0].text == "# Alpha\n\n## One\n\nFirst."
    assert chunks[2].text == "# Beta\n\nIntro."


def test_heading_only_section_joins_the_section_after_it() -> None:
    body = "The ledger records every posting. " * 10
    text = f"# Ledger\n\n## Postings\n\n{body}\n"
    chunks = chunk_document(Document(text, "markdown"), min_chars=50)
    assert len(chunks) == 1
    assert chunks[0].headings == ("Ledger", "Postings")
    assert chunks[0].text.startswith("# Ledger")


def test_setext_headings_are_recognised() -> None:
    text = "Payments\n========\n\nIntro text.\n\nDependencies\n------------\n\nLedger API.\n"
    chunks = chunk_document(Document(text, "markdown"), min_chars=0)
    assert [c.headings for c in chunks] == [("Payments",), ("Payments", "Dependencies")]


def test_long_section_splits_at_paragraph_boundaries() -> None:
    paragraphs = [f"Paragraph {i} " + "word " * 60 for i in range(12)]
    text = "# Big\n\n" + "\n\n".join(p.strip() for p in paragraphs) + "\n"
    doc = Document(text, "markdown")
    chunks = chunk_document(doc, target_chars=800, max_chars=1000, min_chars=100)
    assert_exact(doc, chunks, 1000)
    assert len(chunks) > 2
    assert all(c.headings == ("Big",) for c in chunks)
    for c in chunks[1:]:
        assert c.text.startswith("Paragraph"), "a piece must start at a paragraph"


def test_long_paragraph_splits_at_sentences_then_hard_on_whitespace() -> None:
    sentences = " ".join(f"Sentence number {i} says something about ledgers." for i in range(40))
    doc = Document(sentences, "text")
    chunks = chunk_document(doc, target_chars=300, max_chars=400, min_chars=50)
    assert_exact(doc, chunks, 400)
    assert all(c.text.endswith(".") for c in chunks)

    unbroken = "x" * 950 + " " + "y" * 30
    doc = Document(unbroken, "text")
    chunks = chunk_document(doc, target_chars=300, max_chars=400, min_chars=10)
    assert_exact(doc, chunks, 400)
    assert [len(c.text) for c in chunks] == [400, 400, 150 + 1 + 30]


def test_tiny_trailing_piece_merges_into_the_previous_chunk() -> None:
    text = ("A fairly long paragraph about the ledger. " * 20).strip() + "\n\nTail."
    doc = Document(text, "text")
    chunks = chunk_document(doc, target_chars=500, max_chars=1000, min_chars=100)
    assert_exact(doc, chunks, 1000)
    assert chunks[-1].text.endswith("Tail.")
    assert len(chunks[-1].text) > 100


def test_pdf_chunks_stay_within_their_page() -> None:
    pages_text = ["Page one text. " * 5, "Page two starts here. " * 130, "Last page."]
    text, pages, pos = "", [], 0
    for number, body in enumerate(pages_text, start=1):
        text += body + "\n"
        pages.append(Page(number=number, start=pos, end=pos + len(body) + 1))
        pos += len(body) + 1
    doc = Document(text, "pdf", pages=tuple(pages))
    chunks = chunk_document(doc)
    assert_exact(doc, chunks, 2000)
    assert [c.page for c in chunks] == [1, 2, 2, 2, 3]
    for c in chunks:
        page = pages[(c.page or 0) - 1]
        assert page.start <= c.start and c.end <= page.end


def test_plain_text_is_paragraph_based() -> None:
    text = ("First paragraph sentence. " * 30).strip() + "\n\n" + ("Second one. " * 40).strip()
    chunks = chunk_document(Document(text, "text"), target_chars=900, max_chars=1000)
    assert [c.text[:6] for c in chunks] == ["First ", "Second"]


def test_sentence_spans_respect_abbreviations_and_initials() -> None:
    text = "Mr. Smith met George T. Solomon in the U.S. in 1963. It rained. e.g. not split"
    assert [text[s:e] for s, e in sentence_spans(text)] == [
        "Mr. Smith met George T. Solomon in the U.S. in 1963.",
        "It rained. e.g. not split",
    ]


def test_sentence_spans_break_at_markdown_blocks() -> None:
    text = "## Owners\nTeam Atlas\n- first item\n- second item"
    assert [text[s:e] for s, e in sentence_spans(text)] == [
        "## Owners",
        "Team Atlas",
        "- first item",
        "- second item",
    ]


def test_sentence_spans_hold_a_key_value_line_apart() -> None:
    # Consecutive "key: value" lines are statements of their own, however they end; a wrapped
    # line of prose is not, nor is a colon inside a sentence.
    text = ("Lead: Priya Raman\n**Services owned:** Ledger API, Refund Worker\nOn-call rotation: mm-primary\n"
            "The team sits in Lisbon\nand was formed in 2021.\nIt keeps one rule: no deploys on Fridays.\n"
            "Rotation is\nautomated: a new key is made every month.")
    assert [text[s:e] for s, e in sentence_spans(text)] == [
        "Lead: Priya Raman",
        "**Services owned:** Ledger API, Refund Worker",
        "On-call rotation: mm-primary",
        "The team sits in Lisbon\nand was formed in 2021.",
        "It keeps one rule: no deploys on Fridays.",
        "Rotation is\nautomated: a new key is made every month.",  # a sentence wrapped, not a key
    ]


def test_code_fence_spans() -> None:
    text = "a\n```py\n# x\n```\nb\n~~~\nopen"
    assert code_fence_spans(text) == [(2, 15), (18, len(text))]


def test_bad_sizes_are_rejected() -> None:
    with pytest.raises(ValueError, match="max_chars"):
        chunk_document(Document("x", "text"), max_chars=0)


POLICY_SOURCE = (
    Path(__file__).resolve().parents[2]
    / "tortus_pg"
    / "demo"
    / "pdf-src"
    / "information-security-policy.txt"
)
POLICY_PDF = POLICY_SOURCE.parents[1] / "security" / "information-security-policy.pdf"
KEY_ROTATION = ("7. Cryptographic controls", "7.3 Key rotation and certificate lifetimes")


def _policy_as_pdf_text() -> tuple[str, list[int]]:
    """The demo policy as a PDF yields it: no markdown marks or blank lines, paragraphs
    wrapped at 95 characters; also the offsets where a `---` page break starts a page."""
    text, breaks = "", []
    for raw in POLICY_SOURCE.read_text(encoding="utf-8").splitlines():
        line = raw.strip().lstrip("#").strip()
        if line == "---":
            breaks.append(len(text))
        elif line:
            text += "".join(wrapped + "\n" for wrapped in textwrap.wrap(line, 95))
    return text, breaks


def _pdf(text: str, cuts: list[int]) -> Document:
    bounds = [0, *cuts, len(text)]
    pages = tuple(
        Page(i + 1, s, e) for i, (s, e) in enumerate(zip(bounds, bounds[1:], strict=False))
    )
    return Document(text, "pdf", pages=pages)


def _policy_documents() -> dict[str, Document]:
    text, breaks = _policy_as_pdf_text()
    return {
        "one page": _pdf(text, []),
        "two pages": _pdf(text, breaks),
        "raw source as text": Document(POLICY_SOURCE.read_text(encoding="utf-8"), "text"),
    }


@pytest.mark.parametrize("name", ["one page", "two pages", "raw source as text"])
def test_policy_clause_sits_in_its_own_small_chunk(name: str) -> None:
    doc = _policy_documents()[name]
    chunks = chunk_document(doc)
    assert_exact(doc, chunks, 2000)
    defining = [c for c in chunks if c.text.startswith("7.3.2")]
    assert len(defining) == 1
    clause = defining[0]
    assert "rotated at least every 90 days" in clause.text
    assert len(clause.text) < 600
    assert "7.3.3" not in clause.text and "7.3.1" not in clause.text
    assert clause.headings == (*KEY_ROTATION, "7.3.2")
    if doc.pages:
        assert clause.page == len(doc.pages)
    # The clause that only cites 7.3.2 is a different chunk, labelled with its own section.
    citing = next(c for c in chunks if "in clause 7.3.2" in c.text)
    assert citing is not clause and citing.headings[0] == "8. Review"
    # Titles join what follows instead of becoming chunks of their own.
    sizes = [len(c.text) for c in chunks]
    assert min(sizes) >= 60 and len(chunks) <= 20
    first_of_section = next(
        c for c in chunks if c.text.lstrip("# ").startswith("7. Cryptographic controls")
    )
    assert "7.1.1 Only the algorithms" in first_of_section.text
    assert first_of_section.headings == (
        "7. Cryptographic controls",
        "7.1 Approved algorithms",
        "7.1.1",
    )
    roles = next(c for c in chunks if "3.2 Each system" in c.text)
    assert roles.headings == ("3. Roles",) and "3.1" in roles.text and "3.3" in roles.text


def test_clause_continuing_on_the_next_page_opens_that_page() -> None:
    text, _ = _policy_as_pdf_text()
    cut = text.index("After rotation")
    doc = _pdf(text, [cut])
    chunks = chunk_document(doc)
    assert_exact(doc, chunks, 2000)
    page_two = [c for c in chunks if c.page == 2]
    assert page_two[0].start == cut
    assert page_two[0].headings == (*KEY_ROTATION, "7.3.2")
    assert page_two[1].text.startswith("7.3.3")
    last_on_page_one = [c for c in chunks if c.page == 1][-1]
    assert last_on_page_one.text.startswith("7.3.2") and last_on_page_one.text.endswith("90 days.")


@pytest.mark.skipif(not POLICY_PDF.is_file(), reason="demo PDF not built")
def test_demo_policy_pdf_is_chunked_by_clause() -> None:
    from tortus_pg.ingest.parse import parse_document

    doc = parse_document(POLICY_PDF.read_bytes(), name=POLICY_PDF.name)
    chunks = chunk_document(doc)
    assert_exact(doc, chunks, 2000)
    clause = next(c for c in chunks if c.text.startswith("7.3.2"))
    assert "90 days" in clause.text and len(clause.text) < 600
    assert clause.headings == (*KEY_ROTATION, "7.3.2")


def test_wrapped_lines_that_start_with_a_number_are_not_clauses() -> None:
    text = (
        "7.1 Approved algorithms\n"
        "7.1.1 Only approved algorithms may be used: AES-256-GCM for data at rest, and TLS 1.2 or\n"
        "1.3 for transport. Anything else needs an exception.\n"
        "7.1.2 New systems use TLS 1.3 for internal traffic, as described in section\n"
        "7.4 of the platform handbook and in the runbooks.\n"
        "7.1.3 Legacy systems migrate by the end of the year.\n"
    )
    doc = Document(text, "text")
    chunks = chunk_document(doc, min_chars=10)
    assert_exact(doc, chunks, 2000)
    assert [c.text.split()[0] for c in chunks] == ["7.1", "7.1.2", "7.1.3"]
    assert [c.headings[-1] for c in chunks] == ["7.1.1", "7.1.2", "7.1.3"]


@pytest.mark.parametrize("kind", ["text", "pdf"])
def test_prose_with_stray_numbers_is_not_chunked_by_clause(kind: str) -> None:
    text = (
        "The gateway team moved to version 4.2 of the API last spring. Clients that still call\n"
        "4.2 endpoints directly see a deprecation header on every response.\n\n"
        "Traffic grew quickly after the launch.\n"
        "3.5 million requests were served in the first week, most of them from mobile clients.\n"
    )
    doc = Document(text, kind, pages=(Page(1, 0, len(text)),) if kind == "pdf" else ())
    chunks = chunk_document(doc)
    assert len(chunks) == 1
    assert chunks[0].text == text.strip() and chunks[0].headings == ()


def test_numbered_clauses_below_the_threshold_are_ignored() -> None:
    text = "Intro line.\n1.1 First clause here.\n1.2 Second clause here.\nClosing words."
    chunks = chunk_document(Document(text, "text"), min_chars=0)
    assert [c.text for c in chunks] == [text]


def test_long_clause_is_split_but_keeps_its_path() -> None:
    body = " ".join(f"Sentence {i} of the clause about key custody." for i in range(40))
    text = f"9. Custody\n9.1 Holders\n9.1.1 {body}\n9.1.2 Short follow-up clause.\n"
    doc = Document(text, "text")
    chunks = chunk_document(doc, target_chars=300, max_chars=400, min_chars=50)
    assert_exact(doc, chunks, 400)
    assert chunks[0].text.startswith("9. Custody\n9.1 Holders\n9.1.1 Sentence 0")
    assert all(c.headings == ("9. Custody", "9.1 Holders", "9.1.1") for c in chunks[:-1])
    assert chunks[-1].text == "9.1.2 Short follow-up clause."
    assert chunks[-1].headings == ("9. Custody", "9.1 Holders", "9.1.2")


_WORD = st.text(alphabet="abcdefghijKLMNOP.,!?`#-_()", min_size=1, max_size=12)
_SPACE = st.sampled_from([" ", "  ", "\n", "\n\n", "\n \n", "\t", "\u00a0", "\u2003", "\r\n"])


@st.composite
def _markdownish(draw: st.DrawFn) -> str:
    parts: list[str] = []
    for _ in range(draw(st.integers(0, 14))):
        kind = draw(st.sampled_from(["heading", "paragraph", "long", "fence", "setext", "list"]))
        words = draw(st.lists(_WORD, min_size=1, max_size=40))
        sep = draw(_SPACE)
        if kind == "heading":
            parts.append("#" * draw(st.integers(1, 7)) + " " + " ".join(words[:6]))
        elif kind == "paragraph":
            parts.append(sep.join(words))
        elif kind == "long":
            parts.append(draw(st.sampled_from("xyz")) * draw(st.integers(50, 900)))
        elif kind == "fence":
            parts.append("```\n# " + " ".join(words) + "\n\n" + " ".join(words) + "\n```")
        elif kind == "setext":
            parts.append(" ".join(words[:4]) + "\n" + draw(st.sampled_from(["===", "---"])))
        else:
            parts.append("\n".join("- " + w for w in words[:8]))
        parts.append(draw(st.sampled_from(["\n", "\n\n", "\n\n\n", " \n  \n", ""])))
    return draw(_SPACE) + "".join(parts)


@st.composite
def _clauses(draw: st.DrawFn) -> str:
    """Numbered clauses and titles (in or out of order), wrapped lines and stray numbers."""
    parts: list[str] = []
    for _ in range(draw(st.integers(0, 20))):
        number = ".".join(
            str(n) for n in draw(st.lists(st.integers(0, 12), min_size=1, max_size=4))
        )
        words = draw(st.lists(_WORD, min_size=1, max_size=30))
        kind = draw(
            st.sampled_from(["clause"] * 3 + ["title", "wrapped", "number", "prose", "long"])
        )
        if kind == "clause":
            parts.append(f"{number}{draw(st.sampled_from(['', '.']))} " + " ".join(words) + ".")
        elif kind == "title":
            parts.append(
                f"{draw(st.sampled_from(['', '  ', '## ']))}{number}. " + " ".join(words[:5])
            )
        elif kind == "wrapped":
            parts.append(" ".join(words[:6]) + "\n" + number + " " + " ".join(words[6:] or ["x"]))
        elif kind == "number":
            parts.append(number + draw(st.sampled_from(["", " ", ".", " 7", "\t%"])))
        elif kind == "prose":
            parts.append(draw(_SPACE).join(words))
        else:
            parts.append(f"{number} " + draw(st.sampled_from("xyz")) * draw(st.integers(50, 900)))
        parts.append(draw(st.sampled_from(["\n", "\n\n", "\r\n", " \n ", "\n   "])))
    return draw(_SPACE) + "".join(parts)


_TEXTS = st.one_of(_markdownish(), _clauses())
_SIZES = st.tuples(st.integers(1, 400), st.integers(1, 400), st.integers(0, 200))


@settings(max_examples=200, deadline=None)
@given(text=_TEXTS, kind=st.sampled_from(["markdown", "html", "text"]), sizes=_SIZES)
def test_offsets_are_exact_ordered_and_cover_everything(
    text: str, kind: str, sizes: tuple[int, int, int]
) -> None:
    target, max_chars, min_chars = sizes
    doc = Document(text, kind)
    chunks = chunk_document(doc, target_chars=target, max_chars=max_chars, min_chars=min_chars)
    assert_exact(doc, chunks, max_chars)


@settings(max_examples=200, deadline=None)
@given(
    text=_TEXTS,
    cuts=st.lists(st.integers(0, 5000), max_size=6),
    max_chars=st.integers(20, 500),
)
def test_pdf_chunks_never_cross_pages(text: str, cuts: list[int], max_chars: int) -> None:
    bounds = sorted({0, len(text), *(c for c in cuts if c < len(text))})
    pages = tuple(
        Page(i + 1, s, e) for i, (s, e) in enumerate(zip(bounds, bounds[1:], strict=False))
    )
    doc = Document(text, "pdf", pages=pages)
    chunks = chunk_document(doc, max_chars=max_chars)
    assert_exact(doc, chunks, max_chars)
    for c in chunks:
        assert c.page is not None
        page = pages[c.page - 1]
        assert page.start <= c.start and c.end <= page.end


def _word_lengths(text: str) -> TokenLengths:
    """Spans measured in whitespace-separated words, each word one token."""
    words = [m.span() for m in re.finditer(r"\S+", text)]
    return TokenLengths([s for s, _ in words], [e for _, e in words], list(range(len(words))), len(text))


@settings(max_examples=200, deadline=None)
@given(text=_TEXTS, kind=st.sampled_from(["markdown", "html", "text"]), sizes=_SIZES)
def test_a_budget_in_another_unit_bounds_chunks_in_that_unit(
    text: str, kind: str, sizes: tuple[int, int, int]
) -> None:
    target, most, least = (max(1, n // 8) for n in sizes)
    budget = ChunkBudget(target, most, least, unit="words", lengths=_word_lengths)
    doc = Document(text, kind)
    assert_exact(doc, chunk_document(doc, budget=budget), most, lambda t: len(t.split()))


def test_token_lengths_count_overlapped_tokens_and_cut_between_words() -> None:
    # "unbelievable ideas" as word pieces: un ##believ ##able | idea ##s
    lengths = TokenLengths([0, 2, 8, 13, 17], [2, 8, 12, 17, 18], [0, 0, 0, 1, 1], 18)
    spans = [(0, 18), (0, 12), (1, 3), (12, 13), (13, 18)]
    assert [lengths.length(*span) for span in spans] == [5, 3, 2, 0, 2]
    assert lengths.reach(0, 3) == 13  # the first word whole
    assert lengths.reach(0, 4) == 13  # the limit falls inside the second word: cut before it
    assert lengths.reach(0, 2) == 8  # a first word longer than the limit is cut between its pieces
    assert lengths.reach(13, 1) == 17
    assert lengths.reach(13, 2) == 18
