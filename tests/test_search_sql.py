"""tortus.bm25_search against an independent BM25, vector search against exact search, RRF properties."""

import math
import random
import re
from collections import Counter

import numpy as np
import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tortus_pg import tenants
from tortus_pg.db import tenant_scope

VOCAB = [f"w{i}" for i in range(60)] + ["ledger", "vault", "token", "rotation", "E-1042", "7.3.2", "4.2", "PCI"]


def random_text(rng: random.Random) -> str:
    words = rng.choices(VOCAB, weights=[1 / (i + 1) for i in range(len(VOCAB))], k=rng.randint(3, 40))
    return " ".join(words)


def add_chunks(conn: psycopg.Connection, texts: list[str]) -> list[int]:
    rows = conn.execute(
        "insert into tortus.node (tenant_id, kind, key, label, text, tsv) "
        "select tortus.current_tenant(), 'chunk', 'k' || i, 'c', t, to_tsvector('english', t) "
        "from unnest(%s::text[]) with ordinality as x(t, i) returning node_id",
        [texts],
    ).fetchall()
    return [r[0] for r in rows]


def reference_bm25(conn: psycopg.Connection, query: str, k1: float = 1.2, b: float = 0.75) -> dict[int, float]:
    """Okapi BM25 computed in Python from the chunks' own tsvectors (not from the statistics tables)."""
    docs: dict[int, Counter[str]] = {}
    for node_id, lexeme, tf in conn.execute(
        "select n.node_id, l.lexeme, coalesce(array_length(l.positions, 1), 1) "
        "from tortus.node n, unnest(n.tsv) l where n.kind = 'chunk'"
    ):
        docs.setdefault(node_id, Counter())[lexeme] = tf
    empty = conn.execute("select node_id from tortus.node where kind = 'chunk' and length(tsv) = 0").fetchall()
    for (node_id,) in empty:
        docs.setdefault(node_id, Counter())
    terms = {r[0] for r in conn.execute("select lexeme from unnest(to_tsvector('english', %s))", [query])}
    n = len(docs)
    avgdl = sum(sum(c.values()) for c in docs.values()) / n
    df = {t: sum(1 for c in docs.values() if t in c) for t in terms}
    scores = {}
    for node_id, counts in docs.items():
        dl = sum(counts.values())
        s = sum(
            math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
            * counts[t] * (k1 + 1) / (counts[t] + k1 * (1 - b + b * dl / avgdl))
            for t in terms if counts[t]
        )
        if any(counts[t] for t in terms):
            scores[node_id] = s
    return scores


def sql_bm25(conn: psycopg.Connection, query: str, k: int = 1000) -> dict[int, float]:
    return dict(conn.execute("select node_id, score from tortus.bm25_search(%s, %s)", [query, k]).fetchall())


QUERIES = ["ledger vault", "w1 w2 w3", "E-1042", "clause 7.3.2", "version 4.2 token rotation", "PCI w0", "nothing-here"]


def assert_matches_reference(conn: psycopg.Connection) -> None:
    for q in QUERIES:
        expected, got = reference_bm25(conn, q), sql_bm25(conn, q)
        assert got.keys() == expected.keys(), q
        for node_id, score in expected.items():
            assert got[node_id] == pytest.approx(score, abs=1e-9, rel=1e-9), (q, node_id)


def test_bm25_equals_reference_before_and_after_updates_and_deletes(conn: psycopg.Connection) -> None:
    rng = random.Random(7)
    tenants.create_tenant(conn, "bm")
    with tenant_scope(conn, "bm"):
        ids = add_chunks(conn, [random_text(rng) for _ in range(300)])
        assert_matches_reference(conn)
        for node_id in ids[:40]:
            t = random_text(rng)
            conn.execute(
                "update tortus.node set text = %s, tsv = to_tsvector('english', %s) where node_id = %s", [t, t, node_id]
            )
        conn.execute("delete from tortus.node where node_id = any(%s)", [ids[40:90]])
        assert_matches_reference(conn)


def reference_top(conn: psycopg.Connection, query: str, k: int) -> list[tuple[int, float]]:
    return sorted(reference_bm25(conn, query).items(), key=lambda x: (-x[1], x[0]))[:k]


def mixed_text(rng: random.Random, i: int) -> str:
    """Common words (each in most chunks) with a rare one now and then (each in a few chunks)."""
    rare = [w for w, every in (("ledger", 23), ("vault", 37), ("token", 61), ("rotation", 97)) if i % every == 0]
    return " ".join(rng.choices(VOCAB[:8], k=rng.randint(5, 30)) + rare * rng.randint(1, 3))


