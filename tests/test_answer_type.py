"""The answer type a question's opening asks for, and whether a sentence gives it."""

import pytest

from tortus_pg.answer_type import TYPES, expected_type, names_in, place_part, year_part


@pytest.mark.parametrize(("question", "kind"), [
    ("When was the performer of Dream born?", "a time"),
    ("In what year did the band form?", "a time"),
    ("Since when has the runbook applied?", "a time"),
    ("On which date was ADR-007 accepted?", "a time"),
    ("The league includes the Adelaide team that was formed in what year?", "a time"),
    ("Both breeds were developed during which century?", "a time"),
    ("How many retries does ADR-007 allow?", "an amount"),
    ("How long does the Event Bus keep messages?", "a duration or length"),
    ("How much does it cost per month to run the Feature Store?", "a sum of money"),
    ("What does the Feature Store cost?", "a sum of money"),
    ("What was the price of the ticket?", "a sum of money"),
    ("How much data does the Event Bus keep?", "an amount"),
    ("how often must signing keys be rotated?", "an amount"),
    ("What percentage of requests may be retries?", "an amount"),
    ("Which team owns the Checkout Gateway?", "a name"),
    ("What nationality is the director of Sinister?", "a nationality"),
    ("What is the nationality of the band's singer?", "a nationality"),
    ("What does error code E-1042 mean?", None),
    ("Who decided when to rotate keys?", "a person"),  # "when" not at the opening
    ("Whose signature is required?", "a person"),
    ("Where are the backups written?", "a place"),
    ("In which city is the team based?", "a place"),
    ("What is the queue called?", "a name"),
    ("What is the RabbitMQ queue called that declarations are put on?", "a name"),
    ("How does the gateway retry?", None),
    ("What went wrong?", None),
    ("What happened to the ledger?", None),
    # The asking clause decides: the last sentence, and after a leading clause, the last comma's.
    ("INC-9 took the router down. Who leads the team that owns it?", "a person"),
    ("Before the change, how long did the service wait?", "a duration or length"),
    ("When the cluster fails over, how long are writes down?", "a duration or length"),
    ("In the country it serves, what percentage of parcels arrive late?", "an amount"),
    ("According to the runbook, how long before expiry are certificates renewed?", "a duration or length"),
    ("For how long are the keys kept?", "a duration or length"),
    ("How quickly must a Sev1 page be acknowledged?", "a duration or length"),
    ("How soon is the certificate renewed?", "a duration or length"),
    # A comma clause after anything else is a relative or an apposition, not the question: the
    # whole sentence asks, here in place ("… in what profession?").
    ("The pilot, who flew alone, worked in what profession?", "a name"),
    # "What is the <noun> of …" asks for what the noun names, as "Which <noun> …" does.
    ("What is the date of death of the director of the film?", "a time"),
    ("What was the year of the merger?", "a time"),
    ("What is the place of birth of the band's singer?", "a place"),
    ("What was the country of origin of the breed?", "a place"),
    ("What is the population of the town where the mill stands?", "an amount"),
    ("What is the name of the queue the gateway writes to?", "a name"),
    ("What is the cause of death of the composer?", None),  # a cause has no form to check
    # The noun may follow modifiers, and ends before a preposition, a relative or the question's end.
    ("What is the nightly cut-off time for the export?", "a time"),
    ("What is the maximum number of retries for a payment?", "an amount"),
    ("What is the retention period of the audit log?", "a duration or length"),
    ("What was the time?", "a time"),
    ("What is the time limit?", None),  # "time" modifies "limit"
    ("What is the p99 latency target of the gateway?", None),
    # A question may ask where its answer would stand, at its end; "how many" anywhere.
    ("The show was written by who?", "a person"),
    ("The craft the plane was built for were first developed when?", "a time"),
    ("The team played in a league based in what state?", "a place"),
    ("The hall belongs to a university located in which Australian city?", "a place"),
    ("The singer, who left the band in 1990, was born where?", "a place"),
    ("The state where the painter died has how many congressional districts?", "an amount"),
    ("The song's writer was the second wife of what singer?", "a name"),
    ("He served as chief of staff to which Queensland senator?", "a name"),
    ("The series starred which Canadian actress, known for a role in a hospital drama?", "a name"),
    ("The album featured a guest appearance by which rapper, actor and producer?", "a name"),
    ("The show which was written by Ann Lee won two awards?", None),  # a relative "which" asks nothing
    ("The club takes part in what?", None),  # a bare "what" names no kind of thing
    ("Who won the cup, and how many times?", "a person"),  # an opening asks before an in-place phrase
])
def test_the_opening_decides_the_type(question: str, kind: str | None) -> None:
    found = expected_type(question)
    assert (found.name if found else None) == kind


