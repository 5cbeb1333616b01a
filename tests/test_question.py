"""The question analysed once, on the demo corpus: what its text says, the concepts it names and
its weighted terms, under the policy and the time budget."""

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psycopg
import pytest

from tortus_pg.db import tenant_scope
from tortus_pg.policy import TraversalPolicy
from tortus_pg.query.clock import Clock
from tortus_pg.query.question import Question, analyse, labels
from tortus_pg.relations import Target

VECTOR = np.zeros(0, dtype=np.float32)  # no stage here reads the embedding
OWNER = "Which team owns Key Vault?"


@pytest.fixture
def db(demo: tuple[Path, dict[str, str]]) -> Iterator[psycopg.Connection]:
    with psycopg.connect(demo[1]["TORTUS_DATABASE_URL"]) as conn, tenant_scope(conn, "default"):
        yield conn


def test_the_text_is_read_once_into_answer_type_words_and_target() -> None:
    q = Question("When did ADR-011 move Postgres Cluster A?", VECTOR, (), (), None)
    assert q.answer_type is not None and q.answer_type.name == "a time"
    assert q.asked == {"when", "did", "adr", "011", "move", "postgres", "cluster", "a"}
    assert q.target is None
    assert Question(OWNER, VECTOR, (), (), None).target == Target("group", "team")
    assert q.comparison is None
    compared = Question("Which film came out first, Red Dust or Blue Hour?", VECTOR, (), (), None).comparison
    assert compared is not None and compared.options == ("Red Dust", "Blue Hour")


def test_the_defined_concepts_it_names_are_the_names_its_answer_must_mention(db: psycopg.Connection) -> None:
    clock = Clock(db, 5_000)
    q = analyse(db, OWNER, VECTOR, clock, TraversalPolicy(), "english")
    clock.close()
    assert q.named and set(q.named) <= set(q.concepts)
    assert "Key Vault" in labels(db, q.named)
    assert q.terms is not None and set(q.terms.names) == set(labels(db, q.named))


def test_without_personalization_it_names_nothing_the_answer_must_mention(db: psycopg.Connection) -> None:
    clock = Clock(db, 5_000)
    q = analyse(db, OWNER, VECTOR, clock, TraversalPolicy(no_personalization=True), "english")
    clock.close()
    assert q.concepts and q.named == ()
    assert q.terms is not None and q.terms.names == {} and q.terms.weights


def test_with_no_time_left_it_has_no_concepts_nor_terms(db: psycopg.Connection) -> None:
    clock = Clock(db, 0)
    q = analyse(db, OWNER, VECTOR, clock, TraversalPolicy(), "english")
    assert (q.concepts, q.named, q.terms) == ((), (), None)
    assert clock.degraded == ["link", "terms"]
    assert q.target == Target("group", "team")  # read from the text, which needs no time
