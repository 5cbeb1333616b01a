"""Comparison questions: reading the two options and the comparative, and choosing by the value
the evidence gives each (fixtures written for the mechanism; lexemes are plain words)."""

from __future__ import annotations

import re

import pytest

from tortus_pg.query.compare import Comparison, Described, Order, comparison_of, lead_with_pick, pick
from tortus_pg.query.read import Page, Reading, Sentence


@pytest.mark.parametrize(("question", "expected"), [
    ("Who was born first, Ada Quill or Bram Stoke?",
     Comparison(("Ada Quill", "Bram Stoke"), Order.EARLIER, False, None)),
    ("Which film came out more recently, The Long Field or Harbour Lights?",
     Comparison(("The Long Field", "Harbour Lights"), Order.LATER, False, None)),
    ("Which film has the director who died first, Red Dust or Believe Me, Xantippe?",
     Comparison(("Red Dust", "Believe Me, Xantippe"), Order.EARLIER, True, "director")),
    ("Was Ada Quill or John R. Stoke born first?",
     Comparison(("Ada Quill", "John R. Stoke"), Order.EARLIER, False, None)),
    ("Which lake is larger, the Olm or the Tarn?", Comparison(("Olm", "Tarn"), Order.MORE, False, None)),
    ("Which team has fewer engineers: Atlas or Borealis?", Comparison(("Atlas", "Borealis"), Order.FEWER, False, None)),
    ("Does the Atlas squad or the Borealis squad have more engineers?",
     Comparison(("Atlas squad", "Borealis squad"), Order.MORE, False, None)),
    ("Which outage lasted longer, the May disk failure or the June cache stampede?",
     Comparison(("May disk failure", "June cache stampede"), Order.MORE, False, None, lasting=True)),
])
def test_a_comparison_names_its_options_and_comparative(question: str, expected: Comparison) -> None:
    assert comparison_of(question) == expected


@pytest.mark.parametrize("question", [
    "Who leads the team that owns the gateway?",
    "Is the gateway owned by Atlas or Borealis?",  # no comparative: a choice, not a comparison
    "Which ADR moved the cluster, and when?",
])
def test_other_questions_are_not_comparisons(question: str) -> None:
    assert comparison_of(question) is None


def words(text: str) -> set[str]:
    return {w.casefold() for w in re.findall(r"\w+", text)}


def page(items: list[tuple[str, list[str]]]) -> Page:
    """The page of `items` (heading, sentences), each sentence read in its heading's context."""
    sentences = [Sentence(i, 0, len(t), t) for i, (_, texts) in enumerate(items) for t in texts]
    labels = [label for label, _ in items]
    return Page(sentences, [words(s.text) for s in sentences], [words(labels[s.evidence]) for s in sentences], labels)


def choose(question: str, items: list[tuple[str, list[str]]]) -> tuple[str | None, list[str]]:
    """The option picked from `items` (heading, sentences) and the two sentences quoted."""
    comparison = comparison_of(question)
    assert comparison is not None
    read = page(items)
    weights = dict.fromkeys(words(question), 1.0)
    titles = {label.split(" > ")[0]: words(label.split(" > ")[0]) for label, _ in items}
    described = Described((words(comparison.options[0]), words(comparison.options[1])), titles)
    chosen = pick(comparison, read, weights, described)
    return (chosen.option, [read.sentences[j].text for j in chosen.sentences]) if chosen else (None, [])


def test_the_earlier_year_wins_when_first_is_asked_and_the_later_when_recent_is() -> None:
    items = [("The Long Field", ["The Long Field is a 1961 drama directed by Ona Vale."]),
             ("Harbour Lights", ["Harbour Lights is a 1987 musical film."])]
    assert choose("Which film was released first, The Long Field or Harbour Lights?", items)[0] == "The Long Field"
    option, quoted = choose("Which film came out more recently, The Long Field or Harbour Lights?", items)
    assert option == "Harbour Lights"
    assert quoted == ["The Long Field is a 1961 drama directed by Ona Vale.", "Harbour Lights is a 1987 musical film."]


def test_who_died_first_reads_the_second_year_of_a_life_span() -> None:
    items = [("Ada Quill", ["Ada Quill (3 May 1901 – 9 June 1990) was a chemist."]),
             ("Bram Stoke", ["Bram Stoke (12 March 1920, Leeds – 1 July 1960) was a poet."])]
    assert choose("Who died first, Ada Quill or Bram Stoke?", items)[0] == "Bram Stoke"
    assert choose("Who was born first, Ada Quill or Bram Stoke?", items)[0] == "Ada Quill"


def test_a_role_compares_the_people_the_options_name_in_it() -> None:
    items = [("Red Dust", ["Red Dust is a 1990 film directed by Ona Vale."]),
             ("Blue Hour", ["Blue Hour is a 1950 film directed by Ida Marsh."]),
             ("Ona Vale", ["Ona Vale (born 1931) is a director."]),
             ("Ida Marsh", ["Ida Marsh (born 1944) is a director."])]
    # By the films' own years Blue Hour would win; by their directors' births Red Dust does.
    option, quoted = choose("Which film has the director born earlier, Red Dust or Blue Hour?", items)
    assert option == "Red Dust"
    assert quoted == ["Ona Vale (born 1931) is a director.", "Ida Marsh (born 1944) is a director."]


