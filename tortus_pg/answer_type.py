"""What kind of answer a question's opening asks for, when its words say so.

"When …?" and "In what year …?" ask for a time (so does "what year" anywhere: "… formed in
what year?"); "How much does … cost?" for a sum of money; "How long …?" for a duration (or a
length); "How many / much / often …?" for an amount. An answer that gives none is no answer to
such a question, however many of its words it shares ("When was the performer of Dream born?"
is not answered by "Dream (Dizzee Rascal song)", nor "How much does the Feature Store cost?" by
its freshness target of 60 seconds). The patterns are deliberately permissive: a time may be a
date, a clock time, a period ("every 90 days") or an ordering ("before expiry"); an amount may
be written in digits or words. Other questions ("Which team …", "What does … mean") have no
expected type, nor do questions in languages other than English, whose openings these
patterns do not read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
_NUMBER_WORDS = (
    "one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|forty|fifty|hundred|thousand"
    "|million|billion|dozen|half|several|single|once|twice"
)
# A number standing alone ("30 days", "1984", "16:30", "1980s"), not a digit inside an identifier
# ("ADR-011", "E-1042", "v4.2"), which names a thing rather than gives an amount or a time.
_NUMBER = r"(?<![\w.-])\d[\d.,:/]*(?:s|st|nd|rd|th)?(?![A-Za-z])"
_CURRENCIES = (
    r"[$€£¥₹]|\b(?:dollars?|euros?|pounds?|pence|cents?|yen|francs?|rupees?|USD|EUR|GBP|JPY|CHF|free of charge)\b"
)
_UNITS = (
    "milliseconds?|ms|seconds?|minutes?|hours?|days?|weeks?|months?|years?|decades?|centur(?:y|ies)"
    "|millimet(?:re|er)s?|centimet(?:re|er)s?|met(?:re|er)s?|kilomet(?:re|er)s?|mm|cm|m|km|inch(?:es)?|f(?:oo|ee)t|ft"
    "|yards?|miles?|mi"
)
_PERIODS = "daily|weekly|monthly|quarterly|yearly|annually|nightly|hourly|every|indefinitely|forever"


@dataclass(frozen=True)
class AnswerType:
    name: str  # as a sentence says it: "a time"
    question: re.Pattern[str]  # the question openings that ask for it
    answer: re.Pattern[str]  # what a sentence giving it contains
    # Whether a sentence giving it states a measure (a number with a unit, a sum of money) rather
    # than any number or ordering word ("every", "since"), which narrative sentences are full of.
    measured: bool = False

    def given_by(self, text: str) -> bool:
        return self.answer.search(text) is not None


TYPES = (  # the first whose question pattern matches applies
    AnswerType(
        "a time",
        re.compile(r"^\W*(?:(?:since|until|by|from|in|on|at|during)\s+)?(?:when\b|(?:what|which)\s+"
                   r"(?:year|date|day|month|decade|century|time)\b)"
                   r"|\b(?:what|which)\s+(?:year|date|decade|century)\b", re.I),  # "… formed in what year?"
        re.compile(rf"{_NUMBER}|\b(?-i:{_MONTHS})\b|\b(?:{_PERIODS}|before|after|during|until|since|ago|century|decade)\b",
                   re.I),
    ),
    AnswerType(
        "a sum of money",
        re.compile(r"^\W*(?:how\s+much\b.*\b(?:cost|costs|price|pay|paid|spend|spent|charge|charged|earn|earned"
                   r"|worth)\b|what\s+(?:does|do|did|will|would)\b.*\bcost\b|what\s+(?:is|was|are|were)\s+the\s+"
                   r"(?:cost|price|fee|fees|budget|salary|revenue)\b)", re.I),
        re.compile(_CURRENCIES, re.I),
        measured=True,
    ),
    AnswerType(
        "a duration or length",
        re.compile(r"^\W*how\s+long\b", re.I),
        re.compile(rf"(?:{_NUMBER}|\b(?:{_NUMBER_WORDS}|a|an)\b)\s*-?\s*(?:{_UNITS})\b"
                   r"|\b(?:indefinitely|forever|permanently)\b", re.I),
        measured=True,
    ),
    AnswerType(
        "an amount",
        re.compile(r"^\W*how\s+(?:many|much|often|old|far|big|large|tall|high|fast|heavy|deep|wide)\b|"
                   r"^\W*what\s+(?:percentage|proportion|share|number)\s+of\b", re.I),
        re.compile(rf"{_NUMBER}|\b(?:{_NUMBER_WORDS}|{_PERIODS}|no|none|all)\b", re.I),
    ),
)


def expected_type(question: str) -> AnswerType | None:
    """The answer type the question's opening asks for, or None."""
    return next((t for t in TYPES if t.question.search(question)), None)
