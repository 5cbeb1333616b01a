"""The evidence-chain reader, on fixtures written for it (no corpus statistics: lexemes are words)."""

from __future__ import annotations

import re

import pytest

from tortus_pg.answer_type import expected_type
from tortus_pg.query.read import ANSWERS, JOIN, Page, Sentence, in_other_forms, read_chain, signals


def words(text: str) -> set[str]:
    return {w.casefold() for w in re.findall(r"\w[\w.-]*\w|\w", text)}


def read(question: str, items: list[tuple[str, list[str]]], weights: dict[str, float] | None = None,
         dense: list[float] | None = None, groups: list[int] | None = None) -> tuple[list[str], str | None]:
    """Read `items` (heading path, sentences) for `question`; the quoted texts and the short answer."""
    sentences = [Sentence(i, 0, len(t), t) for i, (_, texts) in enumerate(items) for t in texts]
    labels = [label for label, _ in items]
    asked = frozenset(words(question))
    weights = weights or dict.fromkeys(asked - {"who", "what", "which", "the", "of", "is", "does", "how"}, 1.0)
    page = Page(sentences, [words(s.text) for s in sentences], [words(labels[s.evidence]) for s in sentences],
                labels, dense, groups)
    reading = read_chain(page, weights, expected_type(question), asked)
    return [sentences[j].text for j in reading.chosen], reading.short


def test_the_first_statement_names_a_bridge_and_the_document_about_it_answers() -> None:
    question = "Who leads the team that owns Waypoint?"
    quoted, short = read(question, [
        ("Waypoint > Ownership", ["Waypoint is owned by Network Optimisation.", "Waypoint plans routes nightly."]),
        ("Network Optimisation > People", ["The team is led by Dario Feltham.", "Most of the team sits in Leeds."]),
        ("Fleet Data > People", ["The team is led by Bartosz Wierzbicki."]),
    ])
    # The lead of the team the bridge names comes before a lead of a team no statement leads to.
    assert quoted[:2] == ["Waypoint is owned by Network Optimisation.", "The team is led by Dario Feltham."]
    assert short == "Dario Feltham"


def test_the_statement_that_leads_on_to_the_answer_starts_the_chain() -> None:
    # The best match names no bridge; the next best names the network whose page answers. Started
    # from the best match, the founder's sentence (which shares no word with the question) is
    # never reached.
    question = "Who started the network that aired Thumb Wars?"
    quoted, short = read(question, [
        ("Thumb Wars", ["Thumb Wars started on a network in Europe.", "Thumb Wars first aired on Cartoon Loop."]),
        ("Cartoon Loop", ["It was founded by Betty Cohen."]),
    ], weights={"started": 3.0, "network": 3.0, "aired": 1.0, "thumb": 1.0, "wars": 1.0})
    assert quoted[:2] == ["Thumb Wars first aired on Cartoon Loop.", "It was founded by Betty Cohen."]
    assert short == "Betty Cohen"


def test_the_bridge_sentence_saying_what_the_first_leaves_unsaid_leads_and_answers() -> None:
    # The director's opening sentence is the likeliest by its form (it opens its item, names him,
    # gives a place-like name); the sentence saying where he died, the part of the question the
    # film's sentence leaves unsaid, leads on from the film, and its place, stated after "in",
    # is the short answer. Another sentence about him says "die" of someone else, with no place
    # stated so. (Lexemes are plain words here: "die" stands for the stem.)
    question = "Where did the director of film Red Dust die?"
    quoted, short = read(question, [
        ("Red Dust", ["Red Dust is a 1931 film directed by Ona Vale."]),
        ("Ona Vale", ["Ona Vale (1890 – 1960) was an American film director.",
                      "Jones would die after the fire, while Vale was hurt.", "Vale would die in Salinas in 1960."]),
    ], weights={"red": 3.0, "dust": 3.0, "film": 0.5, "director": 1.0, "die": 1.0},
        dense=[0.6, 0.6, 0.1, 0.1])
    assert quoted[:2] == ["Red Dust is a 1931 film directed by Ona Vale.", "Vale would die in Salinas in 1960."]
    assert short == "Salinas"


