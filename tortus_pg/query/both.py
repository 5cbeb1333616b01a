"""Questions of membership: "Are A and B both board games?", "Are both magazines, A and B,
British publications?", answered yes or no.

Such a question opens with a form of "to be", names its two options joined by "and", and says
after "both" (or after the options, when "both" and what they are lead) the kind the two would
both be. Each option's description is read from the first sentences about it (`compare.holders`):
the answer is yes when a sentence of each states every content word of the kind ("Senet is a
board game from ancient Egypt"), no when either's does not ("a Hungarian and Austrian film
director" is no "American director"); the two sentences are quoted. An option no evidence is
about, no verdict. Questions of a shared origin ("… the same country?") are `query.same`'s.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from tortus_pg.query.compare import holders
from tortus_pg.query.read import Sentence
from tortus_pg.query.same import READ, Verdict

_BE = re.compile(r"^(?:are|were)\s+(?P<body>.+?)\s*\?\s*$", re.I)
# "A and B both C": the kind follows "both".
_AFTER = re.compile(r"\s+both\s+")
# "both magazines, A and B, C": lower-case words and a comma lead, a comma closes the options.
_LEAD = re.compile(r"^both\s+(?:[a-z]+\s+)*[a-z]+,\s+")
_ARTICLE = re.compile(r"^(?:the|a|an)\s+", re.I)


@dataclass(frozen=True)
class Membership:
    """The two options a yes/no question asks about and the kind they would both be."""

    options: tuple[str, str]
    kind: str  # "board games", "British publications" …
    role: None = None  # compared as themselves, never through a role


def membership_of(question: str) -> Membership | None:
    """The membership a yes/no question asks about; None for any other question (a question of a
    shared origin or place, "the same …", included)."""
    found = _BE.match(question.strip())
    if found is None or re.search(r"\bsame\b", question, re.I):
        return None
    body = found.group("body")
    if (after := _AFTER.search(body)) is not None:
        pair, kind = body[:after.start()], body[after.end():]
    elif (lead := _LEAD.match(body)) is not None:
        pair, _, kind = body[lead.end():].rpartition(", ")
    else:
        return None
    split = re.search(r"\s+and\s+", pair)
    if split is None or not kind.strip():
        return None
    first, second = (_ARTICLE.sub("", p.strip(" ,")) for p in (pair[:split.start()], pair[split.end():]))
    if not first or not second:
        return None
    return Membership((first, second), kind.strip(" ,"))


def judge(membership: Membership, kind: frozenset[str], sentences: Sequence[Sentence], labels: Sequence[str],
          own: Sequence[set[str]]) -> Verdict | None:
    """Whether a sentence about each option (of the first READ, `holders`) states every lexeme of
    the `kind` (the sentences' lexemes `own`): for each option the sentence that does, else its
    first; None when the evidence is about one of the options nowhere or the kind has no content
    word."""
    if not kind:
        return None
    found = []
    for option in membership.options:
        about = holders(option, None, sentences, labels)[:READ]
        if not about:
            return None
        found.append(next(((j, True) for j in about if kind <= own[j]), (about[0], False)))
    (first, a), (second, b) = found
    return Verdict(a and b, (first, second))
