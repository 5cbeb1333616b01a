"""HTML to markdown-like text: trafilatura for the main content, a BeautifulSoup walk when
trafilatura finds nothing. The libraries are imported here, so that parse.parse_document
loads them before it caps the memory of a parser process."""

from __future__ import annotations

import codecs
import re
import warnings
from html import unescape

import trafilatura
from bs4 import BeautifulSoup, MarkupResemblesLocatorWarning, XMLParsedAsHTMLWarning
from bs4.element import NavigableString, PreformattedString, Tag

from tortus_pg.ingest.types import Document, Limits

_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_DROP = frozenset(
    {"script", "style", "nav", "noscript", "template", "head", "svg", "iframe", "object"}
    | {"embed", "canvas", "select"}
)
_BLOCKS = frozenset(
    {"[document]", "html", "body", "main", "article", "section", "aside", "header", "footer"}
    | {"div", "p", "blockquote", "address", "details", "summary", "dialog", "figure"}
    | {"figcaption", "form", "fieldset", "dl", "dt", "dd", "ol", "ul", "table", "thead"}
    | {"tbody", "tfoot", "caption", "br", "hr"}
)
# WHATWG decodes these labels as windows-1252, and so do browsers.
_CP1252_LABELS = frozenset({"ascii", "us-ascii", "iso-8859-1", "iso8859-1", "latin-1", "latin1"})
_HEADER_CHARSET = re.compile(r"charset\s*=\s*[\"']?([\w.:-]+)", re.I)
_META_CHARSET = re.compile(rb"<meta[^>]{0,512}?charset\s*=\s*[\"']?\s*([\w.:-]+)", re.I)
_XML_INVALID = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")
_TAG = re.compile(r"<[^>]*>")


def parse_html(data: bytes, name: str, limits: Limits, *, content_type: str | None = None) -> Document:
    """Decode HTML bytes and extract its text with `#` headings; warnings say when the
    charset needed replacement characters or the simple extractor was used."""
    notes: list[str] = []
    markup = _key_values_as_lists(_XML_INVALID.sub("", _decode(data, content_type, notes)))
    text = _main_content(markup, notes)
    text = html_to_text(markup) if text is None else _structured(markup, text)
    return Document(text=text, kind="html", title=_title(markup), warnings=tuple(notes))


def html_to_text(markup: str) -> str:
    """Render HTML as text with BeautifulSoup: h1..h6 become `#` lines, blocks are
    separated by blank lines, list items and table rows get a line each; script, style
    and navigation are dropped."""
    return _rendered(_soup(markup))


def _rendered(soup: BeautifulSoup) -> str:
    """`html_to_text` of a parsed page."""
    blocks: list[tuple[str, str]] = []  # (text, group): adjacent items of a group share lines
    words: list[str] = []

    def flush() -> None:
        if text := " ".join("".join(words).split()):
            blocks.append((text, ""))
        words.clear()

    # An explicit stack, not recursion: nesting depth is up to the page author.
    stack: list[object] = [soup]
    while stack:
        node = stack.pop()
        if node is flush:
            flush()
        elif isinstance(node, NavigableString):
            if not isinstance(node, PreformattedString):
                words.append(str(node))
        elif isinstance(node, Tag) and node.name not in _DROP:
            name = node.name
            if name in _HEADINGS:
                flush()
                if text := _collapse(node.get_text(" ")):
                    blocks.append(("#" * _HEADINGS[name] + " " + text, ""))
            elif name == "pre":
                flush()
                if text := node.get_text().strip("\n"):
                    blocks.append((f"```\n{text}\n```", ""))
            elif name == "li":
                flush()
                if text := _collapse(node.get_text(" ")):
                    blocks.append(("- " + text, "li"))
            elif name == "tr":
                flush()
                cells = (_collapse(c.get_text(" ")) for c in node.find_all(["td", "th"]))
                if row := " | ".join(c for c in cells if c):
                    blocks.append((row, "tr"))
            elif name in _BLOCKS:
                flush()
                stack.append(flush)
                stack.extend(reversed(node.contents))
            else:
                stack.extend(reversed(node.contents))
    flush()
    return _joined(blocks)


def _joined(blocks: list[tuple[str, str]]) -> str:
    """Blocks separated by blank lines; adjacent items of one group (list items, table rows) by
    single line breaks."""
    parts: list[str] = []
    for i, (text, group) in enumerate(blocks):
        if i:
            parts.append("\n" if group and group == blocks[i - 1][1] else "\n\n")
        parts.append(text)
    return "".join(parts)


def _soup(markup: str) -> BeautifulSoup:
    with warnings.catch_warnings():
        # Short markup that looks like a path, or XHTML, is still HTML we were handed.
        warnings.simplefilter("ignore", MarkupResemblesLocatorWarning)
        warnings.simplefilter("ignore", XMLParsedAsHTMLWarning)
        # lxml rather than html.parser: the latter is quadratic on some crafted input.
        return BeautifulSoup(markup, "lxml")