def test_a_best_match_that_answers_itself_stays_first() -> None:
    question = "Who founded Cartoon Loop?"
    quoted, short = read(question, [
        ("Cartoon Loop", ["Cartoon Loop was founded by Betty Cohen in 1992."]),
        ("Thumb Wars", ["Thumb Wars aired on Cartoon Loop.", "Thumb Wars was created by Ida Marsh."]),
    ], weights={"founded": 2.0, "cartoon": 1.0, "loop": 1.0})
    assert quoted[0] == "Cartoon Loop was founded by Betty Cohen in 1992."
    assert short == "Betty Cohen"


def test_a_bridge_named_in_the_possessive_leads_to_the_document_about_it() -> None:
    question = "In what year was the man whose resignation led to the 2000 election born?"
    quoted, _ = read(question, [
        ("Election of 2000", ["The 2000 election followed Ezer Weizman's resignation."]),
        ("Ezer Weizman", ["Ezer Weizman (15 June 1924 – 24 April 2005) was a general."]),
        ("Moshe Katsav", ["Moshe Katsav (born 5 December 1945) was a minister."]),
    ], weights={"resignation": 3.0, "election": 2.0, "2000": 2.0, "born": 1.0, "year": 1.0, "man": 1.0})
    assert quoted[:2] == ["The 2000 election followed Ezer Weizman's resignation.",
                          "Ezer Weizman (15 June 1924 – 24 April 2005) was a general."]


def test_an_item_titled_with_a_name_the_first_statement_writes_is_about_that_bridge() -> None:
    # The first statement gives the bridge inside a longer capitalised run ("former Supreme
    # Leader Kim Sung-ho"); the item titled with the name itself answers, not another mother's.
    question = "Who was the mother of the father of Ri Chol?"
    quoted, _ = read(question, [
        ("Ri Chol", ["Ri Chol is a son of former Supreme Leader Kim Sung-ho."]),
        ("Pak Ilsan", ["Pak Ilsan's mother, Han Ye-rim, was a teacher."]),
        ("Kim Sung-ho (politician)", ["Kim Sung-ho's mother, Kang Min-ji, was a teacher."]),
    ], weights={"mother": 2.0, "father": 2.0, "ri": 1.0, "chol": 1.0})
    assert quoted[:2] == ["Ri Chol is a son of former Supreme Leader Kim Sung-ho.",
                          "Kim Sung-ho's mother, Kang Min-ji, was a teacher."]


def test_a_sentence_opening_with_the_bridge_is_about_it() -> None:
    question = "What did merchants see during INC-7?"
    quoted, short = read(question, [
        ("INC-7 > Summary", ["Merchants saw E-1042 during INC-7."]),
        ("Error codes", ["| E-1090 | Merchant account suspended |", "| E-1042 | Upstream TLS handshake failed |"]),
    ])
    assert quoted == ["Merchants saw E-1042 during INC-7.", "| E-1042 | Upstream TLS handshake failed |"]


def test_a_sentence_that_adds_nothing_of_its_own_does_not_join() -> None:
    question = "Which error did merchants receive?"
    quoted, _ = read(question, [
        ("Error codes > Risk errors", ["| E-3301 | Risk score unavailable | Yes |"]),
        ("INC-7 > Impact", ["Merchants received E-1042 responses."]),
    ])
    assert quoted == ["Merchants received E-1042 responses."]


def test_the_value_a_checkable_type_asks_for_joins_the_first_statement() -> None:
    question = "When did ADR-11 move cluster A to NVMe drives?"
    quoted, short = read(question, [
        ("ADR-11 > Decision", ["ADR-11 did move cluster A to NVMe drives.", "The move finished on 12 May 2025.",
                               "Nobody liked the old disks."]),
    ], weights={"adr-11": 1.0, "move": 1.0, "cluster": 1.0, "nvme": 1.0, "drives": 1.0})
    assert quoted == ["ADR-11 did move cluster A to NVMe drives.", "The move finished on 12 May 2025."]
    assert short == "12 May 2025"


