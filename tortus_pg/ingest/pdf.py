"""PDF text, page by page, with pypdf. parse.parse_document runs it in a separate process
under parse_memory_bytes and parse_timeout_s; pypdf is imported here, before that cap."""

from __future__ import annotations

import io
import logging
import re
import warnings
from dataclasses import replace

from pypdf import PasswordType, PdfReader
from pypdf.errors import DependencyError, LimitReachedError

from tortus_pg.errors import InvalidInput
from tortus_pg.ingest.types import Document, Limits, Page

SEPARATOR = "\n\n"
_MAX_NOTES = 5
# PostgreSQL text cannot hold NUL, and lone surrogates cannot be encoded as UTF-8.
_UNSTORABLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\ud800-\udfff]")


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def parse_pdf(data: bytes, name: str, limits: Limits) -> Document:
    """Extract the text of each page; pages are joined by a blank line and recorded as
    character ranges. Encrypted or image-only files give empty text and a warning."""
    collect = _Collect()
    logger = logging.getLogger("pypdf")
    logger.addHandler(collect)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            doc = _read(data, name, limits)
    finally:
        logger.removeHandler(collect)
    messages = list(dict.fromkeys(collect.messages + [str(w.message) for w in caught]))
    notes = [f"pypdf: {m}" for m in messages[:_MAX_NOTES]]
    if len(messages) > _MAX_NOTES:
        notes.append(f"pypdf: {len(messages) - _MAX_NOTES} more warnings")
    return replace(doc, warnings=doc.warnings + tuple(notes))


def _read(data: bytes, name: str, limits: Limits) -> Document:
    try:
        try:
            reader = PdfReader(io.BytesIO(data))
            locked = reader.is_encrypted and reader.decrypt("") == PasswordType.NOT_DECRYPTED
            missing = ""
        except DependencyError as e:  # AES needs the optional cryptography package
            locked, missing = True, f" ({e})"
        if locked:
            return Document(text="", kind="pdf", warnings=(f"encrypted PDF: no text extracted{missing}",))
        count = len(reader.pages)
    except MemoryError:
        raise
    except Exception as e:  # pypdf raises PyPdfError and plain built-ins on malformed files
        raise InvalidInput(f"{name}: not a readable PDF ({_describe(e)})") from None
    if count > limits.max_pdf_pages:
        raise InvalidInput(
            f"{name}: {count} pages exceeds the {limits.max_pdf_pages} page limit; raise max_pdf_pages to accept it"
        )
    texts: list[str] = []
    notes: list[str] = []
    for number in range(1, count + 1):
        try:
            raw = _page_text(reader, number, name)
        except (MemoryError, InvalidInput):
            raise
        except Exception as e:  # one broken page should not cost the others
            notes.append(f"page {number}: text extraction failed ({_describe(e)})")
            raw = ""
        texts.append(raw)
    return _assemble(texts, notes)


def _page_text(reader: PdfReader, number: int, name: str) -> str:
    """A page's text. Its content is decoded first: pypdf's text extraction swallows a stream
    that decompresses past its limit and returns nothing, which would pass for a scanned page."""
    page = reader.pages[number - 1]
    try:
        contents = page.get_contents()
        if contents is not None:
            contents.get_data()
    except LimitReachedError:
        raise InvalidInput(f"{name}: page {number} decompresses past the PDF reader's size limit, as a "
                           "decompression bomb does; not ingested") from None
    return page.extract_text()


def _assemble(texts: list[str], notes: list[str]) -> Document:
    parts: list[str] = []
    pages: list[Page] = []
    position = 0
    removed = 0
    for number, raw in enumerate(texts, 1):
        text, n = _UNSTORABLE.subn("", raw.replace("\r\n", "\n").replace("\r", "\n"))
        text = text.strip()
        removed += n
        if text and parts:
            parts.append(SEPARATOR)
            position += len(SEPARATOR)
        parts.append(text)
        pages.append(Page(number=number, start=position, end=position + len(text)))
        position += len(text)
    empty = [p.number for p in pages if p.start == p.end]
    if len(empty) == len(pages):
        notes.append("no extractable text (scanned or image-only PDF?)")
    elif empty:
        listed = ", ".join(map(str, empty[:20])) + (" ..." if len(empty) > 20 else "")
        notes.append(f"no extractable text on pages {listed} (scanned or image-only?)")
    if removed:
        notes.append(f"removed {removed} control or invalid characters from the text")
    return Document(text="".join(parts), kind="pdf", pages=tuple(pages), warnings=tuple(notes))


def _describe(e: BaseException) -> str:
    detail = str(e)
    detail = detail if len(detail) <= 200 else detail[:200] + "..."
    return f"{type(e).__name__}: {detail}" if detail else type(e).__name__
