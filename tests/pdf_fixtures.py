"""Small real PDFs for tests: text written with fpdf2, encryption added with pypdf."""

from __future__ import annotations

import io

from fpdf import FPDF
from pypdf import PdfReader, PdfWriter


def pdf_with_pages(*pages: str) -> bytes:
    """A PDF with one page per argument; an empty string gives a blank page."""
    pdf = FPDF()
    pdf.set_font("helvetica", size=12)
    for text in pages:
        pdf.add_page()
        if text:
            pdf.multi_cell(w=0, text=text)
    return bytes(pdf.output())


def encrypted(data: bytes, *, user_password: str, owner_password: str = "owner") -> bytes:
    """The same PDF encrypted with RC4-128, which pypdf reads without extra packages."""
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(data)))
    writer.encrypt(user_password, owner_password, algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()
