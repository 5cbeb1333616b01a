"""BM25 statistics follow tortus.node in the writing transaction: checked against a count in Python.

Nodes are written as the application role under row-level security, so the triggers run
the way ingest runs them. The reference reads only the lexemes and positions PostgreSQL put
in each tsvector and counts postings, lengths, document frequencies and totals itself.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import psycopg
import pytest

from tortus_pg import migrate, tenants
from tortus_pg.db import connect, tenant_scope

# A small vocabulary drawn with skewed weights, so document frequencies range from a handful
# to most documents. Stop words yield no lexeme; inflections share one ('run', 'runs', 'running').
VOCAB = [
    "ledger", "vault", "token", "retry", "budget", "payout", "scheduler", "checkout", "gateway",
    "incident", "runbook", "postgres", "cluster", "replica", "failover", "latency", "error",
    "timeout", "key", "rotation", "policy", "service", "run", "runs", "running", "the", "and",
    "of", "to", "E-1042", "7.3.2", "v4.2", "INC-2025-014", "p95", "nvme",
]
WEIGHTS = [1 / (i + 1) ** 1.2 for i in range(len(VOCAB))]

INSERT_MANY = """
insert into tortus.node (tenant_id, kind, key, label, text, source_id, tsv)
select %(tenant)s, u.kind, u.key, u.key, u.text, %(source)s,
       case u.tsv when 'plain' then to_tsvector('english', u.text)
                  when 'stripped' then strip(to_tsvector('english', u.text)) end
from unnest(%(kind)s::text[], %(key)s::text[], %(text)s::text[], %(tsv)s::text[]) as u (kind, key, text, tsv)
"""
INSERT_ONE = """
insert into tortus.node (tenant_id, kind, key, label, text, tsv)
values (%(tenant)s, 'chunk', %(key)s, %(key)s, %(text)s, to_tsvector('english', %(text)s))
"""
INSERT_SOURCE = """
insert into tortus.source (tenant_id, uri, kind, sha256, text)
values (%s, %s, 'text', repeat('0', 64), 'corpus') returning source_id
"""


@dataclass(frozen=True)
class Stats:
    postings: dict[tuple[str, int], tuple[int, int]]  # (lexeme, node_id) -> (tf, its document's length)
    docs: dict[int, int]  # node_id -> doc_len
    terms: dict[str, int]  # lexeme -> df
    corpus: tuple[int, int]  # (n_docs, total_len)


def text(rng: random.Random) -> str:
    return " ".join(rng.choices(VOCAB, WEIGHTS, k=rng.randint(3, 60)))


def expected(conn: psycopg.Connection, tenant: str) -> Stats:
    """The statistics counted in Python from the lexemes and positions of each chunk's tsvector."""
    docs = {
        node_id: 0
        for (node_id,) in conn.execute(
            "select node_id from tortus.node where tenant_id = %s and kind = 'chunk' and tsv is not null",
            [tenant],
        )
    }
    postings: dict[tuple[str, int], int] = {}
    for node_id, lexeme, positions in conn.execute(
        "select n.node_id, l.lexeme, l.positions from tortus.node n, unnest(n.tsv) as l "
        "where n.tenant_id = %s and n.kind = 'chunk'",
        [tenant],
    ):
        tf = len(positions) if positions else 1
        postings[lexeme, node_id] = tf
        docs[node_id] += tf
    terms = Counter(lexeme for lexeme, _ in postings)
    with_len = {(lexeme, n): (tf, docs[n]) for (lexeme, n), tf in postings.items()}
    return Stats(with_len, docs, dict(terms), (len(docs), sum(docs.values())))


def stored(conn: psycopg.Connection, tenant: str) -> Stats:
    """The statistics as the triggers left them."""
    q = "select {} from tortus.{} where tenant_id = %s"
    postings = {(lx, n): (tf, dl)
                for lx, n, tf, dl in conn.execute(q.format("lexeme, node_id, tf, doc_len", "bm25_posting"), [tenant])}
    docs = dict(conn.execute(q.format("node_id, doc_len", "bm25_doc"), [tenant]).fetchall())
    terms = dict(conn.execute(q.format("lexeme, df", "bm25_term"), [tenant]).fetchall())
    corpus = conn.execute(q.format("n_docs, total_len", "bm25_corpus"), [tenant]).fetchone()
    return Stats(postings, docs, terms, tuple(corpus) if corpus else (0, 0))  # type: ignore[arg-type]


def assert_consistent(conn: psycopg.Connection, tenant: str) -> Stats:
    want, got = expected(conn, tenant), stored(conn, tenant)
    assert got.corpus == want.corpus
    assert got.docs == want.docs
    assert got.terms == want.terms
    assert got.postings == want.postings
    return got


