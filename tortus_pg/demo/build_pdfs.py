"""Render the demo corpus PDFs from their plain-text sources.

Every manifest entry in ``sources.toml`` whose path ends in ``.pdf`` is built from
``pdf-src/<name>.txt`` with fpdf2's core fonts (so the sources stay ASCII). The text
format is a small subset of markdown:

- ``# Title``, ``## Section`` and ``### Subsection`` lines become headings;
- a line holding only ``---`` starts a new page;
- blank lines separate paragraphs; the lines of a paragraph are joined with spaces,
  except lines starting with ``- `` which are bullet items of their own.

Output is deterministic (fixed creation date), so rebuilding unchanged sources gives
byte-identical files. Run it from anywhere::

    python -m tortus_pg.demo.build_pdfs      # or: python tortus_pg/demo/build_pdfs.py
"""

from __future__ import annotations

import datetime as dt
import sys
import tomllib
from pathlib import Path

from fpdf import FPDF
from fpdf.enums import XPos, YPos

DEMO_DIR = Path(__file__).resolve().parent
SOURCE_DIR = DEMO_DIR / "pdf-src"
CREATION_DATE = dt.datetime(2025, 6, 1, 9, 0, 0, tzinfo=dt.UTC)
HEADING_SIZES = {1: 16.0, 2: 13.0, 3: 11.5}
BODY_SIZE = 10.5
LINE_HEIGHT = 5.5


class _Page(FPDF):
    """A4 pages with a running footer that names the document."""

    def __init__(self, footer_label: str) -> None:
        super().__init__(format="A4")
        self.footer_label = footer_label

    def footer(self) -> None:
        self.set_y(-12)
        self.set_font("Helvetica", "", 8)
        self.cell(0, 5, f"{self.footer_label} - page {self.page_no()}", align="C")


def _blocks(text: str) -> list[tuple[str, str]]:
    """Split source text into ("h1".."h3" | "page" | "bullet" | "para", text) blocks."""
    blocks: list[tuple[str, str]] = []
    para: list[str] = []

    def flush() -> None:
        if para:
            blocks.append(("para", " ".join(para)))
            para.clear()

    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            flush()
        elif line == "---":
            flush()
            blocks.append(("page", ""))
        elif line.startswith("#"):
            flush()
            level = len(line) - len(line.lstrip("#"))
            blocks.append((f"h{min(level, 3)}", line[level:].strip()))
        elif line.startswith("- "):
            flush()
            blocks.append(("bullet", line[2:].strip()))
        else:
            para.append(line)
    flush()
    return blocks


def render(source: Path, target: Path) -> int:
    """Write ``target`` from ``source``; returns the number of pages."""
    text = source.read_text(encoding="ascii")
    blocks = _blocks(text)
    title = next((body for kind, body in blocks if kind == "h1"), source.stem)
    pdf = _Page(footer_label=title)
    pdf.set_creation_date(CREATION_DATE)
    pdf.set_title(title)
    pdf.set_author("Larkfield Pay (fictional)")
    pdf.set_creator("tortus-pg demo corpus")
    pdf.set_auto_page_break(auto=True, margin=18)
    pdf.set_margins(left=20, top=20, right=20)
    pdf.add_page()
    for kind, body in blocks:
        if kind == "page":
            pdf.add_page()
        elif kind.startswith("h"):
            size = HEADING_SIZES[int(kind[1])]
            pdf.ln(2)
            pdf.set_font("Helvetica", "B", size)
            pdf.multi_cell(0, size * 0.55, body, new_x=XPos.LMARGIN, new_y=YPos.NEXT)
            pdf.ln(1.5)
        elif kind == "bullet":
            pdf.set_font("Helvetica", "", BODY_SIZE)
            pdf.set_x(pdf.l_margin + 4)
            pdf.multi_cell(0, LINE_HEIGHT, f"- {body}", new_x=XPos.LMARGIN, new_y=YPos.NEXT)
        else:
            pdf.set_font("Helvetica", "", BODY_SIZE)
            pdf.multi_cell(0, LINE_HEIGHT, body, new_x=XPos.LMARGIN, new_y=YPos.NEXT)
            pdf.ln(2)
    target.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(target))
    return pdf.page_no()


def pdf_targets(manifest: Path = DEMO_DIR / "sources.toml") -> list[tuple[Path, Path]]:
    """(source .txt, target .pdf) for every PDF listed in the manifest."""
    with manifest.open("rb") as fh:
        entries = tomllib.load(fh)["source"]
    pairs = []
    for entry in entries:
        rel = Path(entry["path"])
        if rel.suffix == ".pdf":
            pairs.append((SOURCE_DIR / f"{rel.stem}.txt", manifest.parent / rel))
    return pairs


def main() -> int:
    for source, target in pdf_targets():
        pages = render(source, target)
        if pages < 2:
            print(f"{target.name}: only {pages} page; sources must span 2+", file=sys.stderr)
            return 1
        print(f"{target.relative_to(DEMO_DIR)}: {pages} pages")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
