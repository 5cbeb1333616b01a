"""Bytes in, Document out: markdown, text, HTML and PDF, within the bounds of Limits."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict, replace
from functools import partial
from pathlib import Path, PurePosixPath

from tortus_pg.errors import InvalidInput
from tortus_pg.ingest.types import Document, Limits, Page

_EXTENSIONS = {
    ".md": "markdown",
    ".mdx": "markdown",
    ".txt": "text",
    ".html": "html",
    ".htm": "html",
    ".pdf": "pdf",
}
_CONTENT_TYPES = {
    "text/markdown": "markdown",
    "text/x-markdown": "markdown",
    "text/plain": "text",
    "text/html": "html",
    "application/xhtml+xml": "html",
    "application/pdf": "pdf",
}
# Below this many tags trafilatura and bs4 finish in a couple of seconds and a few tens of
# MB, so the page is parsed in-process; above it a child process enforces the limits.
_INPROCESS_HTML_TAGS = 20_000
_DEFAULT_LIMITS = Limits()
_MB = 1024 * 1024
# Control bytes that never appear in real text (tab, newlines, form feed, escape do).
_CONTROL_BYTES = bytes(b for b in range(32) if b not in b"\b\t\n\v\f\r\x1b") + b"\x7f"
_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?)^(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.S | re.M)
_YAML_KEY = re.compile(r"^[A-Za-z_][\w-]*[ \t]*:", re.M)
_YAML_TITLE = re.compile(r"^title[ \t]*:[ \t]*(.*?)[ \t]*$", re.M)
_ATX_H1 = re.compile(r" {0,3}#[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*")

Parser = Callable[[bytes, str, Limits], Document]


def detect_kind(name: str, content_type: str | None) -> str:
    """Return 'markdown', 'text', 'html' or 'pdf' from the file extension, else the
    content type; raise InvalidInput for anything else."""
    kind = _EXTENSIONS.get(PurePosixPath(name).suffix.lower())
    if kind is None and content_type:
        kind = _CONTENT_TYPES.get(content_type.split(";")[0].strip().lower())
    if kind is None:
        supported = ", ".join(_EXTENSIONS)
        raise InvalidInput(f"{name}: unsupported file type; supported extensions: {supported}")
    return kind


def parse_document(
    data: bytes, *, name: str, content_type: str | None = None, limits: Limits = _DEFAULT_LIMITS
) -> Document:
    """Parse untrusted bytes into a Document. Anything degraded along the way is listed in
    Document.warnings; input that cannot be read raises InvalidInput."""
    kind = detect_kind(name, content_type)
    if len(data) > limits.max_file_bytes:
        raise InvalidInput(
            f"{name}: {len(data) / _MB:.1f} MB exceeds the {limits.max_file_bytes / _MB:.1f} MB"
            " limit; raise max_file_bytes to accept larger files"
        )
    if kind in ("markdown", "text"):
        doc = _parse_text(data, name=name, kind=kind)
    elif kind == "html" and data.count(b"<") <= _INPROCESS_HTML_TAGS:
        doc = _parser(kind, content_type)(data, name, limits)
    else:
        doc = _run_isolated(kind, data, name=name, content_type=content_type, limits=limits)
    _check_text_size(doc, name, limits)
    if not doc.text.strip() and kind != "pdf":  # PDFs say why they have no text
        doc = replace(doc, warnings=(*doc.warnings, "no text found"))
    return doc


def _parse_text(data: bytes, *, name: str, kind: str) -> Document:
    text = _decode_utf8(data, name)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if kind == "text":
        return Document(text=text, kind=kind)
    title = None
    match = _FRONT_MATTER.match(text)
    if match and _YAML_KEY.search(match.group(1)):
        title = _front_matter_title(match.group(1))
        text = text[match.end() :].lstrip("\n")
    return Document(text=text, kind=kind, title=title or _markdown_title(text))


def _decode_utf8(data: bytes, name: str) -> str:
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise InvalidInput(f"{name}: UTF-16 text is not supported; save the file as UTF-8")
    sample = data[:8192]
    if b"\x00" in data or sum(sample.count(b) for b in _CONTROL_BYTES) > len(sample) // 20:
        raise InvalidInput(f"{name}: looks like a binary file, not text")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise InvalidInput(f"{name}: not valid UTF-8 at byte {e.start} (line {line}); save the file as UTF-8") from None
    return text.removeprefix("\ufeff")


def _front_matter_title(block: str) -> str | None:
    match = _YAML_TITLE.search(block)
    if match is None:
        return None
    value = match.group(1)
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1]
    if value.startswith(("|", ">")):
        return None
    return value.strip() or None


def _markdown_title(text: str) -> str | None:
    fence: str | None = None
    for line in text.split("\n"):
        stripped = line.lstrip()
        if stripped.startswith(("```", "~~~")):
            if fence is None:
                fence = stripped[:3]
            elif stripped.startswith(fence):
                fence = None
            continue
        if fence is None and (match := _ATX_H1.fullmatch(line)):
            return match.group(1).strip()
    return None


def _check_text_size(doc: Document, name: str, limits: Limits) -> None:
    if len(doc.text) > limits.max_text_chars:
        raise InvalidInput(
            f"{name}: {len(doc.text)} characters of text exceeds the {limits.max_text_chars}"
            " limit; raise max_text_chars to accept it"
        )


def _parser(kind: str, content_type: str | None) -> Parser:
    # Parser modules load heavy libraries at import, so import them only when needed.
    if kind == "pdf":
        from tortus_pg.ingest.pdf import parse_pdf

        return parse_pdf
    from tortus_pg.ingest.html import parse_html

    return partial(parse_html, content_type=content_type)


def _run_isolated(kind: str, data: bytes, *, name: str, content_type: str | None, limits: Limits) -> Document:
    """Parse in a fresh interpreter capped by parse_memory_bytes and parse_timeout_s, so a
    hostile file cannot take the caller down with it. The memory cap is on the whole
    address space of that process, interpreter and libraries included."""
    header = {"kind": kind, "name": name, "content_type": content_type, "limits": asdict(limits)}
    # The child imports tortus_pg from where this process did; -P keeps the working
    # directory off its path so another checkout there cannot shadow it.
    root = str(Path(__file__).parents[2])
    command = [sys.executable, "-P", "-c", _CHILD, root]
    stdin = json.dumps(header).encode() + b"\n" + data
    try:
        proc = subprocess.run(command, input=stdin, capture_output=True, timeout=limits.parse_timeout_s)
    except subprocess.TimeoutExpired:
        raise InvalidInput(
            f"{name}: parsing took longer than the {limits.parse_timeout_s:g} s"
            " parse_timeout_s limit; raise it if the file is trustworthy"
        ) from None
    memory = f"the {limits.parse_memory_bytes / _MB:.1f} MB parse_memory_bytes limit"
    try:
        result = json.loads(proc.stdout)
    except ValueError:
        result = None
    if proc.returncode != 0 or not isinstance(result, dict):
        last = (proc.stderr.decode(errors="replace").strip().splitlines() or ["no output"])[-1]
        raise InvalidInput(
            f"{name}: the parser process failed (exit code {proc.returncode}: {last[:200]}); it may have hit {memory}"
        )
    if result["status"] == "memory":
        raise InvalidInput(f"{name}: parsing ran out of memory under {memory}; raise it")
    if result["status"] == "failed":
        raise InvalidInput(f"{name}: the parser failed ({result['detail']}); it may have hit {memory}")
    if result["status"] == "invalid":
        raise InvalidInput(result["message"])
    doc = result["doc"]
    return Document(
        text=doc["text"],
        kind=doc["kind"],
        title=doc["title"],
        pages=tuple(Page(**page) for page in doc["pages"]),
        warnings=tuple(doc["warnings"]),
    )


_CHILD = """
import os, sys
root = os.path.realpath(sys.argv[1])
if root not in map(os.path.realpath, sys.path):
    sys.path.insert(0, root)
from tortus_pg.ingest.parse import _child_main
_child_main()
"""


def _child_main() -> None:
    """Entry point of the parser process: a JSON header line and the file on stdin, one
    JSON object on stdout."""
    import resource

    stdin = sys.stdin.buffer
    header = json.loads(stdin.readline())
    limits = Limits(**header["limits"])
    name = header["name"]
    parser = _parser(header["kind"], header["content_type"])
    data = stdin.read()
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    soft = limits.parse_memory_bytes
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    result: dict[str, object]
    try:
        doc = parser(data, name, limits)
        _check_text_size(doc, name, limits)
        result = {"status": "ok", "doc": asdict(doc)}
    except InvalidInput as e:
        result = {"status": "invalid", "message": str(e)}
    except MemoryError:
        result = {"status": "memory"}
    except Exception as e:  # under the address-space cap, anything can fail to allocate
        result = {"status": "failed", "detail": f"{type(e).__name__}: {e}"[:300]}
    sys.stdout.buffer.write(json.dumps(result, ensure_ascii=False).encode())
    sys.stdout.buffer.flush()
