"""Ingestion into the graph against the real database: lifecycle, bad input, evidence spans."""

import os
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from pdf_fixtures import decompression_bomb, encrypted, pdf_with_pages

from tortus_pg import tenants
from tortus_pg.db import connect, tenant_scope
from tortus_pg.embed import HashEmbedder
from tortus_pg.ingest import pipeline, sources
from tortus_pg.ingest.pipeline import IngestOptions

EMBEDDER = HashEmbedder(dim=384)

VAULT = """# Key Vault

Key Vault stores certificates and signing keys. Key Vault is owned by the Platform Team.
The Token Service depends on Key Vault for signing keys.
"""
LEDGER = """# Ledger Service

The Ledger Service records every payment. The Ledger Service depends on Key Vault for TLS
certificates. The Ledger Service is owned by the Core Ledger Team, which also runs Ledger Replay.
"""


@pytest.fixture
def db(fresh_db) -> Iterator[psycopg.Connection]:  # type: ignore[no-untyped-def]
    """A database of the test's own: ingest commits one transaction per source."""
    from tortus_pg import migrate

    url = fresh_db()
    migrate.upgrade(url)
    with connect(url) as conn:
        tenants.create_tenant(conn, "t")
        conn.commit()
        yield conn


def ingest_dir(conn: psycopg.Connection, root: Path, **opts: object) -> pipeline.IngestSummary:
    return pipeline.ingest(conn, "t", sources.resolve([str(root)], None), EMBEDDER, IngestOptions(**opts))  # type: ignore[arg-type]


def counts(conn: psycopg.Connection) -> dict[str, int]:
    with tenant_scope(conn, "t"):
        row = conn.execute(
            """select (select count(*) from tortus.source), (select count(*) from tortus.node where kind = 'chunk'),
                      (select count(*) from tortus.node where kind <> 'chunk'), (select count(*) from tortus.edge),
                      (select count(*) from tortus.evidence_span)"""
        ).fetchone()
    assert row is not None
    return dict(zip(("sources", "chunks", "concepts", "edges", "spans"), row, strict=True))


def concept_sources(conn: psycopg.Connection, label: str) -> set[str]:
    """URIs of the sources whose evidence still supports edges of a concept."""
    with tenant_scope(conn, "t"):
        rows = conn.execute(
            """select distinct s.uri from tortus.node n
               join tortus.edge e on n.node_id in (e.src, e.dst)
               join tortus.evidence_span sp on sp.edge_id = e.edge_id
               join tortus.source s on s.source_id = sp.source_id
               where n.label = %s and n.kind <> 'chunk'""",
            [label],
        ).fetchall()
    return {Path(r[0]).name for r in rows}


def test_every_chunk_span_recovers_its_text(db: psycopg.Connection, tmp_path: Path) -> None:
    (tmp_path / "vault.md").write_text(VAULT)
    (tmp_path / "policy.pdf").write_bytes(
        pdf_with_pages("Clause 7.3.2: rotate signing keys every 90 days.", "Clause 7.4: log every access.")
    )
    summary = ingest_dir(db, tmp_path)
    assert summary.failed == [] and summary.count("ingested") == 2
    with tenant_scope(db, "t"):
        rows = db.execute(
            """select n.text, tortus.span_text(sp.tenant_id, sp.source_id, sp.start_char, sp.end_char), sp.page, s.kind
               from tortus.node n join tortus.evidence_span sp on sp.node_id = n.node_id
               join tortus.source s on s.source_id = sp.source_id where n.kind = 'chunk'"""
        ).fetchall()
        mentions = db.execute(
            """select n.label, tortus.span_text(sp.tenant_id, sp.source_id, sp.start_char, sp.end_char)
               from tortus.edge e join tortus.node n on n.node_id = e.dst
               join tortus.evidence_span sp on sp.edge_id = e.edge_id where e.type = 'mentions'"""
        ).fetchall()
    assert rows and all(text == span for text, span, _, _ in rows)
    assert {page for *_, page, kind in rows if kind == "pdf"} == {1, 2}
    assert mentions and all(label.casefold() in span.casefold() or span for label, span in mentions)
    assert ("Key Vault", "Key Vault") in mentions


def defining_chunks(conn: psycopg.Connection) -> list[tuple[str, str, str]]:
    """(concept label, defining chunk's text, the edge's evidence text) of every defines edge."""
    with tenant_scope(conn, "t"):
        return conn.execute(  # type: ignore[return-value]
            """select c.label, n.text, tortus.span_text(sp.tenant_id, sp.source_id, sp.start_char, sp.end_char)
               from tortus.edge e join tortus.node n on n.node_id = e.src join tortus.node c on c.node_id = e.dst
               join tortus.evidence_span sp on sp.edge_id = e.edge_id where e.type = 'defines' order by 1"""
        ).fetchall()