@pytest.mark.parametrize("k", [1, 3, 10, 30])
def test_bm25_top_k_is_exact_when_rare_terms_decide_it(conn: psycopg.Connection, k: int) -> None:
    """Queries mixing rare lexemes with common ones: the top k (ids, scores, order) is the
    reference's, whether the chunks holding a rare lexeme decide it (only they are scored, and in
    full only those whose rare lexemes' score plus the common lexemes' bounds reaches the k-th
    best rare lexemes' score) or there are too few of them and every posting is scored."""
    rng = random.Random(11)
    tenants.create_tenant(conn, "bmk")
    with tenant_scope(conn, "bmk"):
        add_chunks(conn, [mixed_text(rng, i) for i in range(600)])
        for query in ["ledger w0 w1", "vault w0", "token rotation w0 w1 w2 w3", "w0 w1", "ledger vault token w5"]:
            got = conn.execute("select node_id, score from tortus.bm25_search(%s, %s)", [query, k]).fetchall()
            expected = reference_top(conn, query, k)
            assert [g[0] for g in got] == [e[0] for e in expected], query
            assert [g[1] for g in got] == pytest.approx([e[1] for e in expected], rel=1e-9), query


def test_bm25_within_ranks_only_the_given_chunks_with_corpus_statistics(conn: psycopg.Connection) -> None:
    rng = random.Random(11)
    tenants.create_tenant(conn, "bw")
    with tenant_scope(conn, "bw"):
        ids = add_chunks(conn, [random_text(rng) for _ in range(200)])
        for q in QUERIES:
            within = rng.sample(ids, 60)
            expected = {n: s for n, s in reference_bm25(conn, q).items() if n in within}
            rows = conn.execute("select node_id, score, rank from tortus.bm25_search(%s, 5, within => %s)",
                                [q, within]).fetchall()
            best = sorted(expected, key=lambda n: (-expected[n], n))[:5]
            assert [r[0] for r in rows] == best, q
            assert [r[2] for r in rows] == list(range(1, len(best) + 1))
            for node_id, score, _ in rows:
                assert score == pytest.approx(expected[node_id], abs=1e-9, rel=1e-9)


def test_exact_terms_rank_their_chunk_first(conn: psycopg.Connection) -> None:
    tenants.create_tenant(conn, "ex")
    with tenant_scope(conn, "ex"):
        ids = add_chunks(conn, [
            "Clause 7.3.2: signing keys are rotated every 90 days.",
            "Clause 7.3.3 covers TLS certificates; see also 7.2.",
            "Error E-1042 means the upstream TLS handshake failed.",
            "Error E-1024 means the request timed out.",
            "Release 4.2 of the gateway adds retries; release 4.1 did not.",
            "The PCI scope includes the card vault.",
        ] + [f"filler text about topic {i} and clause numbering" for i in range(30)])
        for query, expected in [("7.3.2", ids[0]), ("E-1042", ids[2]), ("4.2", ids[4]), ("PCI", ids[5])]:
            top = conn.execute("select node_id from tortus.bm25_search(%s, 1)", [query]).fetchone()
            assert top == (expected,), query


@pytest.fixture
def vectors(conn: psycopg.Connection) -> np.ndarray:
    rng = np.random.default_rng(3)
    x = rng.normal(size=(3000, 32)).astype(np.float32)
    tenants.create_tenant(conn, "vec")
    tenants.create_tenant(conn, "tiny")
    conn.execute("select tortus.ensure_vector_index(32)")
    with tenant_scope(conn, "vec"):
        conn.execute(
            "insert into tortus.node (tenant_id, kind, key, label, embedding, embedding_model) "
            "select 'vec', 'chunk', 'v' || i, 'v', v::vector, 'test:32' "
            "from unnest(%s::text[]) with ordinality as t(v, i)",
            [[str(list(map(float, row))) for row in x]],
        )
    with tenant_scope(conn, "tiny"):
        conn.execute(
            "insert into tortus.node (tenant_id, kind, key, label, embedding, embedding_model) "
            "select 'tiny', 'chunk', 't' || i, 't', v::vector, 'test:32' "
            "from unnest(%s::text[]) with ordinality as t(v, i)",
            [[str(list(map(float, row))) for row in x[:20] + 0.01]],
        )
    conn.execute("analyze tortus.node")
    return x


def test_hnsw_agrees_with_exact_search(conn: psycopg.Connection, vectors: np.ndarray) -> None:
    rng = np.random.default_rng(4)
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    recalls = []
    with tenant_scope(conn, "vec"):
        ids = dict(conn.execute("select key, node_id from tortus.node").fetchall())
        plan = "\n".join(r[0] for r in conn.execute(
            "explain select * from tortus.node n where n.tenant_id = 'vec' and vector_dims(embedding) = 32 "
            "order by embedding::vector(32) <=> %s::vector(32) limit 10", [str([0.0] * 31 + [1.0])]))
        for _ in range(30):
            q = rng.normal(size=32).astype(np.float32)
            exact = np.argsort(-(unit @ (q / np.linalg.norm(q))))[:10]
            want = {ids[f"v{i + 1}"] for i in exact}
            got = {r[0] for r in conn.execute("select node_id from tortus.vector_search(%s, 10)", [q])}
            recalls.append(len(want & got) / 10)
    assert np.mean(recalls) >= 0.95
    used = re.search(r"Index Scan using (\S+)", plan)
    assert used is not None, plan
    ancestors = conn.execute("select relid::text from pg_partition_ancestors(%s::regclass)",
                             [f"tortus_tenant.{used[1]}"]).fetchall()
    assert ("tortus.node_embedding_32_hnsw",) in ancestors  # the tenant's own partition of the index


