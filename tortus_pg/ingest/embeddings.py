"""Embeddings cached in PostgreSQL by (model, text hash), so unchanged text is never re-embedded."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import psycopg

from tortus_pg.embed import Embedder


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def embed_cached(conn: psycopg.Connection, embedder: Embedder, texts: Sequence[str]) -> list[np.ndarray]:
    """Embeddings for `texts` (in order), computing only those not cached for this tenant."""
    hashes = [text_hash(t) for t in texts]
    rows = conn.execute(
        "select text_sha256, embedding from tortus.embedding_cache "
        "where tenant_id = tortus.current_tenant() and model = %s and text_sha256 = any(%s)",
        [embedder.name, list(set(hashes))],
    ).fetchall()
    cached: dict[str, np.ndarray] = {h: np.asarray(v.to_numpy(), dtype=np.float32) for h, v in rows}
    missing = {h: t for h, t in zip(hashes, texts, strict=True) if h not in cached}
    if missing:
        wanted = list(missing.values())
        fresh = embedder.embed(wanted)  # embedders report their own progress as they go
        new_rows = [(h, np.asarray(v, dtype=np.float32)) for h, v in zip(missing, fresh, strict=True)]
        with conn.cursor() as cur:
            cur.executemany(
                "insert into tortus.embedding_cache (tenant_id, model, text_sha256, embedding) "
                "values (tortus.current_tenant(), %s, %s, %s) on conflict do nothing",
                [(embedder.name, h, v) for h, v in new_rows],
            )
        cached.update(new_rows)
    return [cached[h] for h in hashes]