def test_a_sentence_saying_the_rest_of_the_question_joins_from_another_document() -> None:
    # No bridge leads there (the first statement names none), yet the other document says what
    # the question asks beyond the first statement: the answer model rates it likely.
    question = "Which river flows through the city where Ana Silva was born?"
    weights = {"river": 1.0, "flows": 1.0, "city": 1.0, "ana": 3.0, "silva": 3.0, "born": 2.0}
    items = [("Ana Silva", ["Ana Silva was born in a northern city."]),
             ("Rivers", ["The Douro river flows through the city of Porto."])]
    quoted, _ = read(question, items, weights, dense=[0.5, 0.4], groups=[0, 1])
    assert quoted == ["Ana Silva was born in a northern city.", "The Douro river flows through the city of Porto."]


def test_a_sentence_saying_nothing_the_question_asks_does_not_join() -> None:
    # Of its item's first sentence, with a name of the asked kind: its form alone is no reason.
    question = "Which river flows through the city where Ana Silva was born?"
    weights = {"river": 1.0, "flows": 1.0, "city": 1.0, "ana": 3.0, "silva": 3.0, "born": 2.0}
    items = [("Ana Silva", ["Ana Silva was born in a northern city of Portugal."]),
             ("Painters", ["Maria Lopes painted the harbour at dawn."])]
    quoted, _ = read(question, items, weights, groups=[0, 0])
    assert quoted == ["Ana Silva was born in a northern city of Portugal."]


def test_dense_similarity_picks_the_paraphrase_among_equal_matches() -> None:
    question = "Who heads the group?"
    items = [("Group", ["Lead: Ana Silva.", "Founded: Tom Ng."])]
    quoted, short = read(question, items, weights={"group": 1.0}, dense=[0.2, 0.6])
    assert quoted[0] == "Founded: Tom Ng." and short == "Tom Ng"
    quoted, short = read(question, items, weights={"group": 1.0}, dense=[0.6, 0.2])
    assert quoted[0] == "Lead: Ana Silva." and short == "Ana Silva"


def test_no_sentences_no_reading() -> None:
    quoted, short = read("Who?", [])
    assert quoted == [] and short is None


def test_of_equal_matches_the_statement_whose_subject_the_question_names_comes_first() -> None:
    question = "What does clause 7.3.2 say?"
    items = [("Policy > clause 8.2", ["Version 3.1 shortened the period in clause 7.3.2."]),
             ("Policy > clause 7.3.2", ["7.3.2 Signing keys are rotated every 90 days."])]
    sentences = [Sentence(i, 0, len(t), t) for i, (_, texts) in enumerate(items) for t in texts]
    weights = {"clause": 1.0, "7.3.2": 2.0}
    own = [words(s.text) for s in sentences]
    context = [words(items[s.evidence][0]) for s in sentences]
    labels = [label for label, _ in items]
    asked = frozenset(words(question))
    assert read_chain(Page(sentences, own, context, labels, keyed=[False, True]), weights, None, asked).chosen[0] == 1
    assert read_chain(Page(sentences, own, context, labels, [0.2, 0.1], keyed=[False, True]), weights, None,
                      asked).chosen[0] == 1


def test_the_short_answer_is_not_the_bridge_the_first_statement_named() -> None:
    question = "What nationality is the director of Sinister?"
    quoted, short = read(question, [
        ("Sinister (film)", ["Sinister is a 2012 horror film directed by Scott Derrickson."]),
        ("Scott Derrickson", ["Scott Derrickson is an American director."]),
    ], weights={"nationality": 2.0, "director": 1.0, "sinister": 2.0})
    assert quoted == ["Sinister is a 2012 horror film directed by Scott Derrickson.",
                      "Scott Derrickson is an American director."]
    assert short == "American"


