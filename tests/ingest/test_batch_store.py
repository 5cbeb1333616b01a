"""Storing many documents in one batch (`store_documents`) against the real database: the graph
is the one storing them one by one gives, whatever the batch shares; spans stay inside their
sources; the plan setting the batch needs is put back."""

import hashlib
from collections.abc import Iterator

import psycopg
import pytest

from tortus_pg import tenants
from tortus_pg.db import connect, tenant_scope
from tortus_pg.embed import HashEmbedder
from tortus_pg.ingest.chunking import chunk_document
from tortus_pg.ingest.corpus import Passage, ingest_passages
from tortus_pg.ingest.extract import extract_concepts
from tortus_pg.ingest.store import Prepared, SourceRecord, store_document, store_documents
from tortus_pg.ingest.types import Document

EMBEDDER = HashEmbedder(dim=384)

VAULT = """# Key Vault

Key Vault keeps the signing keys of every team. It is owned by the Platform Team.
The Token Service depends on Key Vault for its signing keys.
"""
LEDGER = """# Ledger Service

The Ledger Service books each payment twice. It depends on Key Vault for TLS certificates.
The Ledger Service is owned by the Core Ledger Team, which also runs Ledger Replay.
"""
# Several chunks (reading-order edges), and the Token Service's dependency stated again.
TOKENS = "# Token Service\n\n" + "\n\n".join(
    f"## Part {n}\n\nThe Token Service depends on Key Vault for signing keys. " + "It issues short-lived tokens. " * 40
    for n in range(1, 4)
)


def prepared(uri: str, text: str, subgraph: str = "ops") -> Prepared:
    doc = Document(text=text, kind="markdown", title=text.splitlines()[0].lstrip("# "))
    chunks = chunk_document(doc)
    sha256 = hashlib.sha256(text.encode()).hexdigest()
    record = SourceRecord(uri=uri, kind="markdown", sha256=sha256, subgraphs=(subgraph,))
    return Prepared(record, doc, chunks, extract_concepts(doc, chunks, title=doc.title))


@pytest.fixture
def db(fresh_db) -> Iterator[psycopg.Connection]:  # type: ignore[no-untyped-def]
    from tortus_pg import migrate

    url = fresh_db()
    migrate.upgrade(url)
    with connect(url) as conn:
        for tenant in ("batch", "single"):
            tenants.create_tenant(conn, tenant)
        conn.commit()
        yield conn


_NAMES = """
with names as (
    select n.node_id, case when n.kind = 'chunk' then s.uri || '#' || (n.props ->> 'index')
                           else n.kind || ':' || n.key end as name
    from tortus.node n left join tortus.source s on s.tenant_id = n.tenant_id and s.source_id = n.source_id)
"""
GRAPH = {
    "nodes": "select m.name, n.label, n.text, n.tsv::text, n.embedding::text, n.props::text "
             "from tortus.node n join names m using (node_id)",
    "edges": "select a.name, b.name, e.type, e.weight, e.confidence, s.uri, e.provenance::text from tortus.edge e "
             "join names a on a.node_id = e.src join names b on b.node_id = e.dst "
             "left join tortus.source s on s.source_id = e.source_id",
    "spans": "select s.uri, sp.start_char, sp.end_char, sp.page, m.name, a.name, b.name, e.type "
             "from tortus.evidence_span sp join tortus.source s on s.source_id = sp.source_id "
             "left join names m on m.node_id = sp.node_id left join tortus.edge e on e.edge_id = sp.edge_id "
             "left join names a on a.node_id = e.src left join names b on b.node_id = e.dst",
    "members": "select m.name, ms.subgraph from tortus.membership ms join names m using (node_id)",
    "terms": "select lexeme, df from tortus.bm25_term",
    "corpus": "select n_docs, total_len from tortus.bm25_corpus",
    "sources": "select uri, sha256, text, subgraphs::text from tortus.source",
}