# question -> sentences that give what it asks for, and sentences that do not
GIVEN = {
    "When was he born?": (["Dylan Mills (born 18 September 1984) is a rapper.",
                           "He was born in Bow, in May of that year."],
                          ["Dream (Dizzee Rascal song)",
                           "He may be the best known rapper of Bow."]),  # "may", not the month
    "When must certificates be renewed?": (["They must be renewed at least 30 days before expiry."], []),
    "When is the export run?": (["The ledger export runs nightly."], []),
    "How many retries are allowed?": (["Retries are capped at 5 per call.", "Retries are capped at five per call."],
                                      []),
    "How often are keys rotated?": (["Keys are rotated every quarter."], []),
    "How much does the Feature Store cost?": (["The cluster costs $4,200 a month.", "It runs at 3,900 EUR per month."],
                                              ["The Feature Store is owned by the Data Platform Team.",
                                               "Features are at most 60 seconds behind the stream."]),
    "How long are ledger entries kept?": (["Class F records are retained for 10 years.",
                                           "Class F records are retained for ten years.",
                                           "Messages are kept for a week.",
                                           "| msg-dedup | Redis 7 | key TTL 36 h |",  # abbreviated units
                                           "Duration: 2 h 14 min",
                                           "Holds lapse after 10 mins."],
                                          ["Retries are capped at 5 per call.", "Class 2 holds run on host h7."]),
    "How long is the bridge?": (["The bridge is 2.5 km long."], []),
}


@pytest.mark.parametrize(("question", "sentence", "gives"), [
    (question, sentence, gives) for question, (yes, no) in GIVEN.items()
    for gives, sentences in ((True, yes), (False, no)) for sentence in sentences
])
def test_a_sentence_gives_the_type_or_not(question: str, sentence: str, gives: bool) -> None:
    kind = expected_type(question)
    assert kind is not None and kind.given_by(sentence) is gives


@pytest.mark.parametrize("sentence", [
    "ADR-011 moved the cluster.", "Merchants received E-1042.", "The v4.2 release made it mandatory.",
    "INC-2025-021 affected the cluster.", "Tokens are signed with ES256.",
])
def test_digits_inside_an_identifier_are_no_amount_or_time(sentence: str) -> None:
    for question in ("When did it happen?", "How many were there?"):
        kind = expected_type(question)
        assert kind is not None and not kind.given_by(sentence)


@pytest.mark.parametrize("sentence", ["It opened on 2025-03-04.", "It ran in the 1980s.", "A 24-hour window."])
def test_numbers_in_dates_decades_and_compounds_count(sentence: str) -> None:
    kind = expected_type("When did it happen?")
    assert kind is not None and kind.given_by(sentence)


@pytest.mark.parametrize(("question", "sentence", "values"), [
    ("Who heads up the Fleet Data group?", "Lead: Bartosz Wierzbicki (Head of Fleet Data).", ["Bartosz Wierzbicki"]),
    ("Who approved it?", "It was approved by Maria de la Cruz and Tom Ng.", ["Maria de la Cruz", "Tom Ng"]),
    ("Which cluster does Waypoint use?", "Waypoint keeps its orders on kestrel-3.", ["kestrel-3"]),
    ("What flag does on-call flip?", "On-call flips `elig.degraded_mode` to true.", ["elig.degraded_mode"]),
    ("In which city is the Routing team based?", "The Routing team sits in Leeds.", ["Leeds"]),
    ("Where should urgent problems go?", "Post in #data-platform-urgent.", ["#data-platform-urgent"]),
    ("How many retries are allowed?", "Retries are capped at 5 per call.", ["5"]),
    ("How long are keys kept?", "Keys are kept for 36 hours, then dropped.", ["36 hours"]),
    # A place the sentence puts after "in", "at", "from" or "near" comes before its other names.
    ("Where did the director die?", "Alfred Santell, an American director, died in Salinas.",
     ["Salinas", "Alfred Santell", "American"]),
    ("What is the place of birth of the singer?", "Ada Lowe was born at Leeds and sang with The Owls.",
     ["Leeds", "Ada Lowe", "The Owls"]),
    # A date is capitalised like a name but is no place, person or name; it is a time.
    ("Where was the director born?", "Ona Vale (14 May 1900 – June 20, 1977) was born in Leeds.",
     ["Leeds", "Ona Vale"]),
    ("Which studio made it?", "It was made in May 1950 by Harbour Pictures.", ["Harbour Pictures"]),
    ("When was the director born?", "Ona Vale was born on 14 May 1900.", ["14 May 1900"]),
    # A nationality is a proper adjective before a common noun, the description's first.
    ("What nationality is the painter?", "In 1920 Ona Vale (1890–1962) was a Dutch painter in Paris.", ["Dutch"]),
    # An initial is part of a name; a code span is a value of its own, and a list item's first
    # word (after its bullet or emphasis) opens a sentence.
    ("Who makes his first appearance?", "Waylon J. Smithers Jr. first appears here.", ["Waylon J. Smithers Jr"]),
    ("Which queue carries reminders?", "- Replace `msg-outbound` with `msg-outbound-priority` for reminders.",
     ["msg-outbound", "msg-outbound-priority"]),
    ("Which status was set?", "**Status:** Accepted", ["Accepted"]),
    # So does a one-letter first word.
    ("Where was the director born?", "A native of Verona, he moved to Rome.", ["Verona", "Rome"]),
    # An ISO date is one value, though the question says its year.
    ("When was the design behind the June 2024 incident accepted?", "| Accepted on | 2024-05-20 |", ["2024-05-20"]),
    # Names are written with the Latin alphabets' other letters too.
    ("Who wrote the series?", "It is written by French-Canadian author Mélanie Watt.", ["Mélanie Watt"]),
    ("Who reviews the grant?", "Grants are reviewed by Osman Şirin and Jørgen Buckhøj.",
     ["Osman Şirin", "Jørgen Buckhøj"]),
    ("Where was the director born?", "She was born in Ålesund, a port town.", ["Ålesund"]),
    ("What nationality is the painter?", "Ona Vale (1890–1962) was a Québécois painter.", ["Québécois"]),
    # A preposition opening a sentence, and the numbers after it, are no part of a name.
    ("Who was president then?", "On December 28, 1846, Iowa joined when President James K. Polk signed it.",
     ["President James K. Polk"]),
    ("Which port handled the most containers?", "In 2010 Piraeus handled 513,319 TEUs.", ["Piraeus", "TEUs"]),
    ("Where did she study?", "At the University of Vienna she read law.", ["University of Vienna"]),
    ("Where did he live?", "In the 1950s he lived in Rome.", ["Rome"]),
    ("Which film did she star in?", "She starred in On the Waterfront.", ["On the Waterfront"]),
    # A possessive ends a name; a quoted nickname is inside one.
    ("Who was she married to?", "She was Kim Jong-il's first wife.", ["Kim Jong-il"]),
    ("Who sang it?", 'It was sung by Nicholas Lofton "Nick" Hexum in 1997.', ['Nicholas Lofton "Nick" Hexum']),
])
def test_values_are_the_spans_of_the_type_the_question_does_not_say(
    question: str, sentence: str, values: list[str]
) -> None:
    kind = expected_type(question)
    asked = frozenset(w.casefold() for w in question.replace("?", " ").split())
    assert kind is not None and kind.values(sentence, asked) == values