def test_definitions_link_title_concepts_to_their_document(db: psycopg.Connection, tmp_path: Path) -> None:
    (tmp_path / "vault.md").write_text(VAULT)
    (tmp_path / "ledger.md").write_text(LEDGER)
    ingest_dir(db, tmp_path)
    found = defining_chunks(db)
    assert [label for label, *_ in found] == ["Key Vault", "Ledger Service"]
    assert all(text == evidence for _, text, evidence in found)  # the chunk is the evidence
    # The ledger mentions Key Vault, but only the vault's own document defines it.
    assert "Key Vault stores certificates" in found[0][1]
    assert pipeline.remove(db, "t", str((tmp_path / "vault.md").resolve()))
    assert [label for label, *_ in defining_chunks(db)] == ["Ledger Service"]


def test_reingest_unchanged_is_a_no_op(db: psycopg.Connection, tmp_path: Path) -> None:
    (tmp_path / "vault.md").write_text(VAULT)
    ingest_dir(db, tmp_path)
    before = counts(db)
    again = ingest_dir(db, tmp_path)
    assert again.count("unchanged") == 1 and counts(db) == before


def test_changed_content_replaces_the_source(db: psycopg.Connection, tmp_path: Path) -> None:
    doc = tmp_path / "vault.md"
    doc.write_text(VAULT)
    ingest_dir(db, tmp_path)
    doc.write_text(VAULT.replace("Platform Team", "Security Team"))
    assert ingest_dir(db, tmp_path).count("updated") == 1
    with tenant_scope(db, "t"):
        labels = {r[0] for r in db.execute("select label from tortus.node where kind <> 'chunk'")}
        texts = " ".join(r[0] for r in db.execute("select text from tortus.node where kind = 'chunk'"))
    assert "Security Team" in labels and "Platform Team" not in labels
    assert "Platform Team" not in texts


def test_removal_keeps_shared_concepts_with_their_remaining_evidence(db: psycopg.Connection, tmp_path: Path) -> None:
    (tmp_path / "vault.md").write_text(VAULT)
    (tmp_path / "ledger.md").write_text(LEDGER)
    ingest_dir(db, tmp_path)
    assert concept_sources(db, "Key Vault") == {"vault.md", "ledger.md"}
    assert concept_sources(db, "Ledger Replay") == {"ledger.md"}
    assert pipeline.remove(db, "t", str((tmp_path / "ledger.md").resolve()))
    assert concept_sources(db, "Key Vault") == {"vault.md"}
    with tenant_scope(db, "t"):
        assert db.execute("select count(*) from tortus.node where label = 'Ledger Replay'").fetchone() == (0,)
        assert db.execute("select count(*) from tortus.node where label = 'Key Vault'").fetchone() == (1,)
    ingest_dir(db, tmp_path)  # re-adding restores the same graph
    assert concept_sources(db, "Key Vault") == {"vault.md", "ledger.md"}


def test_bad_inputs_fail_alone_and_are_reported(db: psycopg.Connection, tmp_path: Path) -> None:
    (tmp_path / "good.md").write_text(VAULT)
    (tmp_path / "binary.md").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 20)
    (tmp_path / "latin1.txt").write_bytes("caf\xe9 au lait".encode("latin-1"))
    (tmp_path / "scanned.pdf").write_bytes(pdf_with_pages("", ""))
    (tmp_path / "locked.pdf").write_bytes(encrypted(pdf_with_pages("secret"), user_password="pw"))
    (tmp_path / "broken.pdf").write_bytes(pdf_with_pages("text")[:200])
    # 5 MB on one line, mostly inline script as in bundled web apps; the text is one paragraph.
    script = "var a=" + "1," * 2_500_000 + "0;"
    (tmp_path / "huge.html").write_text(
        f"<html><head><script>{script}</script></head><body><h1>Build</h1><p>{VAULT}</p></body></html>"
    )
    summary = ingest_dir(db, tmp_path)
    failed = {Path(uri).name: reason for uri, reason in summary.failed}
    assert set(failed) == {"binary.md", "latin1.txt", "broken.pdf"}
    assert "binary" in failed["binary.md"] and "UTF-8" in failed["latin1.txt"]
    warned = {Path(r.uri).name: r.warnings for r in summary.warned}
    assert {"scanned.pdf", "locked.pdf"} <= set(warned)
    assert any("encrypted" in w for w in warned["locked.pdf"])
    assert {Path(r.uri).name for r in summary.results} == {"good.md", "scanned.pdf", "locked.pdf", "huge.html"}
    with tenant_scope(db, "t"):
        stored = {Path(r[0]).name for r in db.execute("select uri from tortus.source")}
    assert "binary.md" not in stored and "good.md" in stored


def test_url_to_loopback_is_refused_without_the_flag(db: psycopg.Connection) -> None:
    spec = sources.resolve(["http://127.0.0.1:9/doc.html"], None)
    summary = pipeline.ingest(db, "t", spec, EMBEDDER)
    assert len(summary.failed) == 1 and "loopback" in summary.failed[0][1]