def graph(conn: psycopg.Connection, tenant: str) -> dict[str, list[tuple[object, ...]]]:
    """The tenant's whole graph, named by content (a chunk by its source and index, a concept by
    its kind and key), so two tenants compare whatever ids their rows got."""
    with tenant_scope(conn, tenant):
        return {table: sorted(conn.execute(_NAMES + sql).fetchall(), key=repr) for table, sql in GRAPH.items()}


def test_a_batch_stores_the_graph_storing_one_by_one_gives(db: psycopg.Connection) -> None:
    rounds = [
        [prepared("vault.md", VAULT), prepared("ledger.md", LEDGER), prepared("tokens.md", TOKENS, "identity")],
        # Unchanged, changed (a dependency dropped, one added) and new, in one batch.
        [prepared("vault.md", VAULT),
         prepared("ledger.md", LEDGER.replace("on Key Vault for TLS", "on the HSM for TLS")),
         prepared("replay.md", "# Ledger Replay\n\nLedger Replay depends on the Ledger Service for events.\n")],
    ]
    statuses = []
    for batch in rounds:
        with tenant_scope(db, "batch"):
            statuses.append([r.status for r in store_documents(db, batch, EMBEDDER)])
        with tenant_scope(db, "single"):
            for p in batch:
                store_document(db, p.record, p.doc, p.chunks, p.extraction, EMBEDDER)
        assert graph(db, "batch") == graph(db, "single")
    assert statuses == [["ingested"] * 3, ["unchanged", "updated", "ingested"]]
    found = graph(db, "batch")
    assert len(found["nodes"]) > 10 and any(e[2] == "next" for e in found["edges"])
    assert any(e[2] == "depends_on" and e[5] is None for e in found["edges"])  # a typed edge shared by sources


def test_a_batch_names_each_source_once(db: psycopg.Connection) -> None:
    with tenant_scope(db, "batch"), pytest.raises(ValueError, match="each source once"):
        store_documents(db, [prepared("vault.md", VAULT), prepared("vault.md", LEDGER)], EMBEDDER)


def test_a_passage_id_repeated_in_a_batch_keeps_the_last_text(db: psycopg.Connection) -> None:
    passages = [Passage("p1", "Key Vault", VAULT), Passage("p2", "Ledger", LEDGER), Passage("p1", "Key Vault", LEDGER)]
    summary = ingest_passages(db, "batch", passages, EMBEDDER, uri_prefix="c/", subgraph="corpus")
    assert [r.status for r in summary.results] == ["ingested", "ingested", "updated"]
    with tenant_scope(db, "batch"):
        texts = dict(db.execute("select uri, text from tortus.source").fetchall())
    assert texts == {"c/p1": f"Key Vault\n\n{LEDGER}", "c/p2": f"Ledger\n\n{LEDGER}"}


def test_the_plan_setting_is_put_back_after_a_batch(db: psycopg.Connection) -> None:
    with tenant_scope(db, "batch"):
        db.execute("set local plan_cache_mode = force_custom_plan")
        store_documents(db, [prepared("vault.md", VAULT)], EMBEDDER)
        row = db.execute("select current_setting('plan_cache_mode')").fetchone()
    assert row == ("force_custom_plan",)


def test_a_statement_writing_a_span_past_its_source_is_rejected_whole(db: psycopg.Connection) -> None:
    with tenant_scope(db, "batch"):
        store_documents(db, [prepared("vault.md", VAULT)], EMBEDDER)
    length = len(VAULT)
    for bad in (
        "insert into tortus.evidence_span (tenant_id, source_id, start_char, end_char, node_id) "
        f"select tenant_id, source_id, 0, e, node_id from tortus.evidence_span, (values ({length}), "
        f"({length + 5})) v(e) where node_id is not null",
        f"update tortus.evidence_span set end_char = end_char + {length}",
    ):
        with tenant_scope(db, "batch"):
            before = db.execute("select count(*), sum(end_char) from tortus.evidence_span").fetchone()
        with pytest.raises(psycopg.errors.CheckViolation, match="lies outside source"), tenant_scope(db, "batch"):
            db.execute(bad)
        with tenant_scope(db, "batch"):
            assert db.execute("select count(*), sum(end_char) from tortus.evidence_span").fetchone() == before