def test_small_tenant_among_large_is_not_starved(conn: psycopg.Connection, vectors: np.ndarray) -> None:
    q = np.random.default_rng(5).normal(size=32).astype(np.float32)
    with tenant_scope(conn, "tiny"):
        rows = conn.execute("select node_id, rank from tortus.vector_search(%s, 10)", [q]).fetchall()
    assert len(rows) == 10 and [r[1] for r in rows] == list(range(1, 11))


def test_search_settings_do_not_leak(conn: psycopg.Connection, vectors: np.ndarray) -> None:
    before = conn.execute("select current_setting('hnsw.ef_search'), current_setting('hnsw.iterative_scan')").fetchone()
    with tenant_scope(conn, "vec"):
        conn.execute("select * from tortus.vector_search(%s, 5, ef_search => 300)", [vectors[0]]).fetchall()
        after = conn.execute(
            "select current_setting('hnsw.ef_search'), current_setting('hnsw.iterative_scan')"
        ).fetchone()
    assert after == before


@settings(max_examples=30, deadline=None)
@given(st.lists(st.sampled_from(VOCAB), min_size=1, max_size=4), st.integers(1, 40))
def test_bm25_hits_bounded_by_k_and_sorted(session_conn: psycopg.Connection, words: list[str], k: int) -> None:
    with session_conn.transaction(force_rollback=True):
        tenants.create_tenant(session_conn, "prop")
        with tenant_scope(session_conn, "prop"):
            add_chunks(session_conn, [random_text(random.Random(i)) for i in range(60)])
            rows = session_conn.execute(
                "select score, rank from tortus.bm25_search(%s, %s)", [" ".join(words), k]
            ).fetchall()
    assert len(rows) <= k
    assert all(a[0] >= b[0] for a, b in zip(rows, rows[1:], strict=False))
    assert [r[1] for r in rows] == list(range(1, len(rows) + 1))


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.tuples(st.one_of(st.none(), st.integers(1, 500)), st.floats(0, 5, allow_subnormal=False)),
        min_size=1,
        max_size=6,
    ),
    st.randoms(),
    st.integers(1, 100),
)
def test_rrf_does_not_depend_on_list_order(
    session_conn: psycopg.Connection, legs: list[tuple[int | None, float]], rnd: random.Random, rrf_k: int
) -> None:
    shuffled = legs[:]
    rnd.shuffle(shuffled)
    a = session_conn.execute(
        "select tortus.rrf(%s::int[], %s::float8[], %s)", [[r for r, _ in legs], [w for _, w in legs], rrf_k]
    ).fetchone()
    b = session_conn.execute(
        "select tortus.rrf(%s::int[], %s::float8[], %s)", [[r for r, _ in shuffled], [w for _, w in shuffled], rrf_k]
    ).fetchone()
    assert a is not None and b is not None
    assert a[0] == pytest.approx(b[0], rel=1e-12)
    assert a[0] == pytest.approx(sum(w / (rrf_k + r) for r, w in legs if r is not None), rel=1e-12)


def test_hybrid_reports_both_ranks_and_fuses_them(conn: psycopg.Connection, vectors: np.ndarray) -> None:
    with tenant_scope(conn, "vec"):
        conn.execute(
            "update tortus.node set text = 'ledger vault ' || key, "
            "tsv = to_tsvector('english', 'ledger vault ' || key) where key in ('v1', 'v2', 'v3')"
        )
        rows = conn.execute(
            "select node_id, score, bm25_rank, vector_rank, rank, heading_match "
            "from tortus.hybrid_search('ledger', %s, 10, 2.0, 1.0, 60)",
            [vectors[1]],
        ).fetchall()
    assert len(rows) == 10 and [r[4] for r in rows] == list(range(1, 11))
    for _, score, b, v, _, pinned in rows:
        assert not pinned  # no identifier in the query
        assert score == pytest.approx((2.0 / (60 + b) if b else 0) + (1.0 / (60 + v) if v else 0))
    assert rows[0][2] is not None and rows[0][3] is not None  # v2 is first in both legs


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What does clause 7.3.2 say?", ["7.3.2"]),
        ("error E-1042 after upgrading to 4.2", ["-1042", "4.2"]),
        ("born in 1987 in Paris", []),
        ("played from 1945-1949 and in the 2003-04 season", []),
        ("what did INC-2025-014 break?", ["-014", "-2025"]),
        ("p53 regulates IL-6 in H1N1", []),
        ("", []),
    ],
)
def test_identifier_lexemes(session_conn: psycopg.Connection, query: str, expected: list[str]) -> None:
    row = session_conn.execute("select tortus.identifier_lexemes(%s)", [query]).fetchone()
    assert row is not None and sorted(row[0]) == expected
