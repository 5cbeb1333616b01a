"""The question analysed once, on the demo corpus and on one written for naming documented
things: what its text says, the concepts it names and its weighted terms, under the policy and the
time budget."""

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psycopg
import pytest

from tortus_pg.db import tenant_scope
from tortus_pg.policy import TraversalPolicy
from tortus_pg.query.clock import Clock
from tortus_pg.query.question import Question, analyse, labels, name_runs
from tortus_pg.relations import Target

VECTOR = np.zeros(0, dtype=np.float32)  # no stage here reads the embedding
OWNER = "Which team owns Key Vault?"

# Documents titled with names that are not all capitalised, and one name inside another.
TEAMS = {
    "calendar.md": "# Calendar squad\n\n- Squad lead: Adaeze Okonkwo\n- Engineers: 5\n\n"
                   "## Current focus\n\nThe squad spent the quarter on renewal reliability.\n",
    "fleet.md": "# Fleet\n\nThe fleet has 3,400 vehicles across the United Kingdom.\n",
    "fleet-data.md": "# Fleet Data\n\nThe team is run by Bartosz Wierzbicki.\n",
}


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


def _named(conn: psycopg.Connection, text: str) -> Question:
    clock = Clock(conn, 5_000)
    q = analyse(conn, text, VECTOR, clock, TraversalPolicy(), "english")
    clock.close()
    return q


@pytest.mark.parametrize("corpus", [TEAMS], indirect=True)
def test_a_documented_thing_is_named_as_its_title_is_written(corpus: psycopg.Connection) -> None:
    # The extractor reads "Calendar" alone from the question; the graph has a document titled
    # "Calendar squad", and the chunk that defines it (the page's opening, with its lead).
    q = _named(corpus, "Who heads up the Calendar squad?")
    assert labels(corpus, q.named) == ["Calendar squad"]
    opening = corpus.execute("select node_id from tortus.node where kind = 'chunk' and text like %s",
                            ["%Squad lead%"]).fetchone()
    assert opening is not None and q.defining == (opening[0],)
    assert q.terms is not None and set(q.terms.names) == {"Calendar squad"}


@pytest.mark.parametrize("corpus", [TEAMS], indirect=True)
def test_of_names_one_inside_another_the_longest_is_named(corpus: psycopg.Connection) -> None:
    assert labels(corpus, _named(corpus, "Who runs the Fleet Data group?").named) == ["Fleet Data"]
    assert labels(corpus, _named(corpus, "How many vehicles does the Fleet have?").named) == ["Fleet"]


def test_only_runs_written_as_names_are_read() -> None:
    # Runs open where a name opens: at a capital or a digit (the question's first word, "Calendar"
    # and "2", not "TB" inside "2 TB" nor "Wolf" inside "Never Cry Wolf"); they are keyed as the
    # graph keys concepts (casefolded, without a closing question mark).
    runs = name_runs("Where is the Calendar squad's 2 TB backup?")
    assert {w.split()[0] for w in runs} == {"where", "calendar", "2"}
    assert runs["calendar squad"] == (3, 5) and runs["2 tb backup"] == (5, 8)
    assert "squad" not in runs and "tb" not in runs
    assert {w for w in name_runs("Did Never Cry Wolf or Big Hero 6 come out first?") if w.endswith("wolf")} == {
        "never cry wolf", "did never cry wolf"}
    # A comma ends a name: the state after the town.
    assert "west virginia" in name_runs("Which county is Johnnycake, West Virginia in?")
