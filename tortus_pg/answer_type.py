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
patterns do not read. "Who …" asks for a person, "Where …" / "Which city …" for a place, "What
nationality …" for a nationality (a proper adjective: "a Swedish actor") and "Which / What
<noun> …" for a name; those are not required of an answer (capitalised words are
in every sentence), but they tell the reader which sentence of a chain answers and which span
of it is the short answer (`AnswerType.values`). "What is the <noun> of …" asks for what its
noun names, as "Which <noun> …" does, after the noun's modifiers: "the date of death" a time,
"the place of birth" a place, "the maximum number of retries" an amount, "the retention
period" a duration, "the name" a name. A question no opening of which asks may ask where its
answer would stand, at its end: "… founded by who?" asks for a person, "… first developed
when?" for a time, "… based in what state?" or "… born where?" for a place, "… the wife of
what singer?" for a name; "how many" asks for an amount wherever it stands.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
_DATE = re.compile(rf"(?:{_MONTHS})\b[\s\d,]*")  # "May 1900", "June 20, 1892"
_NUMBER_WORDS = (
    "one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|forty|fifty|hundred|thousand"
    "|million|billion|dozen|half|several|single|once|twice"
)
# A number standing alone ("30 days", "1984", "16:30", "1980s") or an ISO 8601 date ("2024-05-20"),
# not a digit inside an identifier ("ADR-011", "E-1042", "v4.2"), which names a thing rather than
# gives an amount or a time.
_NUMBER = r"(?<![\w.-])(?:\d{4}-\d{2}-\d{2}\b|\d[\d.,:/]*(?:s|st|nd|rd|th)?)(?![A-Za-z])"
_CURRENCIES = (
    r"[$€£¥₹]|\b(?:dollars?|euros?|pounds?|pence|cents?|yen|francs?|rupees?|USD|EUR|GBP|JPY|CHF|free of charge)\b"
)
# Units of time, written out or abbreviated as operational documents do ("36 h", "2 h 14 min").
TIME_UNITS = "milliseconds?|ms|seconds?|secs?|s|minutes?|mins?|hours?|hrs?|h|days?|weeks?|months?|years?"
_UNITS = (
    f"{TIME_UNITS}|decades?|centur(?:y|ies)"
    "|millimet(?:re|er)s?|centimet(?:re|er)s?|met(?:re|er)s?|kilomet(?:re|er)s?|mm|cm|m|km|inch(?:es)?|f(?:oo|ee)t|ft"
    "|yards?|miles?|mi"
)
_PERIODS = "daily|weekly|monthly|quarterly|yearly|annually|nightly|hourly|every|indefinitely|forever"


# Capital and small letters of the Latin alphabets ("Mélanie", "Osman Şirin", "Ålesund"), as
# character classes: names are written with them as well as with ASCII letters.
_LATIN = [chr(c) for c in range(0x00C0, 0x0250)]
_UP = "[A-Z" + "".join(c for c in _LATIN if c.isupper()) + "]"
_LOW = "[a-z" + "".join(c for c in _LATIN if c.islower()) + "]"
# An initial inside a name ("Waylon J. Smithers Jr.") is a capital and a full stop; a nickname
# inside one is quoted ('Nicholas Lofton "Nick" Hexum', 'Eddie "The Eagle" Edwards').
_INITIAL = rf"{_UP}\.(?=\s+{_UP})|[\"“]{_UP}[^\"”\n]{{0,30}}[\"”](?=\s+{_UP})"
# A name: capitalised words (with the small words names carry inside them and their initials),
# an identifier ("kestrel-3", "cdg.submissions", "E-1042") or a code span ("`elig.degraded_mode`").
_NAME = (r"`[^`\n]{1,80}`|(?<![\w.-])(?:[A-Za-z]+[\w]*[-_.:/#][\w.:/#-]*\w|#[\w-]+)"
         rf"|\b{_UP}[\w'’&-]*(?:\s+(?:(?:of|de|del|da|di|von|van|der|the|and|&|for|on|la|le)\s+)*(?:{_INITIAL}"
         rf"|(?:{_UP}|[0-9])[\w'’&-]*))*")