def _key_values_as_lists(markup: str) -> str:
    """Key–value markup rewritten as lists of "key: value" items: tables whose every row is a
    header cell and its values ("<tr><th>Squad lead</th><td>Adaeze Okonkwo</td></tr>"), and
    definition lists ("<dt>Owner</dt><dd>Data Platform squad</dd>"). Markdown has neither: such
    a table's first row would become a column header, which states nothing, and the main-content
    extractor drops a definition list or puts each term on a line apart from its definition, so
    the pairs would be lost."""
    lowered = markup.lower()
    if "<th" not in lowered and "<dt" not in lowered:
        return markup
    soup = _soup(markup)
    found = [(t, _table_pairs(t)) for t in soup.find_all("table")]
    found += [(d, _definition_pairs(d)) for d in soup.find_all("dl")]
    changed = False
    for element, pairs in found:
        if not pairs or not any(p is soup for p in element.parents):  # or inside one replaced already
            continue
        items = soup.new_tag("ul")
        for key, values in pairs:
            item = soup.new_tag("li")
            item.string = f"{key}: {'; '.join(values)}" if key else "; ".join(values)
            items.append(item)
        element.replace_with(items)
        changed = True
    return str(soup) if changed else markup


def _table_pairs(table: Tag) -> list[tuple[str, list[str]]]:
    """A table's rows as (header cell, values) when every row is a header cell and its values."""
    cells = [row.find_all(["th", "td"], recursive=False) for row in table.find_all("tr")]
    if not cells or not all(len(c) >= 2 and c[0].name == "th" and all(x.name == "td" for x in c[1:]) for c in cells):
        return []
    return [(_collapse(row[0].get_text()), [_collapse(x.get_text()) for x in row[1:]]) for row in cells]


def _definition_pairs(dl: Tag) -> list[tuple[str, list[str]]]:
    """A definition list's terms, each with the definitions that follow it (a definition before
    any term has an empty key); the terms and definitions of a list nested in it are its own."""
    pairs: list[tuple[str, list[str]]] = []
    for part in dl.find_all(["dt", "dd"]):
        if part.find_parent("dl") is not dl:
            continue
        text = _collapse(part.get_text(" "))
        if part.name == "dt":
            pairs.append((text, []))
        elif pairs:
            pairs[-1][1].append(text)
        else:
            pairs.append(("", [text]))
    return [(key, values) for key, values in pairs if key or values]


# What a page is read without when it is rendered whole: its frame, not its content.
_FRAME = ("nav", "footer", "aside")
_HEADING_LINE = re.compile(r"^#{1,6} ", re.M)
# A page rendered whole that is this much longer than its main content holds more than a frame.
_MOSTLY_CONTENT = 2.0


def _structured(markup: str, text: str) -> str:
    """`text`, the page's main content, unless the extractor lost the page's structure: on a
    page that holds its content in <body> or in a <div> after a <header>, it keeps lines without
    headings, list items or key–value pairs (an incident's title, sections, severity and
    commander). Then the page rendered whole but for its navigation, footers and asides, when
    that is mostly the same content."""
    if _HEADING_LINE.search(text):
        return text
    soup = _soup(markup)
    for tag in soup.find_all(_FRAME):
        tag.decompose()
    whole = _rendered(soup)
    if _HEADING_LINE.search(whole) and len(whole) <= _MOSTLY_CONTENT * len(text):
        return whole
    return text


def _main_content(markup: str, notes: list[str]) -> str | None:
    try:
        text = trafilatura.extract(
            markup,
            output_format="markdown",
            include_tables=True,
            include_links=False,
            include_comments=False,
            include_images=False,
        )
    except MemoryError:
        raise
    except Exception as e:  # lxml and trafilatura raise assorted errors on broken markup
        notes.append(f"trafilatura failed ({type(e).__name__}); used the simple extractor")
        return None
    if text is None or not text.strip():
        notes.append("trafilatura found no main content; used the simple extractor, which may keep boilerplate")
        return None
    return text


def _decode(data: bytes, content_type: str | None, notes: list[str]) -> str:
    if data.startswith(codecs.BOM_UTF8):
        label = "utf-8-sig"
    elif data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        label = "utf-16"
    elif content_type and (header := _HEADER_CHARSET.search(content_type)):
        label = header.group(1)
    elif meta := _META_CHARSET.search(data[:4096]):
        label = meta.group(1).decode("ascii")
        # A meta tag in bytes we could read as ASCII cannot truly be UTF-16 (WHATWG rule).
        if label.lower().startswith("utf-16"):
            label = "utf-8"
    else:
        label = "utf-8"
    try:
        charset = codecs.lookup(label).name
    except LookupError:
        notes.append(f"unknown charset {label!r}; decoded as UTF-8")
        charset = "utf-8"
    if label.lower() in _CP1252_LABELS:
        charset = "cp1252"
    try:
        return data.decode(charset)
    except UnicodeDecodeError:
        notes.append(f"bytes that are not valid {charset} were replaced with U+FFFD")
        return data.decode(charset, errors="replace")


def _title(markup: str) -> str | None:
    for tag in ("title", "h1"):
        if (opening := re.search(rf"<{tag}[\s>]", markup, re.I)) is None:
            continue
        end_of_tag = markup.find(">", opening.end() - 1)
        if end_of_tag < 0:
            continue
        closing = re.compile(rf"</{tag}\s*>", re.I).search(markup, end_of_tag)
        if closing is None:
            continue
        inner = _TAG.sub(" ", markup[end_of_tag + 1 : closing.start()][:2000])
        if title := _collapse(unescape(inner)):
            return title
    return None


def _collapse(text: str) -> str:
    return " ".join(text.split())
