"""Yes/no questions of membership: reading the two options and the kind they would both be, and
the verdict from the sentences about each (fixtures written for the mechanism)."""

from __future__ import annotations

import psycopg
import pytest

from tortus_pg.query.both import Membership, judge, membership_of
from tortus_pg.query.read import Sentence
from tortus_pg.query.same import Verdict
from tortus_pg.query.terms import lexemes


@pytest.mark.parametrize(("question", "expected"), [
    ("Are Quarrel and Tessellate both card games?", Membership(("Quarrel", "Tessellate"), "card games")),
    ("Were Ada Quill and Bram Stoke both Ostrian chemists?",
     Membership(("Ada Quill", "Bram Stoke"), "Ostrian chemists")),
    ("Are both journals, the Harbour Review and Salt Letters, Brevanian publications?",
     Membership(("Harbour Review", "Salt Letters"), "Brevanian publications")),
    ("Are The Long Tide and Red Dust both silent films ?", Membership(("Long Tide", "Red Dust"), "silent films")),
])
def test_a_membership_question_names_its_options_and_the_kind(question: str, expected: Membership) -> None:
    assert membership_of(question) == expected


@pytest.mark.parametrize("question", [
    "Are Olm and Tarn both located in the same country?",  # a shared origin: `query.same`
    "Are Ada Quill and Bram Stoke members of the same band?",
    "Are both Quarrel and Tessellate card games?",  # where the second option ends is not written
    "Who was born first, Ada Quill or Bram Stoke?",
    "Is Quarrel a card game?",  # one option
    "Do Quarrel and Tessellate both use dice?",  # not a form of "to be"
])
def test_other_questions_ask_no_membership(question: str) -> None:
    assert membership_of(question) is None


def _judged(conn: psycopg.Connection, question: str, items: list[tuple[str, str]],
            kind: frozenset[str] | None = None) -> Verdict | None:
    """The verdict on `question` over evidence items (label, sentence), the kind's lexemes as
    PostgreSQL reads them unless `kind` is given."""
    asked = membership_of(question)
    assert asked is not None
    texts = [t for _, t in items]
    found = lexemes(conn, [*texts, asked.kind])
    sentences = [Sentence(i, 0, len(t), t) for i, t in enumerate(texts)]
    return judge(asked, frozenset(found[-1]) if kind is None else kind, sentences, [label for label, _ in items],
                 [set(f) for f in found[:-1]])


def test_both_are_of_the_kind_when_a_sentence_about_each_states_it(conn: psycopg.Connection) -> None:
    verdict = _judged(conn, "Are Quarrel and Tessellate both card games?",
                      [("Quarrel", "Quarrel was published in 1987."),
                       ("Quarrel", "Quarrel is a trick-taking card game for four players."),
                       ("Tessellate", "Tessellate is a card game of tiles and suits from Ostria.")])
    # "games" reads as the lexeme of "game": each option's sentence stating it is quoted.
    assert verdict is not None and verdict.same and verdict.sentences == (1, 2)


def test_one_option_not_of_the_kind_answers_no(conn: psycopg.Connection) -> None:
    verdict = _judged(conn, "Were Ada Quill and Bram Stoke both Ostrian chemists?",
                      [("Ada Quill", "Ada Quill (1901–1990) was an Ostrian chemist."),
                       ("Bram Stoke", "Bram Stoke (1920–1960) was an Ostrian poet and critic.")])
    assert verdict is not None and not verdict.same and verdict.sentences == (0, 1)


def test_no_verdict_when_an_option_has_no_evidence_or_the_kind_no_word(conn: psycopg.Connection) -> None:
    items = [("Quarrel", "Quarrel is a trick-taking card game for four players."),
             ("Harbour Review", "The Harbour Review is a quarterly journal.")]
    assert _judged(conn, "Are Quarrel and Tessellate both card games?", items) is None
    items[1] = ("Tessellate", "Tessellate is a card game of tiles and suits.")
    assert _judged(conn, "Are Quarrel and Tessellate both card games?", items) is not None
    assert _judged(conn, "Are Quarrel and Tessellate both card games?", items, frozenset()) is None