_PERSON = rf"\b{_UP}(?:{_LOW}|['’-])+(?:\s+(?:(?:de|del|da|di|von|van|der|le|la)\s+)*(?:{_INITIAL}|{_UP}[\w'’-]+))+"
# A lone capitalised word opening a sentence or a line (after a list's bullet or emphasis) is the
# sentence's first word, not a name.
_OPENING = re.compile(r"(?:^[\s*•>#-]*|[.!?:;|]\s+|\n[\s*•>#-]*)$")


# Prepositions and conjunctions: opening a sentence, capitalised by their place (`_name_start`).
_OPENERS = ("in", "on", "at", "for", "of", "and", "but", "or", "if", "when", "while", "after", "before", "during",
            "as", "by", "with", "from", "to", "into")
# Closed-class words that open sentences capitalised without naming anything.
_FUNCTION_WORDS = frozenset({
    "a", "an", "the", "this", "that", "these", "those", "it", "its", "he", "she", "his", "her", "they",
    "their", "them", "we", "our", "you", "your", "i", "nor", "there", "here", "what", "which", "who", "whom",
    "whose", "where", "why", "how", "all", "each", "every", "some", "no", "not", "one", *_OPENERS
})
# Words that say a time is given without saying which ("after the war").
_RELATIVE = ("before", "after", "during", "until", "since", "ago")
_RELATIVE_WORDS = "|".join(_RELATIVE)
_NAMES = re.compile(_NAME)
# Where one name ends and the next begins inside a run of capitalised words.
_NAME_ENDS = re.compile(r"['’]s\b\s*|\s+and\s+")


def names_in(text: str) -> list[str]:
    """The names a text gives: capitalised word runs, identifiers and code spans, without a
    closed-class word that merely opens a sentence ("The", "It")."""
    found = []
    for m in _NAMES.finditer(text):
        # A possessive ends a name ("Ezer Weizman's resignation" names Ezer Weizman), and "and"
        # joins two ("Valerie Hobson and Alan Hale"), so each can lead to the document about it.
        # A code span is one name whatever it holds.
        parts = [m.group(0)] if m.group(0).startswith("`") else _NAME_ENDS.split(m.group(0))
        for part in parts:
            value = part.strip("` ")
            if len(value) > 2 and value.casefold() not in _FUNCTION_WORDS:
                found.append(value)
    return found


def is_person_name(text: str) -> bool:
    """Whether `text` is written as a person's name: two or more capitalised words ("Dario
    Feltham", "Mélanie Watt"), its particles and initials included."""
    return re.fullmatch(_PERSON, text.strip()) is not None


