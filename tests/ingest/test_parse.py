from __future__ import annotations

import random
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pdf_fixtures import decompression_bomb, encrypted, pdf_with_pages

from tortus_pg.errors import InvalidInput
from tortus_pg.ingest.html import html_to_text
from tortus_pg.ingest.parse import detect_kind, parse_document
from tortus_pg.ingest.types import Limits

MB = 1024 * 1024
PNG_HEADER = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"


@pytest.mark.parametrize(
    ("name", "content_type", "kind"),
    [
        ("notes.md", None, "markdown"),
        ("page.MDX", None, "markdown"),
        ("readme.txt", None, "text"),
        ("index.htm", None, "html"),
        ("index.html", "text/plain", "html"),
        ("report.pdf", None, "pdf"),
        ("https://example.com/page", "text/html; charset=utf-8", "html"),
        ("download", "application/pdf", "pdf"),
    ],
)
def test_detect_kind_uses_extension_then_content_type(name: str, content_type: str | None, kind: str) -> None:
    assert detect_kind(name, content_type) == kind


def test_detect_kind_names_file_and_supported_extensions() -> None:
    with pytest.raises(InvalidInput, match=r"photo\.png: .*\.md.*\.txt.*\.html.*\.pdf"):
        detect_kind("photo.png", "image/png")


def test_markdown_title_is_first_h1_outside_code_fences() -> None:
    source = b"intro\n\n```sh\n# install it\n```\n\n## Setup\n\n# Real Title #\n\nbody\n"
    doc = parse_document(source, name="guide.md")
    assert doc.kind == "markdown"
    assert doc.title == "Real Title"
    assert doc.text == source.decode()
    assert doc.warnings == ()


def test_markdown_front_matter_is_dropped_and_gives_the_title() -> None:
    source = b'---\ntitle: "Release Notes"\ntags: [a, b]\n---\n\n# Version 2\n\nFixed things.\n'
    doc = parse_document(source, name="notes.md")
    assert doc.title == "Release Notes"
    assert doc.text == "# Version 2\n\nFixed things.\n"


def test_markdown_leading_rule_without_keys_is_not_front_matter() -> None:
    source = b"---\nJust a rule, then text.\n---\n# Heading\n"
    doc = parse_document(source, name="rule.md")
    assert doc.text == source.decode()
    assert doc.title == "Heading"


def test_text_newlines_are_normalized_and_bom_stripped() -> None:
    doc = parse_document(b"\xef\xbb\xbf# not a title\r\nline two\rline three", name="a.txt")
    assert doc.kind == "text"
    assert doc.title is None
    assert doc.text == "# not a title\nline two\nline three"


@given(
    st.text(st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="\ufeff") | st.sampled_from("\n\r\t"))
)
def test_text_round_trips_apart_from_newlines(text: str) -> None:
    doc = parse_document(text.encode(), name="any.txt")
    assert doc.text == text.replace("\r\n", "\n").replace("\r", "\n")


def test_invalid_utf8_names_byte_offset_and_line() -> None:
    with pytest.raises(InvalidInput, match=r"bad\.md: not valid UTF-8 at byte 9 \(line 2\)"):
        parse_document(b"hello\nwor\xffld\n", name="bad.md")


def test_png_renamed_to_markdown_is_rejected_as_binary() -> None:
    data = PNG_HEADER + random.Random(1).randbytes(4000)
    with pytest.raises(InvalidInput, match=r"logo\.md: looks like a binary file, not text"):
        parse_document(data, name="logo.md")


def test_control_heavy_file_without_nul_is_rejected_as_binary() -> None:
    data = bytes([1, 2, 3, 65]) * 500
    with pytest.raises(InvalidInput, match="looks like a binary file"):
        parse_document(data, name="tool.txt")


def test_utf16_text_asks_for_utf8() -> None:
    with pytest.raises(InvalidInput, match="save the file as UTF-8"):
        parse_document("hello".encode("utf-16"), name="win.txt")