def test_a_word_saying_a_time_is_given_is_no_short_answer() -> None:
    # "after" makes the sentence one that gives a time, but the short answer is the year.
    question = "When was the island taken by the British?"
    quoted, short = read(question, [
        ("Hong Kong", ["The island was taken by the British after the First Opium War, in 1842."]),
    ], weights={"island": 1.0, "taken": 2.0, "british": 2.0})
    assert quoted == ["The island was taken by the British after the First Opium War, in 1842."]
    assert short == "1842"


def test_what_is_the_date_of_asks_for_the_date_the_answering_sentence_gives() -> None:
    question = "What is the date of death of the director of The Quiet Shore?"
    quoted, short = read(question, [
        ("The Quiet Shore", ["The Quiet Shore is a 1931 drama film directed by Ada Verhoeven."]),
        ("Ada Verhoeven", ["Ada Verhoeven was a Dutch director.", "Verhoeven died on 3 March 1962 in Leiden."]),
    ], weights={"date": 1.0, "death": 2.0, "director": 1.0, "quiet": 2.0, "shore": 2.0})
    assert "Verhoeven died on 3 March 1962 in Leiden." in quoted
    assert short == "3 March 1962"


def test_in_a_chain_the_value_about_the_bridge_answers_before_the_first_statement_s() -> None:
    # Both quoted sentences give a time; the question asks for the director's, which the
    # sentence about the bridge gives, though the answer model rates the film's own sentence
    # (the question's best match, and the one most like it) likelier.
    question = "What is the date of birth of the director of film The Quiet Shore?"
    items = [("The Quiet Shore", ["The Quiet Shore is a 1931 drama film directed by Ada Verhoeven."]),
             ("Ada Verhoeven", ["Ada Verhoeven (4 May 1890 – 3 March 1962) was a Dutch painter."])]
    weights = {"date": 1.0, "birth": 2.0, "director": 1.0, "film": 1.0, "quiet": 2.0, "shore": 2.0}
    quoted, short = read(question, items, weights, dense=[0.8, 0.0])
    assert quoted == [items[0][1][0], items[1][1][0]]
    assert short == "4 May 1890"


def test_a_word_the_first_statement_says_in_another_form_is_said() -> None:
    # Lexemes as PostgreSQL's English stemmer gives them: "directed" is "direct", "director"
    # stays "director". The first statement says the director ("directed by"), so the bridge's
    # sentence saying "director" again adds nothing to it; the one saying where she was born does,
    # and follows the first before her opening sentence.
    texts = ["The Quiet Shore is a 1931 drama film directed by Ada Verhoeven.",
             "Ada Verhoeven (1890-1962) was a Dutch painter.", "She later worked as a director in Haarlem.",
             "Born in Leiden, she studied in Paris."]
    own = [{"quiet", "shore", "1931", "drama", "film", "direct", "ada", "verhoeven"},
           {"ada", "verhoeven", "1890-1962", "dutch", "painter"}, {"later", "work", "director", "haarlem"},
           {"born", "leiden", "studi", "pari"}]
    sentences = [Sentence(min(i, 1), 0, len(t), t) for i, t in enumerate(texts)]
    page = Page(sentences, own, [set()] * 4, ["The Quiet Shore", "Ada Verhoeven"])
    question = "Where was the director of film The Quiet Shore born?"
    weights = {"director": 2.0, "film": 1.0, "quiet": 2.0, "shore": 2.0, "born": 1.0}
    reading = read_chain(page, weights, expected_type(question), frozenset(words(question)))
    assert [texts[j] for j in reading.chosen] == [texts[0], texts[3], texts[1]]
    assert "director" in reading.covered  # said by the chain's first statement