def test_manifest_cannot_escape_its_directory(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    manifest = tmp_path / "m" / "sources.toml"
    manifest.write_text('[[source]]\npath = "../secret.md"\n')
    with pytest.raises(Exception, match="leaves the manifest's directory"):
        sources.from_manifest(manifest)


def test_a_directory_walk_refuses_links_out_of_the_tree_and_loops(db: psycopg.Connection, tmp_path: Path) -> None:
    outside = tmp_path / "secret.md"
    outside.write_text("# Secret\n\nThe vault combination is 12-34-56.\n")
    tree = tmp_path / "docs"
    tree.mkdir()
    (tree / "vault.md").write_text(VAULT)
    (tree / "inside.md").symlink_to(tree / "vault.md")  # a link within the tree is a file like any other
    (tree / "escape.md").symlink_to(outside)
    (tree / "loop.md").symlink_to(tree / "loop.md")
    loop = tmp_path / "arg-loop.md"
    loop.symlink_to(loop)
    summary = pipeline.ingest(db, "t", sources.resolve([str(tree), str(loop)], None), EMBEDDER)
    failed = dict(summary.failed)
    assert "outside" in failed[str(tree / "escape.md")]
    assert "loops" in failed[str(tree / "loop.md")] and "loops" in failed[str(loop)]
    assert {r.status for r in summary.results} == {"ingested", "unchanged"}  # vault.md, and inside.md its twin
    with tenant_scope(db, "t"):
        assert db.execute("select count(*) from tortus.node where text like '%%combination%%'").fetchone() == (0,)


def test_malformed_sources_fail_one_by_one_and_the_batch_carries_on(db: psycopg.Connection, tmp_path: Path) -> None:
    (tmp_path / "vault.md").write_text(VAULT)
    (tmp_path / "ledger.md").write_text(LEDGER)
    long_name = "x" * 201
    manifest = tmp_path / "sources.toml"
    manifest.write_text(
        '[[source]]\npath = "vault.md"\nmetadata = "notatable"\n\n'
        '[[source]]\npath = "vault.md"\nmetadata = { title = "Vault", tags = ["a"] }\n\n'
        f'[[source]]\npath = "vault.md"\nsubgraph = "{long_name}"\n\n'
        '[[source]]\npath = "ledger.md"\nmetadata = { title = "Ledger", year = 2024 }\n')
    summary = pipeline.ingest(db, "t", sources.from_manifest(manifest), EMBEDDER)
    reasons = [reason for _, reason in summary.failed]
    assert len(reasons) == 3 and [r.status for r in summary.results] == ["ingested"]
    assert "metadata must be a table" in reasons[0] and "metadata 'tags'" in reasons[1]
    assert "subgraph names have 1 to 200 characters" in reasons[2]
    # A file whose name is not UTF-8 fails alone too.
    odd = tmp_path / "docs"
    odd.mkdir()
    (odd / "keep.md").write_text(VAULT)
    Path(os.fsdecode(os.fsencode(odd) + b"/caf\xe9.md")).write_text(LEDGER)  # Latin-1 bytes in the name
    walked = pipeline.ingest(db, "t", sources.resolve([str(odd)], None), EMBEDDER)
    assert len(walked.failed) == 1 and "not valid UTF-8" in walked.failed[0][1]
    assert len(walked.results) == 1


def test_concurrent_ingests_of_overlapping_files_both_finish(fresh_db, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import threading

    from tortus_pg import migrate

    url = fresh_db()
    migrate.upgrade(url)
    with connect(url) as conn:
        tenants.create_tenant(conn, "t")
        conn.commit()
    for n in range(8):
        (tmp_path / f"doc{n}.md").write_text(f"# Service {n}\n\n" + VAULT + LEDGER)
    specs = sources.resolve([str(tmp_path)], None)
    start = threading.Barrier(2)
    summaries: list[pipeline.IngestSummary] = []

    def run() -> None:
        with connect(url) as conn:
            start.wait()
            summaries.append(pipeline.ingest(conn, "t", specs, EMBEDDER))

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert len(summaries) == 2 and all(not s.failed for s in summaries), [s.failed for s in summaries]
    statuses = sorted(r.status for s in summaries for r in s.results)
    assert statuses == ["ingested"] * 8 + ["unchanged"] * 8


def test_a_pdf_bomb_fails_as_its_source_and_stores_nothing(db: psycopg.Connection, tmp_path: Path) -> None:
    (tmp_path / "bomb.pdf").write_bytes(decompression_bomb())
    (tmp_path / "vault.md").write_text(VAULT)
    summary = pipeline.ingest(db, "t", sources.resolve([str(tmp_path)], None), EMBEDDER)
    assert [r.uri.rsplit("/", 1)[-1] for r in summary.results] == ["vault.md"]
    assert len(summary.failed) == 1 and "decompression bomb" in summary.failed[0][1]
    with tenant_scope(db, "t"):
        assert db.execute("select count(*) from tortus.source where uri like '%%bomb.pdf'").fetchone() == (0,)
