"""Values passed between the ingestion stages (parse -> chunk -> extract -> store)."""

from __future__ import annotations

from dataclasses import dataclass, field

KINDS = ("markdown", "text", "html", "pdf")


@dataclass(frozen=True)
class Limits:
    """Bounds on untrusted input; every stage that reads bytes honours them."""

    max_file_bytes: int = 20 * 1024 * 1024
    max_response_bytes: int = 20 * 1024 * 1024
    max_pdf_pages: int = 2000
    max_text_chars: int = 5_000_000
    parse_timeout_s: float = 60.0
    parse_memory_bytes: int = 1024 * 1024 * 1024


@dataclass(frozen=True)
class Page:
    """A PDF page as a character range [start, end) of the document text; number is 1-based."""

    number: int
    start: int
    end: int


@dataclass(frozen=True)
class Document:
    """A parsed document. `text` is what evidence spans point into (HTML becomes markdown-like
    text with `#` headings, so chunking is heading-aware for both)."""

    text: str
    kind: str
    title: str | None = None
    pages: tuple[Page, ...] = ()
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class Chunk:
    """A contiguous span [start, end) of Document.text; `text == doc.text[start:end]`."""

    index: int
    start: int
    end: int
    text: str
    headings: tuple[str, ...] = ()
    page: int | None = None


@dataclass(frozen=True)
class Mention:
    """Where a concept occurs: chunk index and [start, end) in the document text."""

    chunk: int
    start: int
    end: int


@dataclass(frozen=True)
class Concept:
    """A normalized concept; `key` is identical for the same concept across documents."""

    key: str
    label: str
    kind: str  # a tortus node kind: concept, entity, api, decision, event, claim
    mentions: tuple[Mention, ...] = ()


@dataclass(frozen=True)
class ExtractedEdge:
    """A typed relation between two concepts, with the rule and the span that gave it."""

    src: str  # concept key
    dst: str  # concept key
    type: str  # a tortus edge type
    confidence: float
    rule: str
    evidence: Mention


@dataclass(frozen=True)
class Extraction:
    concepts: tuple[Concept, ...] = ()
    edges: tuple[ExtractedEdge, ...] = ()
    warnings: tuple[str, ...] = field(default_factory=tuple)
    # (chunk index, concept key): the chunk is where the concept is defined, i.e. the lead
    # chunk of the document titled by it, or the provision headed by its clause number.
    defines: tuple[tuple[int, str], ...] = ()
