"""Questions of sameness: "Are A and B located in the same country?", "Do both films A and B
have directors of the same nationality?", answered yes or no.

Such a question opens with an auxiliary ("Are", "Do", "Were" …), names its two options joined
by "and" and ends by "the same" and what they would share: a country or a nationality (an
origin). Lower-case words around the options say what they are ("both villages", "the
directors of both films"); a role among them ("director") moves the comparison to the person
each option names in that role, as comparisons do (`query.compare`). The origin of each is read
from the first sentences about it: the proper adjective of its description ("is a 1949 British
crime film", "was a Brazilian-born director"), else the places its sentence names ("is a village
in Marvdasht County, Fars Province, Iran"). The answer is yes when the two share one (the same
adjective, a place in common), no when they share none; the two sentences giving them are
quoted. Either origin not found, no verdict.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from tortus_pg.query.compare import ROLE_WORDS, holders
from tortus_pg.query.read import MAX_CLAIMS, Reading, Sentence

# What an origin answers. Not a state or a city: two places sharing their country share no
# state for that, and a place in common is how origins are matched.
ORIGINS = frozenset({"country", "nationality", "citizenship", "origin"})
_SAME = re.compile(r"^(?:are|were|is|was|do|does|did)\s+(?P<both>.+?),?\s+(?:the\s+)?same\s+(?P<what>\w+)\s*\??\s*$",
                   re.I)
# The lower-case words before the first option ("both villages,") and after the second ("located in").
_LEADING = re.compile(r"^(?:[a-z]+[,:]?\s+)+")
_TRAILING = re.compile(r"(?:,?\s+[a-z]+)+,?$")
# A description's proper adjective: "is a 1949 British crime film", "was a Danish-born composer".
_ADJECTIVE = re.compile(r"\b(?:is|was|are|were)\s+(?:an?\s+|the\s+)?"
                        r"(?:(?:\d{4}|(?!(?:in|of|from|at|on|by)\b)[a-z]+)\s+){0,2}"
                        r"(?P<origin>[A-Z][\w'’]*(?:[\s-]+[A-Z][\w'’]*)*)(?:-\s?born)?\s+[a-z]")
# A place named after a comma, "in" or "of", with up to two words between ("in south west
# England", "…, Fars Province, Iran").
_PLACE = re.compile(r"(?:,\s+|\b(?:in|of)\s+)(?:[a-z]+\s+){0,2}"
                    r"(?P<place>[A-Z][\w'’-]*(?:\s+(?:(?:and|of|do|de|del|da)\s+)?[A-Z][\w'’-]*)*)")
_ROLE = re.compile(rf"\b({ROLE_WORDS})s?\b", re.I)
READ = 2  # sentences about an option read for its origin


@dataclass(frozen=True)
class Sameness:
    """The two options a yes/no question compares, what they would share, and through which role."""

    options: tuple[str, str]
    shared: str  # "country", "nationality" …
    role: str | None


@dataclass(frozen=True)
class Verdict:
    """Whether the options share it, and for each option the sentence giving its origin."""

    same: bool
    sentences: tuple[int, int]  # indices into the sentences read, in the options' order


def sameness_of(question: str) -> Sameness | None:
    """The sameness a yes/no question asks about an origin; None for any other question."""
    found = _SAME.match(question.strip())
    if found is None or found.group("what").casefold() not in ORIGINS:
        return None
    both = found.group("both")
    leading, trailing = _LEADING.match(both), _TRAILING.search(both)
    start, end = leading.end() if leading else 0, trailing.start() if trailing else len(both)
    middle = both[start:end]
    split = re.search(r"\s+and\s+", middle) or re.search(r"\s+and\s+", middle, re.I)
    if split is None:
        return None
    first, rest = middle[: split.start()].strip(" ,"), middle[split.end():]
    second_lead = _LEADING.match(rest)
    lead = second_lead.end() if second_lead else 0
    second = rest[lead:].strip(" ,")
    if not first or not second:
        return None
    said = " ".join([both[:start], rest[:lead], both[end:]])
    role = _ROLE.search(said)
    return Sameness((first, second), found.group("what").casefold(), role.group(1).casefold() if role else None)


def origin(text: str) -> frozenset[str]:
    """The origin a sentence gives: its description's proper adjective, else the places it names
    (a town, its county, state and country), folded; empty when it gives none."""
    adjective = _ADJECTIVE.search(text)
    found = [adjective.group("origin")] if adjective is not None else [m.group("place") for m in _PLACE.finditer(text)]
    return frozenset(" ".join(re.split(r"[\s-]+", o.casefold())) for o in found)


def judge(sameness: Sameness, sentences: Sequence[Sentence], labels: Sequence[str]) -> Verdict | None:
    """Whether the evidence (`sentences`, the evidence items' heading paths `labels`) gives both
    options the same origin; None when it gives either none."""
    found = []
    for option in sameness.options:
        about = holders(option, sameness.role, sentences, labels)[:READ]
        given = next(((j, o) for j in about if (o := origin(sentences[j].text))), None)
        if given is None:
            return None
        found.append(given)
    (first, a), (second, b) = found
    # Places are named at different depths ("Natchitoches, Louisiana, United States" and "Verona,
    # Essex County, New Jersey, United States"): one in common is the same origin.
    return Verdict(bool(a & b), (first, second))


def lead_with_verdict(reading: Reading, verdict: Verdict | None) -> Reading:
    """The reading of a yes/no question (`judge` here, `query.both.judge`): the two sentences the
    verdict rests on lead the quotes (then the reader's own), the first answers with the verdict;
    the reading unchanged without a verdict."""
    if verdict is None:
        return reading
    first, second = verdict.sentences
    quoted = list(dict.fromkeys([first, second, *reading.chosen]))[:MAX_CLAIMS]
    return Reading(quoted, first, "yes" if verdict.same else "no", reading.covered, "Yes" if verdict.same else "No")
