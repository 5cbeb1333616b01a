"""Yes/no questions of sameness: reading the two options and what they would share, the origin
each sentence gives, and the verdict (fixtures written for the mechanism)."""

from __future__ import annotations

import pytest

from tortus_pg.query.read import Reading, Sentence
from tortus_pg.query.same import Sameness, judge, lead_with_verdict, origin, sameness_of


@pytest.mark.parametrize(("question", "expected"), [
    ("Are Olm and Tarn located in the same country?", Sameness(("Olm", "Tarn"), "country", None)),
    ("Are both villages, Veldhoek and Marrow, Upper Dale, located in the same country?",
     Sameness(("Veldhoek", "Marrow, Upper Dale"), "country", None)),
    ("Were Ada Quill and Bram Stoke of the same nationality?",
     Sameness(("Ada Quill", "Bram Stoke"), "nationality", None)),
    ("Do both films, Red Dust (1990 Film) and Blue Hour, have the directors who are from the same country?",
     Sameness(("Red Dust (1990 Film)", "Blue Hour"), "country", "director")),
    ("Are director of film Red Dust and director of film Salt and Iron both from the same country?",
     Sameness(("Red Dust", "Salt and Iron"), "country", "director")),
])
def test_a_sameness_question_names_its_options_what_they_share_and_a_role(question: str, expected: Sameness) -> None:
    assert sameness_of(question) == expected


@pytest.mark.parametrize("question", [
    "Who was born first, Ada Quill or Bram Stoke?",  # a comparison, not a yes/no question
    "Are Ada Quill and Bram Stoke members of the same band?",  # a band is not an origin
    "Are Little Harbour Airport and Cape Ness Airport both in the same state?",  # a shared country says no state
    "Is Key Vault owned by the Platform Team?",
    "Which country are Olm and Tarn in?",
])
def test_other_questions_ask_no_sameness(question: str) -> None:
    assert sameness_of(question) is None


@pytest.mark.parametrize(("text", "expected"), [
    ("Red Dust is a 1990 Brevanian crime film directed by Ona Vale.", {"brevanian"}),
    ("Ona Vale (born 1931) was a Brevanian-born film director.", {"brevanian"}),
    ("Ida Marsh is a retired South Ostrian sprinter.", {"south ostrian"}),
    ("Veldhoek is a village in Kamp Rural District, Upper Dale Province, Ostria.",
     {"kamp rural district", "upper dale province", "ostria"}),
    ("The Tarn is a river in south west Ostria, that forms a border.", {"ostria"}),
    ("Marrow was noted at the census.", set()),
])
def test_the_origin_is_a_descriptions_proper_adjective_else_the_places_named(text: str, expected: set[str]) -> None:
    assert origin(text) == expected


def _sentences(items: list[tuple[str, str]]) -> tuple[list[Sentence], list[str]]:
    return [Sentence(i, 0, len(t), t) for i, (_, t) in enumerate(items)], [label for label, _ in items]


def test_options_sharing_a_place_are_the_same_and_others_are_not() -> None:
    question = sameness_of("Are Veldhoek and Marrow located in the same country?")
    assert question is not None
    places = [("Veldhoek", "Veldhoek is a village in Kamp District, Upper Dale Province, Ostria."),
              ("Marrow", "Marrow is a hamlet in the county of Lunde, Ostria, near the coast.")]
    verdict = judge(question, *_sentences(places))
    assert verdict is not None and verdict.same and verdict.sentences == (0, 1)
    elsewhere = [places[0], ("Marrow", "Marrow is a hamlet in Lunde County, Brevania.")]
    verdict = judge(question, *_sentences(elsewhere))
    assert verdict is not None and not verdict.same


def test_a_role_judges_the_people_the_options_name_in_it() -> None:
    question = sameness_of("Do both films Red Dust and Blue Hour have the directors from the same country?")
    assert question is not None
    items = [("Red Dust", "Red Dust is a 1990 Ostrian film directed by Ona Vale."),
             ("Blue Hour", "Blue Hour is a 1950 Ostrian film directed by Ida Marsh."),
             ("Ona Vale", "Ona Vale (born 1931) is a Brevanian director."),
             ("Ida Marsh", "Ida Marsh (born 1944) is an Ostrian director.")]
    # By the films' own origins they would be the same; by their directors' they are not.
    verdict = judge(question, *_sentences(items))
    assert verdict is not None and not verdict.same and verdict.sentences == (2, 3)


def test_no_verdict_without_an_origin_for_both() -> None:
    question = sameness_of("Are Veldhoek and Marrow located in the same country?")
    assert question is not None
    items = [("Veldhoek", "Veldhoek is a village in Upper Dale Province, Ostria."),
             ("Marrow", "Marrow was noted at the census.")]
    assert judge(question, *_sentences(items)) is None


def test_the_origins_lead_the_reading_and_answer_yes_or_no() -> None:
    question = sameness_of("Were Ada Quill and Bram Stoke of the same nationality?")
    assert question is not None
    sentences, labels = _sentences([("Ada Quill", "Ada Quill won a prize."),
                                    ("Ada Quill", "Ada Quill (1901–1990) was an Ostrian chemist."),
                                    ("Bram Stoke", "Bram Stoke (1920–1960) was an Ostrian poet.")])
    reading = Reading([0], 0, None, frozenset())
    led = lead_with_verdict(reading, judge(question, sentences, labels))
    assert led.chosen == [1, 2, 0] and led.answer == 1 and led.short == "yes" and led.verdict == "Yes"
    unread = lead_with_verdict(reading, judge(question, sentences[:2], labels[:2]))
    assert unread == reading and unread.verdict is None