def test_person_place_and_name_are_not_required_of_an_answer() -> None:
    required = {t.name: t.required for t in TYPES}
    assert not required["a person"] and not required["a place"] and not required["a name"]
    assert required["a time"] and required["an amount"]


@pytest.mark.parametrize(("text", "names"), [
    ("The election followed Ezer Weizman's resignation.", ["Ezer Weizman"]),
    ("It is Mozart’s Eine kleine Nachtmusik.", ["Mozart", "Eine", "Nachtmusik"]),
    ("We met at O'Brien's Bar with Kwabena Asante.", ["O'Brien", "Bar", "Kwabena Asante"]),
    ("It starred Valerie Hobson and Alan Hale.", ["Valerie Hobson", "Alan Hale"]),
    ("Granite Peak is in the Santa Rosa Range and Humboldt County.", ["Granite Peak", "Santa Rosa Range",
                                                                      "Humboldt County"]),
    ("It reads `the user's limit and quota` first.", ["the user's limit and quota"]),
])
def test_a_possessive_or_and_ends_a_name(text: str, names: list[str]) -> None:
    assert names_in(text) == names


@pytest.mark.parametrize(("value", "question", "part"), [
    ("Brooklyn, New York, United States", "Where was the director born?", "Brooklyn"),
    ("Portland, Oregon", "The singer is from what state?", "Oregon"),
    ("White County, Arkansas, United States", "In which country is Midway?", "United States"),
    ("McDowell County, West Virginia", "In what county is the town?", "McDowell County"),
    ("Leyton, East London", "In which city did the band form?", "Leyton"),
    ("Florence, Soffici", "What is the place of birth of the director?", "Florence"),  # a name after the place
    ("Rome", "In which country did he die?", "Rome"),
])
def test_a_run_of_places_answers_with_the_part_asked_for(value: str, question: str, part: str) -> None:
    asked = frozenset(w.casefold() for w in question.replace("?", " ").split())
    assert place_part(value, asked) == part


@pytest.mark.parametrize(("value", "question", "part"), [
    ("15 June 1924", "In what year was the president born?", "1924"),
    ("15 June 1924", "When was the president born?", "15 June 1924"),
    ("1990-1995", "In what year did the war end?", "1990-1995"),  # a span is no one year
    ("between 1931 and 1934", "In which year was it built?", "between 1931 and 1934"),
])
def test_a_question_asking_for_a_year_gets_the_year_of_a_date(value: str, question: str, part: str) -> None:
    asked = frozenset(w.casefold() for w in question.replace("?", " ").split())
    assert year_part(value, asked) == part
