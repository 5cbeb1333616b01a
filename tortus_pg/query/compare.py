"""Comparison questions: which of two named things comes first, lasts longer, has more.

"Who was born first, Pablo Trapero or Aleksander Ford?" names its two options after a comma (or
a colon), "Does A or B have more engineers?" before its verb, and asks by a comparative: earlier
(first, older, sooner), later (more recently, younger, last), more (larger, longer, higher) or
fewer. The evidence about each option is the evidence item whose heading path names it (else the
sentences that do; else, for an option described rather than named, the document that says most
of what sets it apart from the other); the compared value is read from it: a year for the time
comparatives (the second year of a "(1900 – 1970)" life span when the question asks who died
first), the first duration for how long each lasted (in seconds: "2 h 14 min" against "5 hours
40 minutes"), a number next to a question word for the others (in digits or in words). When
the question compares what an option stands in a role to ("Which film has the director born
earlier, A or B?"), the value is read from the evidence about the person that option's own
sentence with the role names. The option with the earlier, later, larger or smaller value is
the short answer, and the sentences giving both values are quoted.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from tortus_pg.answer_type import TIME_UNITS, names_in
from tortus_pg.query.read import DEATH, MAX_CLAIMS, Page, Reading, Sentence


class Order(Enum):
    """What the comparative asks for."""

    EARLIER = "earlier"
    LATER = "later"
    MORE = "more"
    FEWER = "fewer"


_COMPARATIVES: tuple[tuple[Order, str], ...] = (
    (Order.LATER, r"more recent(?:ly)?|most recent(?:ly)?|later|latest|last|younger|youngest|newer|newest"),
    (Order.EARLIER, r"first|earlier|earliest|older|oldest|sooner|before"),
    (Order.FEWER, r"fewer|less|least|smaller|smallest|shorter|shortest|lower|lowest"),
    (Order.MORE, r"more|most|larger|largest|longer|longest|bigger|biggest|higher|highest|taller|tallest|greater"),
)
# "…, A or B?" / "…: A or B?" / "… first A or B?": the options end the question (the second
# may hold a comma or a colon: "Believe Me, Xantippe"); or "Was A or B born first?".
_OPTIONS = (
    re.compile(r"(?:[,:]|\b(?:first|earlier|later|older|younger|more|larger|longer))\s+"
               r"(?P<a>[^,:?]+?),?\s+or\s+(?P<b>[^?]+?)\s*\??\s*$", re.I),
    # "Was A or B born first?", "Does A or B have more engineers?": a verb, the comparative, and
    # what is compared.
    re.compile(r"^(?:was|were|is|are|did|does|do|has|had)\s+(?P<a>[^?]+?)\s+or\s+(?P<b>[^?]+?)\s+"
               r"(?P<asking>(?:[a-z]+\s+)?(?:first|earlier|later|older|younger|more|less|fewer|longer|shorter|larger"
               r"|smaller|bigger|higher|lower)(?:\s+[\w'-]+){0,3})\s*\?\s*$", re.I),
)
# The comparatives that ask how long something lasted: a duration is the value compared.
_LASTING = re.compile(r"\b(?:last|lasted|lasts|lasting)\b", re.I)
# Roles a compared value may belong to instead of the option itself ("the director", "whose
# director"): not the thing asked about ("What author …").
ROLE_WORDS = ("director|composer|author|writer|producer|performer|creator|founder|father|mother|spouse|husband|wife"
              "|singer|lyricist|editor|screenwriter|architect|designer")
_ROLES = re.compile(rf"\b(?:the|whose|its|their)\s+({ROLE_WORDS})\b", re.I)
_YEAR = re.compile(r"(?<!\d)(?<!\d[,.])(1[0-9]{3}|20[0-9]{2})(?!\d|[,.]\d)")
# A number, with its thousands separated or not ("1,250", "5, the lead included"), not a digit
# inside an identifier ("kestrel-3", "E-1042"), or a count written in words ("eight of us");
# "one" is left out, as it is mostly a pronoun ("one of the …").
_TEENS = ("two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve", "thirteen",
          "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty")
_TENS = ("thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
_COUNTS = {w: n for n, w in enumerate(_TEENS, start=2)} | {w: 30 + 10 * n for n, w in enumerate(_TENS)} | {"dozen": 12}
_NUMBER = re.compile(r"(?<![\w.-])\d{1,3}(?:,\d{3})+(?:\.\d+)?|(?<![\w.,-])\d+(?:\.\d+)?(?!\w|,\d|-\w)"
                     rf"|\b(?:{'|'.join(_COUNTS)})\b", re.I)
# Units of time, in seconds: "2 h 14 min" and "5 hours 40 minutes" are durations to compare.
_SECONDS = {"ms": 0.001, "millisecond": 0.001, "s": 1, "sec": 1, "second": 1, "min": 60, "minute": 60, "h": 3600,
            "hr": 3600, "hour": 3600, "day": 86400, "week": 604800, "month": 2629800, "year": 31557600}
_DURATION = re.compile(rf"(?P<n>{_NUMBER.pattern})\s*(?P<unit>{TIME_UNITS})\b(?:\s*(?:,|and)?\s*(?=\d))?", re.I)


@dataclass(frozen=True)
class Comparison:
    """The two options a question compares, by which comparative, and of what."""

    options: tuple[str, str]
    order: Order
    death: bool  # the time compared is a death
    role: str | None  # the value belongs to the option's person in this role
    lasting: bool = False  # it asks how long each lasted: a duration is the value compared


@dataclass(frozen=True)
class Described:
    """The lexemes an option no evidence names is found by: each option's own, and the title's of
    each evidence document (its heading path's first part)."""

    options: tuple[set[str], set[str]]
    titles: Mapping[str, set[str]]


@dataclass(frozen=True)
class Pick:
    """The option chosen, and for each option the sentence giving its value."""

    option: str
    sentences: tuple[int, int]  # indices into the sentences read, in the options' order


def comparison_of(question: str) -> Comparison | None:
    """The comparison a "…, A or B?" question asks for; None for any other question."""
    text = question.strip()
    found = next((m for m in (p.search(text) for p in _OPTIONS) if m is not None), None)
    if found is None:
        return None
    asking = (found.group("asking") if "asking" in found.groupdict() else text[: found.start("a")]).casefold()
    order = next((o for o, words in _COMPARATIVES if re.search(rf"\b(?:{words})\b", asking)), None)
    if order is None:
        return None
    role = _ROLES.search(asking)
    # "the Pterocarya": a lowercase article is not part of the name; "The Exies" keeps its own.
    options = (found.group("a").strip().removeprefix("the "), found.group("b").strip().removeprefix("the "))
    death = bool(DEATH & set(re.findall(r"\w+", asking)))
    return Comparison(options, order, death, role.group(1).casefold() if role else None,
                      _LASTING.search(asking) is not None)


def pick(comparison: Comparison, page: Page, weights: Mapping[str, float],
         described: Described | None = None) -> Pick | None:
    """Choose between the options by the value the evidence (`page`) gives each, for a question
    of term `weights`; `described`, to find an option the evidence does not name ("the March 2024
    customs backlog") by the document that says most of it. None when either value is missing,
    they are of different kinds (a duration and a count), or they tie."""
    found = [_value(comparison, n, page, weights, described) for n in range(2)]
    if found[0] is None or found[1] is None or found[0][1] == found[1][1] or found[0][2] != found[1][2]:
        return None
    (first, a, _), (second, b, _) = found[0], found[1]
    earlier_first = a < b
    wants_first = earlier_first if comparison.order in (Order.EARLIER, Order.FEWER) else not earlier_first
    return Pick(comparison.options[0 if wants_first else 1], (first, second))


def _value(comparison: Comparison, n: int, page: Page, weights: Mapping[str, float],
           described: Described | None) -> tuple[int, float, bool] | None:
    """The sentence giving the nth option's compared value (through its person in the asked role
    when there is one), the value, and whether it is a duration: for how long something lasted, the
    first sentence about the option giving a duration (in seconds), whatever words it shares."""
    sentences, labels = page.sentences, page.labels
    about = holders(comparison.options[n], comparison.role, sentences, labels)
    if not about and comparison.role is None and described is not None:
        about = _described(described.options[n] - described.options[1 - n], described.titles, page, weights)
    if comparison.lasting:
        lasted = next(((j, d) for j in about if (d := duration(sentences[j].text)) is not None), None)
        if lasted is not None:
            return lasted[0], lasted[1], True
    for j in about:
        value = _read(comparison, sentences[j].text, weights, page.own[j])
        if value is not None:
            return j, value, False
    return None


def _described(words: set[str], titles: Mapping[str, set[str]], page: Page, weights: Mapping[str, float]) -> list[int]:
    """The sentences of the document an option no evidence names describes: the one whose
    sentences and headings say the largest share of what sets the option apart (`words`, its
    lexemes the other option does not have), then whose title says most of it (a document is
    about what its title says), when no other document says as much."""
    docs: dict[str, set[str]] = {}
    for j, s in enumerate(page.sentences):
        docs.setdefault(document(page.labels[s.evidence]), set()).update(page.own[j] | page.context[j])

    def said(lexemes: set[str]) -> float:
        return sum(weights.get(t, 0.0) for t in words & lexemes)

    ranked = sorted(((said(found), said(titles.get(doc, set())), doc) for doc, found in docs.items()), reverse=True)
    if not ranked or not ranked[0][0] or (len(ranked) > 1 and ranked[1][:2] == ranked[0][:2]):
        return []
    return [j for j, s in enumerate(page.sentences) if document(page.labels[s.evidence]) == ranked[0][2]]


def document(label: str) -> str:
    """The document of an evidence item: its heading path's first part."""
    return label.split(" > ")[0]


def holders(option: str, role: str | None, sentences: Sequence[Sentence], labels: Sequence[str]) -> list[int]:
    """The sentences about `option` (`_about`); with a `role`, about the person the option's own
    sentences name in that role ("directed by …", the names after the role's word first), read
    from the evidence about that person, not from the option's: a person an evidence item is
    titled by first ("American" in "an American film directed by …" is mentioned elsewhere, but
    titles nothing)."""
    about = _about(option, sentences, labels)
    if role is None:
        return about
    stem, own_items = role[:5], {sentences[j].evidence for j in about}
    people = [n for j in about for n in _in_role(sentences[j].text, stem) if n.casefold() != option.casefold()]
    elsewhere = [[j for j in _about(n, sentences, labels) if sentences[j].evidence not in own_items] for n in people]
    titled = [found for n, found in zip(people, elsewhere, strict=True)
              if found and in_heading(n, labels[sentences[found[0]].evidence])]
    return next((found for found in [*titled, *elsewhere] if found), [])


def role_sentence(option: str, role: str, sentences: Sequence[Sentence], labels: Sequence[str]
                  ) -> tuple[int, list[str]] | None:
    """The first of `option`'s sentences (`_about`) naming someone in `role`, with the names it
    gives (after the role's word first); None when none does."""
    for j in _about(option, sentences, labels):
        names = [n for n in _in_role(sentences[j].text, role[:5]) if n.casefold() != option.casefold()]
        if names:
            return j, names
    return None


def _in_role(text: str, stem: str) -> list[str]:
    """The names a sentence saying the role (its word's `stem`) gives, those after the role's word
    first ("produced by Ray Stark, directed by Herbert Ross" names Herbert Ross as director)."""
    at = text.casefold().find(stem)
    return [] if at < 0 else [*names_in(text[at:]), *names_in(text[:at])]


def in_heading(name: str, label: str) -> bool:
    """Whether `name` is said in the heading path `label` ("Gordon Douglas" in "Gordon Douglas
    (director)"), ignoring case and a leading "the"."""
    return name.casefold().removeprefix("the ") in label.casefold()


def titles(name: str, label: str) -> bool:
    """Whether `name` heads the evidence item with heading path `label` (is one of its parts,
    ignoring case and a leading "the"): its document's title or a section's."""
    bare = name.casefold().removeprefix("the ")
    return any(part.strip().removeprefix("the ") == bare for part in label.casefold().split(" > "))


def _about(name: str, sentences: Sequence[Sentence], labels: Sequence[str]) -> list[int]:
    """The sentences about `name`: those of an evidence item its heading path names (in order),
    else those that mention it."""
    titled = [j for j, s in enumerate(sentences) if titles(name, labels[s.evidence])]
    titled = titled or [j for j, s in enumerate(sentences) if in_heading(name, labels[s.evidence])]
    return titled or [j for j, s in enumerate(sentences) if in_heading(name, s.text)]


def _read(comparison: Comparison, text: str, weights: Mapping[str, float], own: set[str]) -> float | None:
    """The compared value a sentence gives: a year for time comparisons (a death's year is the
    second of a life span), else a number, in a sentence sharing a question word."""
    if comparison.order in (Order.EARLIER, Order.LATER):
        years = [int(y) for y in _YEAR.findall(text)]
        if comparison.death:
            return float(years[1]) if len(years) > 1 else None
        return float(years[0]) if years else None
    if not own & weights.keys():
        return None
    numbers = [n for n in _NUMBER.findall(text) if not _YEAR.fullmatch(n)]  # a year is not an amount
    return _number(numbers[0]) if numbers else None


def duration(text: str) -> float | None:
    """The first duration `text` gives, in seconds, its parts added up ("2 h 14 min", "5 hours
    40 minutes"); None when it gives none."""
    total, end = None, -1
    for m in _DURATION.finditer(text):
        if total is not None and m.start() != end:
            break
        unit = m.group("unit").casefold()
        seconds = _SECONDS.get(unit) or _SECONDS[unit.removesuffix("s")]
        total, end = (total or 0.0) + _number(m.group("n")) * seconds, m.end()
    return total


def _number(written: str) -> float:
    return float(_COUNTS.get(written.casefold()) or written.replace(",", ""))


def lead_with_pick(reading: Reading, comparison: Comparison, page: Page, weights: Mapping[str, float],
                   described: Described | None = None) -> Reading:
    """The reading of a comparison question: the two sentences giving the compared values lead
    the quotes (then the reader's own), and the option they favour is the short answer and the
    verdict the answer states first; the reading unchanged when the evidence does not give both
    values."""
    chosen = pick(comparison, page, weights, described)
    if chosen is None:
        return reading
    first, second = chosen.sentences
    quoted = list(dict.fromkeys([first, second, *reading.chosen]))[:MAX_CLAIMS]
    answer = first if chosen.option == comparison.options[0] else second
    covered = reading.covered | {t for j in (first, second) for t in page.own[j] if t in weights}
    return Reading(quoted, answer, chosen.option, frozenset(covered), chosen.option)
