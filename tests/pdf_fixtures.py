"""Small real PDFs for tests: text written with fpdf2, encryption added with pypdf."""

from __future__ import annotations

import io
import zlib

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


def decompression_bomb(size: int = 80_000_000) -> bytes:
    """A one-page PDF whose content stream is about 100 KB compressed and `size` bytes inflated."""
    stream = zlib.compress(b"0 0 m " * (size // 6), 9)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << >> >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
    ]
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)