def write_corpus(conn: psycopg.Connection, tenant: str, rng: random.Random, n: int) -> None:
    """n chunks in one multi-row insert and a few more one row at a time, plus nodes that are
    not BM25 documents: entities with a tsvector, and chunks without one."""
    source = conn.execute(INSERT_SOURCE, [tenant, f"{tenant}.txt"]).fetchone()
    assert source is not None
    kinds = ["chunk"] * n + ["entity"] * 5 + ["chunk"] * 3
    tsvs = ["stripped" if i % 25 == 0 else "plain" for i in range(n)] + ["plain"] * 5 + [None] * 3
    texts = [text(rng) for _ in kinds]
    texts[1] = "the and of to"  # a document of length 0
    conn.execute(
        INSERT_MANY,
        {"tenant": tenant, "source": source[0], "kind": kinds, "key": [f"n{i}" for i in range(len(kinds))],
         "text": texts, "tsv": tsvs},
    )
    with conn.cursor() as cur:
        cur.executemany(INSERT_ONE, [{"tenant": tenant, "key": f"one{i}", "text": text(rng)} for i in range(5)])


def node_ids(conn: psycopg.Connection, tenant: str, kind: str = "chunk") -> list[int]:
    rows = conn.execute(
        "select node_id from tortus.node where tenant_id = %s and kind = %s and tsv is not null order by node_id",
        [tenant, kind],
    )
    return [r[0] for r in rows]


@pytest.fixture
def corpus_x(conn: psycopg.Connection) -> psycopg.Connection:
    """Tenants x and y (empty); x holds a few hundred chunks. Rolled back afterwards."""
    tenants.create_tenant(conn, "x")
    tenants.create_tenant(conn, "y")
    with tenant_scope(conn, "x"):
        write_corpus(conn, "x", random.Random(20261130), 300)
    return conn


def test_statistics_match_a_python_count_after_inserts(corpus_x: psycopg.Connection) -> None:
    stats = assert_consistent(corpus_x, "x")
    assert stats.corpus[0] == 300 + 5 + 0  # chunks with a tsvector; not entities, not NULL tsv
    assert {"e", "-1042", "7.3.2", "v4.2", "run", "p95"} <= stats.terms.keys()
    assert "the" not in stats.terms
    assert max(stats.terms.values()) > 5 * min(stats.terms.values())
    assert 0 in stats.docs.values()
    assert max(tf for tf, _ in stats.postings.values()) > 1


def test_statistics_follow_updates_deletes_and_kind_changes(corpus_x: psycopg.Connection) -> None:
    conn, rng = corpus_x, random.Random(7)
    with tenant_scope(conn, "x"):
        chunks = node_ids(conn, "x")
        rng.shuffle(chunks)
        updated, deleted, demoted, emptied = chunks[:50], chunks[50:100], chunks[100], chunks[101]
        conn.execute(INSERT_ONE, {"tenant": "x", "key": "rare", "text": "xylophone ledger"})
        updated.append(node_ids(conn, "x")[-1])  # the only document holding 'xylophon'
        conn.execute(  # an upsert: one0 goes through the update trigger, fresh through the insert one
            "insert into tortus.node (tenant_id, kind, key, label, text, tsv) "
            "select 'x', 'chunk', k, k, t, to_tsvector('english', t) "
            "from (values ('one0', 'ledger ledger'), ('fresh', 'vault')) as v (k, t) "
            "on conflict (tenant_id, kind, key) do update set text = excluded.text, tsv = excluded.tsv"
        )
        conn.execute(
            "update tortus.node n set text = u.text, tsv = to_tsvector('english', u.text) "
            "from unnest(%s::bigint[], %s::text[]) as u (node_id, text) where n.node_id = u.node_id",
            [updated, [text(rng) for _ in updated]],
        )
        conn.execute("update tortus.node set label = 'renamed', tsv = tsv where node_id = any(%s)", [chunks[102:120]])
        conn.execute("delete from tortus.node where node_id = any(%s)", [deleted])
        conn.execute("update tortus.node set kind = 'concept' where node_id = %s", [demoted])
        conn.execute("update tortus.node set tsv = null where node_id = %s", [emptied])
        promoted = node_ids(conn, "x", "entity")[0]
        conn.execute("update tortus.node set kind = 'chunk', key = 'promoted' where node_id = %s", [promoted])
    stats = assert_consistent(conn, "x")
    assert stats.corpus[0] == 305 + 2 - 50 - 1 - 1 + 1
    assert "xylophon" not in stats.terms
    assert demoted not in stats.docs and emptied not in stats.docs and promoted in stats.docs


