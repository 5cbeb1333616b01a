"""community_summary on a corpus of two unrelated topics, in a real database."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tortus_pg import migrate, tenants
from tortus_pg.db import connect, tenant_scope
from tortus_pg.embed import HashEmbedder
from tortus_pg.eval import runner  # noqa: F401  (registers every strategy, as the CLI does)
from tortus_pg.eval.community import SUMMARY_CHARS, CommunitySummary, communities, first_sentence
from tortus_pg.eval.strategies import STRATEGIES, Hybrid, StrategyContext, StrategySkipped, build
from tortus_pg.ingest.corpus import Passage, ingest_passages

EMBEDDER = HashEmbedder(dim=384)
PREFIX = "topics/"
TENANT = "two-topics"
BAKING_ONLY = "baking-only"
GLUED = "glued"
EMPTY = "empty"
VOLCANO = [
    ("a1", "Mount Vellor", "Mount Vellor is the highest volcano on Korrath Island. Its magma feeds the Ashen Vent."),
    ("a2", "Ashen Vent", "The Ashen Vent on Korrath Island released lava during the eruption of Mount Vellor."),
    ("a3", "Korrath Observatory", "Geologists of the Korrath Observatory measure magma pressure under Mount Vellor."),
    ("a4", "Vellor eruption", "Lava from Mount Vellor reached the Ashen Vent and the Korrath Observatory."),
]
BAKING = [
    ("b1", "Brindlewick Bakery", "Brindlewick Bakery bakes sourdough bread with rye flour from Tamsin Mill."),
    ("b2", "Tamsin Mill", "Tamsin Mill grinds the rye flour that Brindlewick Bakery turns into sourdough bread."),
    ("b3", "Harvest fair", "The Brindlewick harvest fair judges sourdough bread from Brindlewick Bakery."),
    ("b4", "Rye loaves", "Apprentices at Brindlewick Bakery shape rye loaves with flour from Tamsin Mill."),
]
VOLCANO_QUESTION = "Which volcano on Korrath Island feeds the Ashen Vent with magma?"
BAKING_QUESTION = "Where does Brindlewick Bakery get the rye flour for its sourdough bread?"
# Mostly about the volcano, but "mill", "grinds" and "rye flour" pull baking passages up in hybrid search.
MIXED_QUESTION = "Which volcano on Korrath Island is near the mill that grinds rye flour?"


def _ingest(conn: psycopg.Connection, tenant: str, passages: list[tuple[str, str, str]]) -> None:
    with conn.transaction():
        tenants.create_tenant(conn, tenant)
    ingest_passages(conn, tenant, [Passage(*p) for p in passages], EMBEDDER, uri_prefix=PREFIX, subgraph="topics")


@pytest.fixture(scope="module")
def db(pg_server: Any) -> Iterator[psycopg.Connection]:
    """A database of the module's own: both topics in one tenant, baking alone in another, and both
    topics again with a sentence naming the same county appended to every passage."""
    name = "tortus_community"
    url = pg_server.create_database(name)
    migrate.upgrade(url)
    with connect(url) as conn:
        _ingest(conn, TENANT, VOLCANO + BAKING)
        _ingest(conn, BAKING_ONLY, BAKING)
        _ingest(conn, EMPTY, [])
        _ingest(conn, GLUED, [(i, t, f"{x} It lies in Ostmark County.") for i, t, x in VOLCANO + BAKING])
        yield conn
    pg_server.drop_database(name)


def passage_ids(conn: psycopg.Connection, node_ids: tuple[int, ...]) -> set[str]:
    rows = conn.execute(
        "select s.uri from tortus.node n join tortus.source s using (tenant_id, source_id) where n.node_id = any(%s)",
        [list(node_ids)],
    ).fetchall()
    return {uri.removeprefix(PREFIX) for (uri,) in rows}


def chunk_ids(conn: psycopg.Connection) -> list[int]:
    return [r[0] for r in conn.execute("select node_id from tortus.node where kind = 'chunk' order by node_id")]


@pytest.mark.parametrize("max_size", [40, 3, 1])
def test_communities_partition_the_chunks_within_the_size_cap(db: psycopg.Connection, max_size: int) -> None:
    with tenant_scope(db, TENANT):
        found = communities(db, max_size=max_size)
        everything = chunk_ids(db)
    members = [node_id for c in found for node_id in c.chunk_ids]
    assert sorted(members) == everything and len(everything) == len(VOLCANO + BAKING)
    assert max(len(c.chunk_ids) for c in found) <= max_size
    assert all(len(c.summary) <= SUMMARY_CHARS for c in found)


def test_two_unrelated_topics_become_two_named_communities(db: psycopg.Connection) -> None:
    with tenant_scope(db, TENANT):
        found = communities(db)
        topics = [passage_ids(db, c.chunk_ids) for c in found]
    assert sorted(topics, key=sorted) == [{p[0] for p in VOLCANO}, {p[0] for p in BAKING}]
    volcano = found[[t == {p[0] for p in VOLCANO} for t in topics].index(True)]
    # Mount Vellor is mentioned by all four volcano passages: the most frequent label comes first.
    assert volcano.summary.startswith("Mount Vellor;") and "Mount Vellor is the highest volcano" in volcano.summary
    assert "Brindlewick" not in volcano.summary


def test_a_concept_most_chunks_mention_is_a_hub_that_names_no_community(db: psycopg.Connection) -> None:
    with tenant_scope(db, GLUED):
        split = communities(db, min_hub_df=4)
        glued = communities(db, min_hub_df=8)
        topics = sorted((passage_ids(db, c.chunk_ids) for c in split), key=sorted)
    assert topics == [{p[0] for p in VOLCANO}, {p[0] for p in BAKING}]
    assert not any("Ostmark County" in c.summary.split(".")[0] for c in split)
    assert all("Ostmark County" in c.summary.split(".")[0] for c in glued)  # below the hub bar it names both


def test_communities_are_deterministic(db: psycopg.Connection) -> None:
    with tenant_scope(db, TENANT):
        for max_size in (40, 3):
            assert communities(db, max_size=max_size) == communities(db, max_size=max_size)


def test_question_selects_its_topic_community_first(db: psycopg.Connection) -> None:
    strategy = CommunitySummary(StrategyContext(PREFIX, EMBEDDER))
    with tenant_scope(db, TENANT):
        for question, topic in ((VOLCANO_QUESTION, VOLCANO), (BAKING_QUESTION, BAKING)):
            first, second = strategy.rank(db, question)
            assert passage_ids(db, first.chunk_ids) == {p[0] for p in topic}
            assert passage_ids(db, second.chunk_ids).isdisjoint(passage_ids(db, first.chunk_ids))


def test_chunks_of_the_selected_community_come_first_in_hybrid_order(db: psycopg.Connection) -> None:
    ctx = StrategyContext(PREFIX, EMBEDDER)
    volcano = {p[0] for p in VOLCANO}
    with tenant_scope(db, TENANT):
        hybrid = Hybrid(ctx).retrieve(db, MIXED_QUESTION, 8).ranked_ids
        assert hybrid[0] not in volcano  # hybrid alone puts a baking passage first
        result = CommunitySummary(ctx, top=1).retrieve(db, MIXED_QUESTION, 8)
        assert result.ranked_ids == [i for i in hybrid if i in volcano] + [i for i in hybrid if i not in volcano]
        assert result.seed_ids == hybrid and result.diagnostics == {"fan_out": 1.0}
        both = CommunitySummary(ctx).retrieve(db, MIXED_QUESTION, 8)  # two communities, both selected
        assert both.ranked_ids == hybrid and both.diagnostics == {"fan_out": 2.0}
        assert CommunitySummary(ctx, top=1).retrieve(db, MIXED_QUESTION, 3).ranked_ids == result.ranked_ids[:3]


def test_communities_are_cached_per_tenant(db: psycopg.Connection) -> None:
    strategy = CommunitySummary(StrategyContext(PREFIX, EMBEDDER))
    with tenant_scope(db, TENANT):
        both = strategy.rank(db, VOLCANO_QUESTION)
    with tenant_scope(db, BAKING_ONLY):
        baking = strategy.rank(db, VOLCANO_QUESTION)
        assert [passage_ids(db, c.chunk_ids) for c in baking] == [{p[0] for p in BAKING}]
    assert len(both) == 2 and set(strategy.indexes) == {TENANT, BAKING_ONLY}


def test_an_empty_tenant_has_no_communities_and_retrieves_nothing(db: psycopg.Connection) -> None:
    with tenant_scope(db, EMPTY):
        assert communities(db) == []
        result = CommunitySummary(StrategyContext(PREFIX, EMBEDDER)).retrieve(db, VOLCANO_QUESTION, 5)
    assert result.ranked_ids == [] and result.diagnostics == {"fan_out": 0.0}


def test_strategy_is_registered_and_skipped_without_an_embedder() -> None:
    assert STRATEGIES["community_summary"] is CommunitySummary
    with pytest.raises(StrategySkipped, match="needs an embedder"):
        CommunitySummary(StrategyContext(PREFIX))
    ready, skipped = build(["community_summary"], StrategyContext(PREFIX))
    assert ready == {} and skipped == {"community_summary": "community_summary needs an embedder"}


def test_first_sentence_drops_a_repeated_heading_and_is_bounded() -> None:
    assert first_sentence("Mount Vellor\n\nMount Vellor is a volcano. It erupts.") == "Mount Vellor is a volcano."
    assert first_sentence("Fujiwara\n\n, also known as Nagara, was a courtier.") == (
        "Fujiwara , also known as Nagara, was a courtier."
    )
    long = first_sentence("word " * 200)
    assert len(long) <= 302 and long.endswith(" …")
