"""Progress inside one call: texts embedded a slice at a time, and the index's stages."""

from __future__ import annotations

import psycopg

from tortus_pg import progress, tenants
from tortus_pg.db import tenant_scope
from tortus_pg.embed import PROGRESS_EVERY, HashEmbedder
from tortus_pg.indexing import INDEX_STAGES, build_index
from tortus_pg.ingest.embeddings import embed_cached


def test_embedding_reports_each_slice_and_cached_texts_report_nothing(conn: psycopg.Connection) -> None:
    tenants.create_tenant(conn, "prog")
    texts = [f"text number {i}" for i in range(2 * PROGRESS_EVERY + 22)]
    seen: list[tuple[str, int, int]] = []
    with tenant_scope(conn, "prog"), progress.listening(lambda *event: seen.append(event)):
        first = embed_cached(conn, HashEmbedder(64), texts)
        assert seen == [("embedding", PROGRESS_EVERY, len(texts)), ("embedding", 2 * PROGRESS_EVERY, len(texts)),
                        ("embedding", len(texts), len(texts))]
        seen.clear()
        again = embed_cached(conn, HashEmbedder(64), texts)  # every text cached now
    assert not seen and [list(v) for v in again] == [list(v) for v in first]
    progress.report("embedding", 1, 2)  # outside a listener: nothing to call, no error


def test_the_index_reports_its_stages_in_order(conn: psycopg.Connection) -> None:
    tenants.create_tenant(conn, "prog-index")
    seen: list[tuple[str, int, int]] = []
    with progress.listening(lambda *event: seen.append(event)):
        build_index(conn, "prog-index")
    assert [done for _, done, _ in seen] == list(range(INDEX_STAGES + 1))
    assert all(step.startswith("index: ") and total == INDEX_STAGES for step, _, total in seen)