def test_rebuild_leaves_consistent_statistics_unchanged(corpus_x: psycopg.Connection) -> None:
    conn = corpus_x
    with tenant_scope(conn, "x"):
        conn.execute("delete from tortus.node where node_id = any(%s)", [node_ids(conn, "x")[::7]])
    before = assert_consistent(conn, "x")
    with tenant_scope(conn, "x"):
        assert conn.execute("select tortus.bm25_rebuild('x')").fetchone() == (before.corpus[0],)
    assert stored(conn, "x") == before


def test_rebuild_repairs_drifted_statistics(corpus_x: psycopg.Connection) -> None:
    conn = corpus_x
    before = stored(conn, "x")
    conn.execute("update tortus.bm25_term set df = df + 3 where tenant_id = 'x' and lexeme = 'ledger'")
    conn.execute("delete from tortus.bm25_posting where tenant_id = 'x' and lexeme = 'vault'")
    conn.execute("update tortus.bm25_corpus set n_docs = 1 where tenant_id = 'x'")
    with tenant_scope(conn, "x"):
        conn.execute("select tortus.bm25_rebuild('x')")
    assert stored(conn, "x") == before


def test_tenants_keep_separate_statistics(corpus_x: psycopg.Connection) -> None:
    conn = corpus_x
    before = stored(conn, "x")
    with tenant_scope(conn, "y"):
        with conn.cursor() as cur:  # the same keys and words as in x
            rows = [{"tenant": "y", "key": f"one{i}", "text": "ledger vault E-1042"} for i in range(4)]
            cur.executemany(INSERT_ONE, rows)
        conn.execute("delete from tortus.node where key = 'one0'")
        assert conn.execute("select count(*) from tortus.bm25_term").fetchone() == (4,)
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="no tenant x"), conn.transaction():
            conn.execute("select tortus.bm25_rebuild('x')")
    assert stored(conn, "x") == before
    assert stored(conn, "y").corpus == (3, 12)
    assert stored(conn, "y").terms == {"ledger": 3, "vault": 3, "e": 3, "-1042": 3}
    assert_consistent(conn, "y")


def test_removing_a_source_or_a_tenant_removes_its_statistics(corpus_x: psycopg.Connection) -> None:
    conn = corpus_x
    with tenant_scope(conn, "y"):
        write_corpus(conn, "y", random.Random(3), 20)
    y_before = stored(conn, "y")
    with tenant_scope(conn, "x"):
        conn.execute("delete from tortus.source")
    assert stored(conn, "x").corpus == (5, sum(stored(conn, "x").docs.values()))
    assert_consistent(conn, "x")
    tenants.delete_tenant(conn, "x")
    assert stored(conn, "x") == Stats({}, {}, {}, (0, 0))
    assert stored(conn, "y") == y_before


@pytest.mark.own_database
def test_concurrent_ingest_into_one_tenant_queues_instead_of_deadlocking(fresh_db: Callable[..., str]) -> None:
    """Two transactions write the same new words in opposite orders. Touched term by term, they
    would deadlock; the corpus row, locked first, makes the second wait for the first."""
    url = fresh_db()
    migrate.upgrade(url)
    with connect(url, autocommit=True) as admin:
        tenants.create_tenant(admin, "x")
        with connect(url) as a, connect(url) as b:
            errors: list[BaseException] = []

            def second() -> None:
                try:
                    with tenant_scope(b, "x"):
                        b.execute(INSERT_ONE, {"tenant": "x", "key": "b1", "text": "vault beta"})
                        b.execute(INSERT_ONE, {"tenant": "x", "key": "b2", "text": "ledger alpha"})
                except BaseException as exc:  # noqa: BLE001 - reported by the main thread
                    errors.append(exc)

            with tenant_scope(a, "x"):
                a.execute(INSERT_ONE, {"tenant": "x", "key": "a1", "text": "ledger alpha"})
                worker = threading.Thread(target=second)
                worker.start()
                deadline = time.monotonic() + 10
                while admin.execute(
                    "select wait_event_type from pg_stat_activity where pid = %s", [b.info.backend_pid]
                ).fetchone() != ("Lock",):
                    assert time.monotonic() < deadline, "the second writer never waited"
                    time.sleep(0.02)
                a.execute(INSERT_ONE, {"tenant": "x", "key": "a2", "text": "vault beta"})
            worker.join(timeout=30)
            assert not worker.is_alive() and errors == []
        before = assert_consistent(admin, "x")
        assert before.terms == {"ledger": 2, "alpha": 2, "vault": 2, "beta": 2}
        assert before.corpus == (4, 8)
        admin.execute("select tortus.bm25_rebuild('x')")
        assert stored(admin, "x") == before