def test_oversize_file_names_the_setting() -> None:
    limits = Limits(max_file_bytes=1 * MB)
    with pytest.raises(InvalidInput, match=r"big\.md: 1\.5 MB exceeds the 1\.0 MB limit.*max_file_bytes"):
        parse_document(b"a" * (3 * MB // 2), name="big.md", limits=limits)


def test_too_much_text_names_the_setting() -> None:
    with pytest.raises(InvalidInput, match="max_text_chars"):
        parse_document(b"word " * 100, name="long.txt", limits=Limits(max_text_chars=100))


def test_unknown_extension_is_rejected() -> None:
    with pytest.raises(InvalidInput, match=r"data\.csv: unsupported file type"):
        parse_document(b"a,b\n1,2\n", name="data.csv")


def test_empty_text_file_is_warned() -> None:
    assert parse_document(b"", name="empty.md").warnings == ("no text found",)


ARTICLE = b"""<!doctype html><html><head><title>Tortus &amp; Friends</title>
<style>p { color: red }</style></head><body><nav><a href="/">Home</a> | <a href="/x">About</a></nav>
<article><h1>Concept graphs</h1>
<p>A concept graph links the ideas that a document mentions, so retrieval can hop from one
idea to the next instead of matching isolated chunks of text.</p>
<h2>Storage</h2>
<p>Everything lives in PostgreSQL: nodes, typed edges, BM25 statistics and embeddings, which
keeps the whole retrieval path inside one transactional system.</p>
</article><script>document.write("tracking")</script></body></html>"""


def test_html_main_content_keeps_headings_and_drops_boilerplate() -> None:
    doc = parse_document(ARTICLE, name="post.html")
    assert doc.kind == "html"
    assert doc.title == "Tortus & Friends"
    assert doc.warnings == ()
    assert "# Concept graphs\n" in doc.text
    assert "## Storage\n" in doc.text
    assert "retrieval path inside one transactional system" in doc.text
    assert "tracking" not in doc.text
    assert "About" not in doc.text


# Pages holding their content in <body>, or little of it in a <div> after a <header>: the
# main-content extractor kept their lines but not their headings, lists and key–value pairs.
PLAIN_PAGES = [
    (b"""<html><head><title>INC-7: Stale rates</title></head><body>
<nav><a href="/">Wiki</a> | <a href="/incidents">Incidents</a></nav>
<h1>INC-7: Stale rates</h1>
<table><tr><th>Severity</th><td>Sev2</td></tr><tr><th>Commander</th><td>Tomas Ibarra</td></tr></table>
<h2>What happened</h2>
<p>Invoices issued during the morning run used the exchange rates of the day before, because the
rate feed had been paused by a failed credential rotation.</p>
<h2>Follow-up</h2><p>Cached rates older than six hours now stop invoicing instead of being used.</p>
<footer>Copyright Example Corp. All rights reserved.</footer></body></html>""",
     "# INC-7: Stale rates\n\n- Severity: Sev2\n- Commander: Tomas Ibarra\n\n## What happened\n\nInvoices"),
    (b"""<html><head><title>Payments API</title></head><body>
<header><h1>Payments API</h1><p>Owned by the Money team</p></header>
<div class="content"><h2>Limits</h2><p>Each merchant may send 50 requests per second.</p>
<h2>Owner</h2><p>The Money team maintains it.</p></div>
<aside><a href="/incidents">Incidents</a></aside>
<footer>Copyright Example Corp. All rights reserved.</footer></body></html>""",
     "# Payments API\n\nOwned by the Money team\n\n## Limits\n\nEach merchant may send 50 requests per second."),
]


@pytest.mark.parametrize(("page", "opening"), PLAIN_PAGES)
def test_a_plain_html_page_keeps_its_headings_and_key_value_header(page: bytes, opening: str) -> None:
    # Read whole but for its navigation, asides and footer.
    doc = parse_document(page, name="page.html")
    assert doc.warnings == ()
    assert doc.text.startswith(opening)
    assert "Incidents" not in doc.text and "Copyright" not in doc.text


def test_html_without_main_content_falls_back_with_a_warning() -> None:
    page = b"<html><body><footer><h1>Welcome</h1><ul><li>first</li><li>second</li></ul></footer>"
    doc = parse_document(page, name="thin.html")
    assert any("simple extractor" in w for w in doc.warnings)
    assert doc.text == "# Welcome\n\n- first\n- second"
    assert doc.title == "Welcome"


def test_fallback_renders_headings_lists_tables_and_code() -> None:
    markup = """<html><head><title>t</title><script>var hidden = 1;</script></head><body>
    <nav><a href="/">Home</a></nav><h2>Install  <em>it</em></h2><p>Run the
    installer.</p><h3>Options</h3><ul><li>fast</li><li>safe <b>mode</b></li></ul>
    <table><tr><th>flag</th><th>meaning</th></tr><tr><td>-v</td><td>verbose</td></tr></table>
    <pre># a comment, not a heading\n  indented</pre><style>.x{}</style><div>tail</div>"""
    assert html_to_text(markup) == (
        "## Install it\n\nRun the installer.\n\n### Options\n\n- fast\n- safe mode\n\n"
        "flag | meaning\n-v | verbose\n\n```\n# a comment, not a heading\n  indented\n```\n\ntail"
    )


@pytest.mark.parametrize("markup", ["index.html", "https://example.com/", "", "<p>x</p>" * 3])
def test_fallback_accepts_markup_that_looks_like_a_path(markup: str) -> None:
    assert html_to_text(markup) == markup.replace("<p>", "").replace("</p>", "\n\n").strip()


def test_html_without_any_text_is_warned() -> None:
    doc = parse_document(b"<html><body><script>x()</script></body></html>", name="app.html")
    assert doc.text == ""
    assert doc.warnings[-1] == "no text found"


def test_html_declared_charset_is_honoured() -> None:
    page = '<html><head><meta charset="iso-8859-1"></head><body><footer><p>café</p></footer>'
    doc = parse_document(page.encode("latin-1"), name="old.html")
    assert doc.text == "café"
    doc = parse_document(
        "<footer><p>Жук</p></footer>".encode("cp1251"),
        name="ru.html",
        content_type="text/html; charset=windows-1251",
    )
    assert doc.text == "Жук"


def test_html_undecodable_bytes_are_replaced_and_warned() -> None:
    doc = parse_document(b"<footer><p>caf\xe9 au lait</p></footer>", name="latin.html")
    assert doc.text == "caf\ufffd au lait"
    assert any("U+FFFD" in w for w in doc.warnings)


def test_five_megabyte_single_line_html_parses_within_memory() -> None:
    paragraph = "<p>" + "retrieval over a concept graph stored in postgres " * 4 + "</p>"
    body = paragraph * (5 * MB // len(paragraph) + 1)
    page = f"<html><head><title>Big</title></head><body><h1>Big</h1>{body}</body></html>"
    assert "\n" not in page and len(page) > 5 * MB
    limits = Limits(parse_memory_bytes=512 * MB, max_text_chars=10_000_000)
    # How fast is a benchmark's question (benchmarks/ingest.py), not a test's: a wall-clock bound
    # here failed on a loaded machine.
    doc = parse_document(page.encode(), name="big.html", limits=limits)
    assert doc.title == "Big"
    assert doc.text.startswith("# Big\n\nretrieval over a concept graph")
    assert len(doc.text) > 4 * MB


def test_html_too_costly_to_parse_hits_the_timeout() -> None:
    page = b"<p>x</p>" * 500_000
    with pytest.raises(InvalidInput, match="parse_timeout_s"):
        parse_document(page, name="dense.html", limits=Limits(parse_timeout_s=2))


def test_pdf_pages_map_back_to_their_text() -> None:
    first = "Page one talks about PostgreSQL.\nIt has two lines."
    second = "Page two talks about the torus."
    doc = parse_document(pdf_with_pages(first, second), name="two.pdf")
    assert doc.kind == "pdf"
    assert doc.warnings == ()
    assert [p.number for p in doc.pages] == [1, 2]
    assert doc.text[doc.pages[0].start : doc.pages[0].end] == first
    assert doc.text[doc.pages[1].start : doc.pages[1].end] == second
    assert doc.text == first + "\n\n" + second


def test_pdf_with_a_blank_page_keeps_ranges_and_warns() -> None:
    doc = parse_document(pdf_with_pages("alpha", "", "gamma"), name="gap.pdf")
    assert doc.text == "alpha\n\ngamma"
    assert [(p.start, p.end) for p in doc.pages] == [(0, 5), (5, 5), (7, 12)]
    assert doc.warnings == ("no extractable text on pages 2 (scanned or image-only?)",)


def test_pdf_without_text_is_a_warned_empty_document() -> None:
    doc = parse_document(pdf_with_pages(""), name="scan.pdf")
    assert doc.text == ""
    assert doc.warnings == ("no extractable text (scanned or image-only PDF?)",)


def test_pdf_with_user_password_is_a_warned_empty_document() -> None:
    data = encrypted(pdf_with_pages("secret plans"), user_password="hunter2")
    doc = parse_document(data, name="locked.pdf")
    assert doc.text == ""
    assert doc.warnings == ("encrypted PDF: no text extracted",)


def test_pdf_with_only_an_owner_password_is_read() -> None:
    data = encrypted(pdf_with_pages("open plans"), user_password="")
    doc = parse_document(data, name="owner.pdf")
    assert doc.text == "open plans"
    assert doc.warnings == ()


def test_repaired_pdf_keeps_its_text_and_reports_the_repair() -> None:
    data = re.sub(rb"startxref\n\d+", b"startxref\n9", pdf_with_pages("hello world"))
    doc = parse_document(data, name="moved.pdf")
    assert doc.text == "hello world"
    assert any(w.startswith("pypdf: incorrect startxref") for w in doc.warnings)


@pytest.mark.parametrize("keep", [0.05, 0.5, 0.97])
def test_truncated_pdf_is_not_readable(keep: float) -> None:
    data = pdf_with_pages("some text", "more text")
    with pytest.raises(InvalidInput, match=r"cut\.pdf: not a readable PDF \(\w+"):
        parse_document(data[: int(len(data) * keep)], name="cut.pdf")


def test_a_pdf_decompression_bomb_is_refused_as_one() -> None:
    # The reader's text extraction gives up silently on such a page: without the check the file
    # was stored as an empty "scanned or image-only" document.
    with pytest.raises(InvalidInput, match="page 1 decompresses past the PDF reader's size limit"):
        parse_document(decompression_bomb(), name="bomb.pdf")


def test_pdf_over_the_page_limit_is_rejected() -> None:
    data = pdf_with_pages("a", "b", "c")
    with pytest.raises(InvalidInput, match="3 pages exceeds the 2 page limit.*max_pdf_pages"):
        parse_document(data, name="long.pdf", limits=Limits(max_pdf_pages=2))


def test_pdf_parser_out_of_memory_names_the_limit() -> None:
    data = pdf_with_pages(*["lorem ipsum dolor sit amet " * 100] * 10)
    with pytest.raises(InvalidInput, match="parse_memory_bytes"):
        parse_document(data, name="heavy.pdf", limits=Limits(parse_memory_bytes=32 * MB))


def test_pdf_parser_timeout_names_the_limit() -> None:
    with pytest.raises(InvalidInput, match="parse_timeout_s"):
        parse_document(pdf_with_pages("x"), name="slow.pdf", limits=Limits(parse_timeout_s=0.01))