@pytest.mark.parametrize(("question", "sentence", "short"), [
    ("When did Ada Verhoeven die?", "Ada Verhoeven (4 May 1890 – 3 March 1962) was a Dutch painter.", "3 March 1962"),
    ("What is the date of death of Ada Verhoeven?", "Ada Verhoeven (1890 - 1962) was a painter.", "1962"),
    ("When was Ada Verhoeven born?", "Ada Verhoeven (4 May 1890 – 3 March 1962) was a Dutch painter.", "4 May 1890"),
    ("Where did Ada Verhoeven die?", "Ada Verhoeven (born in Haarlem – died in Leiden) was a painter.", "Leiden"),
    # No span joins the first two dates: the first is the death's.
    ("When did Ada Verhoeven die?", "Ada Verhoeven died in 1962; her brother lived 1893–1960.", "1962"),
])
def test_a_question_about_a_death_takes_the_end_of_a_life_span(question: str, sentence: str, short: str) -> None:
    assert read(question, [("Ada Verhoeven", [sentence])])[1] == short


def test_the_end_of_a_life_span_is_read_inside_the_span() -> None:
    # The span gives no place of death; the adjective after it is no answer.
    sentence = "Ada Verhoeven (1890, Haarlem – 1962) was a Dutch painter."
    assert read("Where did Ada Verhoeven die?", [("Ada Verhoeven", [sentence])])[1] != "Dutch"


def test_the_answer_model_weighs_only_signals_the_reader_measures() -> None:
    sentences = [Sentence(0, 0, 10, "Ana Silva was born in Porto."), Sentence(1, 0, 10, "Porto lies on the Douro.")]
    page = Page(sentences, [words(s.text) for s in sentences], [set(), set()], ["Ana Silva", "Porto"], [0.4, 0.2],
                [0, 1], [True, False])
    measured = signals(page, {"born": 1.0, "ana": 2.0}, expected_type("Where was Ana Silva born?"),
                       frozenset(words("Where was Ana Silva born?")))
    assert set(ANSWERS.weights) == set(measured.arrays)
    assert all(len(a) == len(sentences) for a in measured.arrays.values())
    likely = ANSWERS.probabilities(measured.arrays, len(sentences))
    assert likely == pytest.approx([ANSWERS.probability({f: float(a[j]) for f, a in measured.arrays.items()})
                                    for j in range(len(sentences))])
    assert 0.0 < JOIN < 1.0


def test_what_the_chain_leaves_unsaid_is_not_covered_by_the_model_s_joins() -> None:
    # A bridge is followed to what the chain's own statements leave unsaid: a sentence the answer
    # model adds is quoted, but the terms it says stay uncovered for the bridge to look for.
    question = "Which river flows through the city where Ana Silva was born?"
    weights = {"river": 1.0, "flows": 1.0, "city": 1.0, "ana": 3.0, "silva": 3.0, "born": 2.0}
    items = [("Ana Silva", ["Ana Silva was born in a northern city."]),
             ("Rivers", ["The Douro river flows through the city of Porto."])]
    sentences = [Sentence(i, 0, len(t), t) for i, (_, texts) in enumerate(items) for t in texts]
    page = Page(sentences, [words(s.text) for s in sentences], [words(label) for label, _ in items],
                [label for label, _ in items], [0.5, 0.4], [0, 1])
    reading = read_chain(page, weights, expected_type(question), frozenset(words(question)))
    assert reading.chosen == [0, 1] and reading.covered == {"ana", "silva", "born", "city"}


def test_a_sentence_stating_a_family_relation_in_other_words_says_it() -> None:
    # Lexemes as PostgreSQL's English stemmer gives them. Her own sentence matches her name as
    # well as his does; his also says who her husband is ("married"), so it starts the chain and
    # its birth date answers.
    texts = ["Mara Quist (3 May 1850 – 1 June 1911) was a Danish painter.",
             "Edvin Holm (12 January 1842 – 2 June 1911) was a Danish writer who married Mara Quist in 1870."]
    own = [{"mara", "quist", "3", "may", "1850", "1", "june", "1911", "danish", "painter"},
           {"edvin", "holm", "12", "januari", "1842", "2", "june", "1911", "danish", "writer", "marri", "mara",
            "quist", "1870"}]
    page = Page([Sentence(i, 0, len(t), t) for i, t in enumerate(texts)], own, [set(), set()],
                ["Mara Quist", "Edvin Holm"])
    question = "When was Mara Quist's husband born?"
    weights = {"husband": 4.0, "born": 1.5, "mara": 6.0, "quist": 6.0}
    reading = read_chain(page, weights, expected_type(question), frozenset(words(question)))
    assert reading.chosen[0] == 1 and reading.short == "12 January 1842"
    assert "husband" in reading.covered