@dataclass(frozen=True)
class AnswerType:
    name: str  # as a sentence says it: "a time"
    question: re.Pattern[str]  # the question openings that ask for it
    answer: re.Pattern[str]  # what a sentence giving it contains
    # Whether an answer must give one: a time, a sum, a duration or an amount is checkable by its
    # form; a person, place or name is only a reading aid (capitalised words are everywhere).
    required: bool = True
    # What a sentence says just before a value of this type when it states one plainly ("born
    # in Leeds", "died at Salinas"): such values come first of a sentence's.
    cue: re.Pattern[str] | None = None
    # The forms that ask where the answer would stand ("… founded by who?"): read only when no
    # type's opening matches, so "Who won in 1999 and how many times?" still asks for a person.
    in_place: re.Pattern[str] | None = None
    # Whether its values are names (a person, a place, a name): a date ("May 1900", "June 20")
    # is capitalised like one but names nothing.
    names: bool = False
    # Whether a value may be a run of places, the most specific first ("Portland, Oregon"), of
    # which the question asks for one (`place_part`).
    nested: bool = False

    def asked_by(self, question: str, in_place: bool = False) -> bool:
        """Whether `question` asks for this type by its opening, or with `in_place` where the
        answer would stand."""
        pattern = self.in_place if in_place else self.question
        return pattern is not None and pattern.search(question) is not None

    def given_by(self, text: str) -> bool:
        return self.answer.search(text) is not None

    def values(self, text: str, asked: frozenset[str] = frozenset()) -> list[str]:
        """The values of this type in `text` that the question does not already say (`asked`:
        its words, casefolded), those stated plainly after the type's cue first ("died in Los
        Angeles"): what a sentence answers with."""
        return cued_first(self.found(text, asked))

    def found(self, text: str, asked: frozenset[str] = frozenset()) -> list[tuple[bool, str]]:
        """The values of `values` in the order `text` gives them, each with whether it is stated
        plainly, after the type's cue."""
        said = {w for a in asked for w in re.findall(r"\w+", a.casefold())}
        found = []
        for run, end in self._runs(text):
            # A preposition opening a sentence is capitalised by its place, not as part of a name
            # ("In London, …"), nor is it the value's cue; inside a sentence it opens a title
            # ("starred in On the Waterfront").
            opens = self.names and _OPENING.search(text, 0, run) is not None
            if (start := _name_start(text, run, end) if opens else run) < 0:
                continue
            value = text[start:end].strip("` ").rstrip(".,;:")
            if self.names:  # "Kim Jong-il's wife" names Kim Jong-il
                value = re.sub(r"['’]s$", "", value)
            words = {w.casefold() for w in re.findall(r"\w+", value)}
            opening = re.fullmatch(rf"{_UP}(?:{_LOW}|['’])*", value) is not None and _OPENING.search(text, 0, start)
            dated = self.names and _DATE.fullmatch(value) is not None
            if value and not words <= said and not opening and not dated:
                found.append((self.cue is not None and self.cue.search(text, 0, run) is not None, value))
        return found

    def _runs(self, text: str) -> list[tuple[int, int]]:
        """The spans of the answer pattern, adjacent ones (a space or a comma apart) joined:
        "12 May 2025" is one date, not three values."""
        runs: list[tuple[int, int]] = []
        for m in self.answer.finditer(text):
            if m.end() == m.start():
                continue
            # A code span is a value of its own ("Replace `msg-outbound`" is no name).
            if (runs and re.fullmatch(r"[ ,]{1,2}", text[runs[-1][1]:m.start()])
                    and "`" not in (text[m.start()], text[runs[-1][1] - 1])):
                runs[-1] = (runs[-1][0], m.end())
            else:
                runs.append((m.start(), m.end()))
        return runs


# The levels of a run of places, the most specific first: a town is the run's first part, a
# country its last, a county or a state the part that says so, else the part after the first.
_TOWNS = frozenset({"city", "town", "village"})
_COUNTRIES = frozenset({"country", "nation"})
_LEVELS = ("county", "state", "province", "region", "district")


def place_part(value: str, asked: frozenset[str]) -> str:
    """The part of a run of places ("Brooklyn, New York, United States") that the question's
    words (`asked`, casefolded) ask for: the level it names ("what state" -> "New York"), else
    the most specific, its first ("Where was she born?" -> "Brooklyn"). A run also joins a place
    to the name after its comma ("A native of Florence, Soffici moved …"), which the first part
    leaves out."""
    parts = [p.strip() for p in value.split(",") if p.strip()]
    if len(parts) < 2 or asked & _TOWNS:
        return parts[0] if parts else value
    if asked & _COUNTRIES:
        return parts[-1]
    level = next((w for w in _LEVELS if w in asked), None)
    if level is None:
        return parts[0]
    return next((p for p in parts if level in p.casefold()), parts[1])


# Words that open a capitalised run without being part of a name: "On December 28 …" opens with
# a preposition, "In 2010 Piraeus handled …" with one and a year, "At the University of …" with
# one and an article.
_OPENED_BY = re.compile(rf"(?:(?:{'|'.join(w.capitalize() for w in _OPENERS)})\s+)+(?:(?:the|[0-9][\w'’&-]*)\s+)*")


def says_which(value: str) -> bool:
    """Whether a value found says which one ("1842"), not only that there is one ("after",
    "during"): a sentence with either gives a time, but only the first is a short answer."""
    return value.casefold() not in (*_RELATIVE, "every")  # "every" alone, without its period


def _name_start(text: str, start: int, end: int) -> int:
    """Where the name in the capitalised run `text[start:end]` starts: after the preposition
    (and the article or numbers after it) that opened it ("On December …", "In 2010 Piraeus …",
    "At the University of Vienna"); -1 when nothing capitalised follows them ("In 1934", "In the
    1950s" name nothing)."""
    lead = _OPENED_BY.match(text, start, end)
    if lead is None:
        return start
    return lead.end() if re.match(_UP, text[lead.end():end]) else -1


