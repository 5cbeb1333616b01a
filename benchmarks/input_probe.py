"""Feed ingestion and queries hostile input, as a careless or malicious user would.

Into an empty database you name, each hostile source is ingested in a batch together with one
good document, through the library as the CLI does (`pipeline.ingest`). Then each hostile query
goes to the engine and to search. The probe counts:

- **crashes**: an exception escaping the batch or the query, instead of a per-source failure or
  a clear `InvalidInput`;
- **partial states**: a failed source that left rows behind, or a good document in the same
  batch that is missing.

    python benchmarks/input_probe.py --url postgresql://owner@host/input_db

Prints the inputs tried and both counts, and every crash or partial state with its input.
"""

from __future__ import annotations

import argparse
import os
import zlib
from collections.abc import Callable
from pathlib import Path
from tempfile import TemporaryDirectory

import psycopg

from tortus_pg import migrate, tenants
from tortus_pg.db import connect, tenant_scope
from tortus_pg.embed import HashEmbedder
from tortus_pg.engine import answer
from tortus_pg.errors import TortusError
from tortus_pg.ingest import pipeline, sources
from tortus_pg.retrieve import search

TENANT = "hostile"
EMBEDDER = HashEmbedder(dim=384)
GOOD = "# Good\n\nThe good document is owned by the Platform Team.\n"


def _bomb() -> bytes:
    stream = zlib.compress(b"0 0 m " * 14_000_000, 9)
    head = (b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n2 0 obj\n<< /Type /Pages /Kids [3 0 R] "
            b"/Count 1 >>\nendobj\n3 0 obj\n<< /Type /Page /Parent 2 0 R /Contents 4 0 R >>\nendobj\n4 0 obj\n")
    body = head + b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream\nendobj\n"
    return body + b"trailer\n<< /Root 1 0 R >>\n%%EOF\n"


FILES: dict[str, bytes] = {
    "png-renamed.md": b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8,
    "nul-bytes.md": b"# Nul\n\nA\x00B\x00C " * 100,
    "latin1.md": "# Caf\xe9\n\nna\xefve text".encode("latin-1"),
    "utf16.txt": "# Sixteen\n\nwide text".encode("utf-16"),
    "empty.md": b"",
    "one-long-line.md": b"word " * 400_000,
    "deep-headings.md": b"".join(b"#" * (i % 6 + 1) + b" h\n\ntext\n\n" for i in range(5_000)),
    "control-chars.txt": bytes(range(1, 32)) * 500,
    "truncated.pdf": b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog",
    "not-a.pdf": b"<html><body>hello</body></html>",
    "bomb.pdf": _bomb(),
    "nested.html": b"<div>" * 50_000 + b"deep" + b"</div>" * 50_000,
    "script-only.html": b"<html><script>" + b"x();" * 50_000 + b"</script></html>",
    "markup[/b]name.md": b"# Brackets\n\n[red]not markup[/red]\n",
}
QUERIES = ["\x00", "clause\udcff", "x" * 20_000, "   ", "' or 1=1 --", "$$; drop table tortus.node; $$",
           "E-1042" * 500, "\u202e\u200b\ufeff", "a & | ! ( ) : *", "<script>alert(1)</script>"]


def _files(root: Path) -> list[tuple[str, list[sources.SourceSpec]]]:
    cases = []
    for name, data in FILES.items():
        folder = root / name.replace("[", "_").replace("]", "_").replace("/", "_")
        folder.mkdir()
        (folder / name.replace("/", "_")).write_bytes(data)
        (folder / "good.md").write_text(GOOD)
        cases.append((name, sources.resolve([str(folder)], None)))
    links = root / "links"
    links.mkdir()
    (links / "good.md").write_text(GOOD)
    (links / "passwd.md").symlink_to("/etc/passwd")
    (links / "loop.md").symlink_to(links / "loop.md")
    Path(os.fsdecode(os.fsencode(links) + b"/caf\xe9.md")).write_text(GOOD.replace("good", "odd"))
    cases.append(("symlinks and a non-UTF-8 name", sources.resolve([str(links)], None)))
    manifests = {
        "malformed manifest": '[[source]]\npath = "good.md"\nmetadata = "x"\n[[source]]\npath = "good.md"\n'
                              f'subgraph = "{"s" * 300}"\n[[source]]\nurl = "http://169.254.169.254/latest"\n',
        "file:// in a manifest": '[[source]]\nurl = "file:///etc/passwd"\n',
        "a manifest leaving its folder": '[[source]]\npath = "../../etc/passwd"\n',
    }
    for name, text in manifests.items():
        manifest = links / "sources.toml"
        manifest.write_text(text)
        try:
            cases.append((name, sources.from_manifest(manifest)))
        except TortusError as exc:  # a manifest refused as a whole is a clear error, not a crash
            print(f"{name}: refused as a whole: {exc}"[:200])
    return cases


def _ingest_case(conn: psycopg.Connection, name: str, specs: list[sources.SourceSpec], found: dict[str, int]) -> None:
    with tenant_scope(conn, TENANT):
        for (uri,) in conn.execute("select uri from tortus.source").fetchall():
            conn.execute("delete from tortus.source where uri = %s", [uri])
    conn.commit()
    try:
        summary = pipeline.ingest(conn, TENANT, specs, EMBEDDER)
    except Exception as exc:  # noqa: BLE001 - anything escaping the batch is what the probe counts
        found["crashes"] += 1
        print(f"crash: {name}: {type(exc).__name__}: {exc}"[:300])
        conn.rollback()
        return
    failed = {uri for uri, _ in summary.failed}
    with tenant_scope(conn, TENANT):
        stored = {uri for (uri,) in conn.execute("select uri from tortus.source").fetchall()}
    good_expected = any(s.location.endswith("good.md") and not s.problem for s in specs)
    if stored & failed or (good_expected and not any(uri.endswith("good.md") for uri in stored)):
        found["partial"] += 1
        print(f"partial state: {name}: stored {sorted(stored)}, failed {sorted(failed)}")


def _query_case(conn: psycopg.Connection, text: str, found: dict[str, int]) -> None:
    calls: list[Callable[[], object]] = [
        lambda: answer(conn, text, embedder=EMBEDDER, store=True),
        lambda: search(conn, text, mode="hybrid", embedder=EMBEDDER),
        lambda: search(conn, text, mode="keyword"),
    ]
    for call in calls:
        try:
            with tenant_scope(conn, TENANT):
                call()
        except TortusError:
            conn.rollback()
        except Exception as exc:  # noqa: BLE001 - anything but a clear refusal is a crash
            found["crashes"] += 1
            print(f"crash: query {text[:30]!r}: {type(exc).__name__}: {exc}"[:300])
            conn.rollback()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True, help="the owner's URL of an empty database")
    args = parser.parse_args()
    migrate.upgrade(args.url)
    found = {"crashes": 0, "partial": 0}
    with connect(args.url) as conn, TemporaryDirectory() as tmp:
        tenants.create_tenant(conn, TENANT)
        conn.commit()
        cases = _files(Path(tmp))
        for name, specs in cases:
            _ingest_case(conn, name, specs, found)
        for text in QUERIES:
            _query_case(conn, text, found)
    tried = sum(len(specs) for _, specs in cases) + 3 * len(QUERIES)
    print(f"hostile inputs tried: {tried} ({len(cases)} batches, {len(QUERIES)} queries × 3 calls); "
          f"crashes {found['crashes']}, partial states {found['partial']}")


if __name__ == "__main__":
    main()