def test_the_person_named_after_the_roles_word_holds_it() -> None:
    items = [("Red Dust", ["Red Dust is a 1990 film produced by Ida Marsh, directed by Ona Vale."]),
             ("Blue Hour", ["Blue Hour is a 1950 film directed by Ada Quill."]),
             ("Ida Marsh", ["Ida Marsh (born 1920) is a producer."]),
             ("Ona Vale", ["Ona Vale (born 1960) is a director."]),
             ("Ada Quill", ["Ada Quill (born 1944) is a director."])]
    # Red Dust's producer was born before Blue Hour's director; its director was not.
    option, quoted = choose("Which film has the director born earlier, Red Dust or Blue Hour?", items)
    assert option == "Blue Hour" and quoted[0] == "Ona Vale (born 1960) is a director."


def test_no_pick_without_both_values_or_on_a_tie() -> None:
    items = [("Red Dust", ["Red Dust is a 1990 film directed by Ona Vale."]),
             ("Blue Hour", ["Blue Hour is a film directed by Ida Marsh."])]
    assert choose("Which film was released first, Red Dust or Blue Hour?", items)[0] is None
    tie = [("Red Dust", ["Red Dust is a 1990 film."]), ("Blue Hour", ["Blue Hour is a 1990 film."])]
    assert choose("Which film was released first, Red Dust or Blue Hour?", tie)[0] is None
    # A role with no evidence about the person gives no value (the film's own year is not it).
    dated = [items[0], ("Blue Hour", ["Blue Hour is a 1950 film directed by Ida Marsh."])]
    assert choose("Which film has the director born earlier, Red Dust or Blue Hour?", dated)[0] is None


def test_amounts_are_read_next_to_a_question_word_and_years_are_not_amounts() -> None:
    items = [("Olm", ["Founded in 1870, the Olm lake covers 1,250 hectares."]),
             ("Tarn", ["The Tarn lake covers 830 hectares."])]
    assert choose("Which lake covers more hectares, the Olm or the Tarn?", items)[0] == "Olm"
    assert choose("Which lake covers fewer hectares, the Olm or the Tarn?", items)[0] == "Tarn"


def test_a_digit_inside_an_identifier_is_no_amount() -> None:
    items = [("Atlas", ["Atlas runs on kestrel-3 with 12 engineers."]), ("Borealis", ["Borealis has 9 engineers."])]
    assert choose("Which team has more engineers, Atlas or Borealis?", items)[0] == "Atlas"


def test_an_amount_followed_by_a_comma_is_read_whole() -> None:
    items = [("Atlas", ["Engineers: 7, the lead included."]), ("Borealis", ["Engineers: 5, the lead included."])]
    assert choose("Which team has more engineers, Atlas or Borealis?", items)[0] == "Atlas"


def test_a_count_may_be_written_in_words() -> None:
    items = [("Atlas", ["All seven engineers take turns on call."]), ("Borealis", ["Engineers: 5, the lead included."])]
    assert choose("Does the Atlas or the Borealis have more engineers?", items)[0] == "Atlas"


def test_how_long_each_lasted_compares_durations_in_one_unit() -> None:
    items = [("INC-1 Disk failure", ["| Date | 19 May, 2 engineers paged |", "| Duration | 2 h 14 min |"]),
             ("INC-2 Cache stampede", ["Resolved 5 hours 40 minutes after the page, at 11:30."])]
    # By their first numbers INC-1 (19) would win. Durations are compared in one unit: 2 h 14 min
    # is longer than 100 minutes, though 2 is less than 100.
    option, quoted = choose("Which outage lasted longer, INC-1 or INC-2?", items)
    assert option == "INC-2"
    assert quoted == ["| Duration | 2 h 14 min |", "Resolved 5 hours 40 minutes after the page, at 11:30."]
    shorter = [items[0], ("INC-2 Cache stampede", ["It lasted 100 minutes."])]
    assert choose("Which outage lasted longer, INC-1 or INC-2?", shorter)[0] == "INC-1"


def test_a_duration_and_a_count_are_not_compared() -> None:
    items = [("INC-1 Disk failure", ["| Duration | 2 h 14 min |"]), ("INC-2 Cache stampede", ["Outage in 3 regions."])]
    assert choose("Which outage lasted longer, INC-1 or INC-2?", items)[0] is None


def test_an_option_no_evidence_names_is_the_document_saying_most_of_it() -> None:
    items = [("INC-1 Disk failure in May", ["| Duration | 2 h 14 min |"]),
             ("INC-2 Cache stampede", ["It began in June.", "| Duration | 5 h 40 min |"]),
             ("Cache runbook", ["Warm the cache first, as the stampede of the cache in June taught, for 10 minutes."])]
    question = "Which outage lasted longer, the May disk failure or the June cache stampede?"
    option, quoted = choose(question, items)
    assert option == "June cache stampede" and quoted == ["| Duration | 2 h 14 min |", "| Duration | 5 h 40 min |"]
    # The runbook says all of "the June cache stampede" too, but its title says less of it. Two
    # documents saying as much of an option, in their text and in their titles: neither is taken.
    tied = [*items[:2], ("Stampede of June", ["A cache stampede in June lasted 9 hours."])]
    assert choose(question, tied)[0] is None


def test_the_values_compared_lead_the_reading_and_the_favoured_option_answers() -> None:
    question = "Which film was released first, Red Dust or Blue Hour?"
    comparison = comparison_of(question)
    assert comparison is not None
    read = page([("Red Dust", ["Red Dust is a 1990 film."]), ("Blue Hour", ["Blue Hour is a 1950 film."]),
                 ("Red Dust", ["Red Dust won a prize."])])
    weights = dict.fromkeys(words(question), 1.0)
    reading = Reading([2], 2, None, frozenset())
    led = lead_with_pick(reading, comparison, read, weights)
    assert led.chosen == [0, 1, 2] and led.answer == 1 and led.short == led.verdict == "Blue Hour"
    assert {"red", "dust", "blue", "hour"} <= led.covered