def year_part(value: str, asked: frozenset[str]) -> str:
    """The year of a date (`value`) when the question's words (`asked`, casefolded) ask for a
    year: "In what year …?" is answered "1924", not "15 June 1924"."""
    years = re.findall(r"(?<![\d-])\d{4}(?![\d-])", value)
    return years[0] if "year" in asked and len(years) == 1 and years[0] != value else value


def cued_first(found: list[tuple[bool, str]]) -> list[str]:
    """The values of `AnswerType.found`, those stated after the type's cue first."""
    return [value for _, value in sorted(found, key=lambda x: not x[0])]


def _copula(nouns: str) -> str:
    """The pattern of "What is the <noun> of …" for one of `nouns`: the noun after up to three
    modifiers ("the daily cut-off time for …", "the maximum number of …") and before a
    preposition, a relative or the question's end."""
    return (rf"^\W*what\s+(?:is|was|are|were)\s+the\s+(?:[\w'’-]+\s+){{0,3}}?(?:{nouns})"
            r"(?:\s+(?:of|for|in|on|at|to|from|between|that|which|when|where|whose)\b|\W*$)")


_PLACES = "city|country|state|region|town|county|province|village|place|continent|location"

TYPES = (  # the first whose opening pattern matches applies, else the first whose in-place one does
    AnswerType(
        "a time",
        re.compile(r"^\W*(?:(?:since|until|by|from|in|on|at|during)\s+)?(?:when\b|(?:what|which)\s+"
                   r"(?:year|date|day|month|decade|century|time)\b)"
                   r"|\b(?:what|which)\s+(?:year|date|decade|century)\b"  # "… formed in what year?"
                   r"|" + _copula("year|date|day|month|decade|century|time|deadline|cut-?off"), re.I),
        re.compile(rf"{_NUMBER}|\b(?-i:{_MONTHS})\b|\b(?:{_PERIODS}|{_RELATIVE_WORDS}|century|decade)\b",
                   re.I),
        in_place=re.compile(r"\bwhen\W*$", re.I),  # "… first developed when?"
    ),
    AnswerType(
        "a sum of money",
        re.compile(r"^\W*(?:how\s+much\b.*\b(?:cost|costs|price|pay|paid|spend|spent|charge|charged|earn|earned"
                   r"|worth)\b|what\s+(?:does|do|did|will|would)\b.*\bcost\b|what\s+(?:is|was|are|were)\s+the\s+"
                   r"(?:cost|price|fee|fees|budget|salary|revenue)\b)", re.I),
        re.compile(_CURRENCIES, re.I),
    ),
    AnswerType(
        "a duration or length",
        re.compile(r"^\W*(?:(?:for|by|in)\s+)?how\s+(?:long|quickly|soon)\b"
                   r"|" + _copula("period|duration|interval|window|lifetime|timeout|length"), re.I),
        re.compile(rf"(?:{_NUMBER}|\b(?:{_NUMBER_WORDS}|a|an)\b)\s*-?\s*(?:{_UNITS})\b"
                   r"|\b(?:indefinitely|forever|permanently)\b", re.I),
    ),
    AnswerType(
        "an amount",
        re.compile(r"^\W*(?:(?:for|by|in|to)\s+)?how\s+(?:many|much|often|old|far|big|large|tall|high|fast|heavy"
                   r"|deep|wide)\b|"
                   r"^\W*what\s+(?:percentage|proportion|share|number)\s+of\b"
                   r"|" + _copula("percentage|proportion|share|number|population|count|amount|total"), re.I),
        re.compile(rf"{_NUMBER}|\b(?:{_NUMBER_WORDS}|{_PERIODS}|no|none|all)\b", re.I),
        in_place=re.compile(r"\bhow\s+many\b", re.I),  # "… has how many districts?"
    ),
    AnswerType(
        "a person",
        re.compile(r"^\W*(?:(?:by|to|with|for|from)\s+)?(?:who|whom|whose)\b", re.I),
        re.compile(_PERSON),
        required=False,
        in_place=re.compile(r"\b(?:who|whom)\W*$", re.I),  # "… founded by who?"
        names=True,
    ),
    AnswerType(
        "a place",
        re.compile(rf"^\W*(?:(?:in|at|from|to)\s+)?(?:where\b|(?:which|what)\s+(?:{_PLACES})\b)"
                   r"|" + _copula(_PLACES + "|birthplace|hometown"), re.I),
        re.compile(_NAME),
        required=False,
        # "… based in what state?", "… born where?"
        in_place=re.compile(r"\b(?:in|from|at|of|to)\s+(?:what|which)\s+(?:[\w-]+\s+){0,2}?(?:city|country|state"
                            r"|region|town|county|province|village|continent)\W*$|\bwhere\W*$", re.I),
        cue=re.compile(r"\b(?:in|at|from|near)\s+(?:the\s+)?$", re.I),
        names=True,
        nested=True,
    ),
    AnswerType(
        "a nationality",
        re.compile(r"^\W*(?:what|which)\s+(?:nationality|citizenship)\b|" + _copula("nationality|citizenship"), re.I),
        # A proper adjective: a capitalised word before a common noun ("a Swedish actor").
        re.compile(rf"\b{_UP}{_LOW}+(?:-{_UP}{_LOW}+)*(?=\s+{_LOW})"),
        required=False,
        # What a description says just before it: "… is an American director", "was a 1949 British film".
        cue=re.compile(r"\b(?:is|was|are|were)\s+(?:an?\s+|the\s+)?(?:\d{4}\s+)?$", re.I),
        names=True,
    ),
    AnswerType(
        "a name",
        re.compile(r"^\W*(?:(?:in|at|from|to|on|by|for|of|with|under)\s+)?(?:which|what)\s+(?!(?:is|was|are|were|does"
                   r"|do|did|has|have|had|can|could|will|would|should|must|may|might|shall|happen\w*|went|goes"
                   r"|caus\w*|made|makes?|kind|sort|type)\b)[a-z]"
                   r"|" + _copula("name|title")
                   # "What is the queue called …?"
                   + r"|^\W*what\s+(?:is|was|are|were)\s+(?:the\s+)?(?:[\w'’-]+\s+){1,4}?called\b", re.I),
        re.compile(_NAME),
        required=False,
        # "… the wife of what singer?": "what" or "which" and its noun ending the question, not opening it;
        # or inside it, before a word that is no verb or pronoun ("… starred which Canadian actress, known …?")
        in_place=re.compile(r"(?<=[\w'’\")]\s)(?:what|which)\s+(?:[\w'’-]+\s+){0,3}[\w'’-]+\W*$"
                            r"|(?<=[a-z]\s)(?:which|what)\s+(?!(?:is|was|are|were|does|do|did|has|have|had|can|could"
                            r"|will|would|should|may|might|must|he|she|it|they|we|you|i)\b)[A-Za-z]", re.I),
        names=True,
    ),
)