@pytest.mark.parametrize(("asked", "written", "said"), [
    ("husband", "marri", True), ("spous", "wife", True), ("wife", "widow", True),
    ("father", "son", True), ("mother", "daughter", True), ("child", "father", True),
    ("sister", "sibl", True), ("grandfath", "son", True), ("birth", "born", True), ("death", "die", True),
    ("birth", "nativ", True), ("birthday", "born", True), ("studi", "graduat", True), ("educ", "alma", True),
    ("husband", "son", False),
    ("father", "brother", False), ("birth", "die", False), ("studi", "born", False),
])
def test_the_words_of_one_relation_or_event_say_each_other(asked: str, written: str, said: bool) -> None:
    own, context = in_other_forms([{written}], [set()], [asked])
    assert (asked in own[0]) is said and context == [set()]


def test_a_bridge_sentence_saying_the_birth_as_a_native_of_a_place_leads_and_answers() -> None:
    # Lexemes as PostgreSQL's English stemmer gives them. The director's opening sentence is the
    # likelier by its form; the one saying where he was born, as "a native of", says what the
    # first statement leaves unsaid, so it follows the first and its place answers.
    texts = ["Pale Harbour is a 1961 drama film directed by Carlo Lotti.",
             "Carlo Lotti (2 May 1901 – 9 June 1975) was an Italian film director and actor.",
             "A native of Verona, he moved to Rome in the 1920s and began acting in 1931."]
    own = [{"pale", "harbour", "1961", "drama", "film", "direct", "carlo", "lotti"},
           {"carlo", "lotti", "2", "may", "1901", "9", "june", "1975", "italian", "film", "director", "actor"},
           {"nativ", "verona", "move", "rome", "1920s", "began", "act", "1931"}]
    labels = ["Pale Harbour", "Carlo Lotti", "Carlo Lotti"]
    page = Page([Sentence(i, 0, len(t), t) for i, t in enumerate(texts)], own, [set(), set(), set()], labels,
                [0.7, 0.5, 0.3], [0, 1, 1])
    question = "What is the place of birth of the director of film Pale Harbour?"
    weights = {"place": 2.0, "birth": 3.0, "director": 2.5, "film": 1.0, "pale": 6.0, "harbour": 6.0}
    reading = read_chain(page, weights, expected_type(question), frozenset(words(question)))
    assert reading.chosen[:2] == [0, 2] and reading.short == "Verona"


def test_the_short_answer_of_a_run_of_places_is_the_part_asked_for() -> None:
    texts = ["Pale Harbour is a 1961 drama film directed by Carlo Lotti.",
             "Carlo Lotti was born in Wimborne, Dorset, and studied in London."]
    own = [{"pale", "harbour", "1961", "drama", "film", "direct", "carlo", "lotti"},
           {"carlo", "lotti", "born", "wimborn", "dorset", "studi", "london"}]
    page = Page([Sentence(i, 0, len(t), t) for i, t in enumerate(texts)], own, [set(), set()],
                ["Pale Harbour", "Carlo Lotti"], [0.7, 0.5], [0, 1])
    weights = {"born": 3.0, "director": 2.5, "film": 1.0, "pale": 6.0, "harbour": 6.0}
    for question, short in (("Where was the director of film Pale Harbour born?", "Wimborne"),
                            ("In which county was the director of film Pale Harbour born?", "Dorset")):
        reading = read_chain(page, weights, expected_type(question), frozenset(words(question)))
        assert reading.short == short
