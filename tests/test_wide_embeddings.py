"""Embeddings wider than pgvector's 2,000-dimension index limit (up to 4,000, such as OpenAI's
3,072-dimensional model) get an HNSW index as half-precision vectors, and vector search uses it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from tortus_pg import migrate
from tortus_pg.db import connect, tenant_scope
from tortus_pg.embed import HashEmbedder
from tortus_pg.indexing import build_index
from tortus_pg.ingest import pipeline, sources
from tortus_pg.tenants import create_tenant

WIDE = HashEmbedder(dim=3072)
DOCS = {"billing.md": "# Billing Service\n\nThe Billing Service retries a failed charge 4 times.\n",
        "ledger.md": "# Ledger Team\n\nThe Ledger Team is led by Ines Duarte.\n",
        "vault.md": "# Key Vault\n\nKey Vault stores the signing keys, rotated every 90 days.\n"}


def test_a_3072_dimension_tenant_gets_a_halfvec_hnsw_index_that_vector_search_uses(
    fresh_db: Callable[..., str], pg_server: object, tmp_path: Path,
) -> None:
    for name, text in DOCS.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    url = fresh_db()
    migrate.upgrade(url)
    with connect(url) as conn:
        create_tenant(conn, "wide")
        conn.commit()
        assert pipeline.ingest(conn, "wide", sources.from_directory(tmp_path, ()), WIDE).count("ingested") == 3
        build_index(conn, "wide")
        conn.commit()
        definition = conn.execute("select indexdef from pg_indexes where indexname = 'node_embedding_3072_hnsw'"
                                  ).fetchone()
        assert definition is not None and "halfvec(3072)" in definition[0] and "halfvec_cosine_ops" in definition[0]
        query = WIDE.embed(["Who leads the Ledger Team?"])[0]
        with tenant_scope(conn, "wide") as scoped:
            hits = scoped.execute("select n.label from tortus.vector_search(%s::vector, 3) v "
                                  "join tortus.node n using (node_id) order by v.rank", [query]).fetchall()
        assert len(hits) == 3 and "Ledger Team" in hits[0][0]
    # The plan of the statement vector_search runs, as auto_explain reports it to the client. With
    # three rows a sequential scan is cheaper, so it is ruled out: an index that cannot serve the
    # statement's expression would leave the plan a (penalised) sequential scan all the same.
    admin = pg_server.admin_url(url.split("?")[0].rsplit("/", 1)[1])  # type: ignore[attr-defined]
    plans: list[str] = []
    with psycopg.connect(admin, autocommit=True) as su:
        su.add_notice_handler(lambda notice: plans.append(notice.message_primary or ""))
        for setting in ("load 'auto_explain'", "set auto_explain.log_min_duration = 0",
                        "set auto_explain.log_nested_statements = on", "set auto_explain.log_level = notice",
                        "set enable_seqscan = off", "set tortus.tenant = 'wide'"):
            su.execute(setting)
        su.execute("select count(*) from tortus.vector_search(%s::vector, 3)", [query]).fetchone()
    searched = [p for p in plans if "<=>" in p and "halfvec(3072)" in p]
    assert searched, [p[:200] for p in plans]
    scans = [line.strip()[:120] for line in searched[0].splitlines() if "Scan" in line]
    assert scans and all(s.startswith("->  Index Scan using") for s in scans), scans


def test_wider_than_4000_dimensions_is_refused_with_the_limit(conn: psycopg.Connection) -> None:
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="1 to 4000 dimensions"), conn.transaction():
        conn.execute("select tortus.ensure_vector_index(4001)")
    assert conn.execute("select tortus.vector_index_type(2000), tortus.vector_index_type(2001)").fetchone() == (
        "vector", "halfvec")