# Words that open a clause leading up to the question rather than asking it ("If an engineer
# uses …, who …?", "Before the change …, how long …?", "According to the runbook, how long …?",
# "In the country …, what percentage …?").
_LEADING = re.compile(
    r"^\W*(?:if|when|whenever|before|after|once|given|besides|between|since|while|although|though|unless|until"
    r"|during|according\s+to|apart\s+from|except|other\s+than|as\s+for|in|on|at|for|from|under|with|without|of|among)\b",
    re.I)


def _asking_clause(question: str) -> str:
    """The part of a question that asks: its last sentence ("INC-2291 took a system down. Who
    leads …?"), and within it the clause after the last comma when a leading clause comes first
    ("Given the severity, what deadline …?"); a comma clause after anything else is a relative
    or an apposition ("Amy Johnson, whose life …"), which asks nothing."""
    sentence = re.split(r"(?<=[.?])\s+(?=[A-Z])", question.strip())[-1]
    commas = list(re.finditer(r",\s+", sentence))
    return sentence[commas[-1].end():] if commas and _LEADING.match(sentence) else sentence


def expected_type(question: str) -> AnswerType | None:
    """The answer type the asking clause's opening asks for (`_asking_clause`), else the
    question's opening, else what either asks in place (`AnswerType.in_place`), or None."""
    texts = dict.fromkeys((_asking_clause(question), question))
    for in_place in (False, True):
        for text in texts:
            if found := next((t for t in TYPES if t.asked_by(text, in_place)), None):
                return found
    return None
