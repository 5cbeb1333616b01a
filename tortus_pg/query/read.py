"""Reading an evidence chain: which sentences answer the question, and the short answer.

A multi-hop answer is a chain of statements: the one that matches the question names a bridge
("Waypoint keeps its orders on kestrel-3"), and the statement about that bridge says what is
asked ("kestrel-3 is backed up to s3://…"). The reader scores every sentence of the evidence:

- `lexical`: the share of the question's weight (IDF) the sentence covers, read in the context
  of its heading path, when it shares at least one question term itself;
- `typed`: it holds a value of the asked type (a time, an amount, a person, a name …) that the
  question does not already say;
- `dense`: its embedding's cosine similarity to the question's, when an embedder is at hand;
- `keyed`: its subject (its opening words) is what the question names.

The first statement is the best match (lexical + typed/2 + dense/2 + keyed/4). When it leaves
part of the question or the asked value unsaid, the names it gives that the question does not
are bridges: a sentence about a bridge (its heading path names it, or it opens with it) scores
1 + what it adds of the question's weight, and the best such sentence joins. Other sentences
join from the first's group of evidence (a document, a link the walk took) when their own words
add at least MIN_GAIN of the question's weight, or give the checkable value (a time, an amount)
the first lacks. The answer quotes at most MAX_CLAIMS. Nothing here is keyed to a corpus: the
weights come from the tenant's BM25 statistics, the types from the question's form, the
bridges from the evidence itself.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from tortus_pg.answer_type import AnswerType, names_in

MAX_CLAIMS = 3
TYPED = 0.5  # what holding a value of the asked type adds to a sentence's score
DENSE_FIRST, DENSE_NEXT = 0.5, 0.25  # the weight of dense similarity for the first statement and the rest
KEYED = 0.25  # what opening with a thing the question names (its subject) adds to the first statement
MIN_GAIN = 0.1  # share of the question's weight a further sentence must add, unless it is about a bridge


@dataclass(frozen=True)
class Sentence:
    """A sentence of the evidence: which item, where in its text, and its text flattened; a
    table row also with its table's column headers, which are its context as a heading is."""

    evidence: int
    start: int
    end: int
    text: str
    header: tuple[str, ...] = ()

    @property
    def read_as(self) -> str:
        """What the sentence says: a table row with each cell under its column's header
        ("Cluster: heron-1; PITR window: 35 days"), any other sentence as written."""
        cells = [" ".join(c.split()) for c in self.text.strip().strip("|").split("|")]
        if not self.header or len(cells) != len(self.header):
            return self.text
        pairs = zip(self.header, cells, strict=True)
        return "; ".join(f"{name}: {cell}" if name else cell for name, cell in pairs if cell)


@dataclass(frozen=True)
class Reading:
    """The sentences quoted, in chain order (indices into the sentences read), the one that
    states what is asked, its short answer (a value of the asked type) and the question lexemes
    the quoted sentences cover (with their headings)."""

    chosen: list[int]
    answer: int | None
    short: str | None
    covered: frozenset[str]


def read_chain(
    sentences: Sequence[Sentence], own: Sequence[set[str]], context: Sequence[set[str]], labels: Sequence[str],
    weights: Mapping[str, float], kind: AnswerType | None, asked: frozenset[str],
    dense: Sequence[float] | None = None, groups: Sequence[int] | None = None, keyed: Sequence[bool] | None = None,
    bridges: bool = True,
) -> Reading:
    """Read `sentences` (with their lexemes `own`, their headings' lexemes `context` and their
    evidence items' heading paths `labels`) for a question of term `weights`, answer type `kind`
    and words `asked`; `dense` is each sentence's similarity to the question, when known;
    `groups` numbers the group of evidence items that may answer together (the walk's links, one
    document): a sentence not about a bridge joins only from the first statement's group;
    `keyed` marks the sentences whose subject (opening) is what the question names; without
    `bridges` (a hop budget under two) no bridge is followed."""
    if not sentences:
        return Reading([], None, None, frozenset())
    total = sum(weights.values()) or 1.0
    sets = _in_context(own, context, weights)
    lexical = np.array(lexical_shares(own, context, weights))
    values = [kind.values(s.text, asked) if kind is not None else [] for s in sentences]
    typed = np.array([bool(v) for v in values], dtype=float)
    similar = np.asarray(dense, dtype=float) if dense is not None else np.zeros(len(sentences))
    subject = np.asarray(keyed, dtype=float) if keyed is not None else np.zeros(len(sentences))
    first = int(np.argmax(lexical + TYPED * typed + DENSE_FIRST * similar + KEYED * subject))
    # A bridge is followed only to what the first statement leaves unsaid: part of the question,
    # or the value of the asked type.
    unsaid = lexical[first] < 1 - MIN_GAIN or (kind is not None and not typed[first])
    named = {n.casefold() for n in names_in(sentences[first].text) if not _said(n, asked)} if bridges and unsaid \
        else set()
    pattern = re.compile("|".join(rf"(?<!\w){re.escape(b)}(?!\w)" for b in sorted(named))) if named else None
    about = np.array([pattern is not None and j != first and (
        (s.evidence != sentences[first].evidence and pattern.search(labels[s.evidence].casefold()) is not None)
        or pattern.search(_opening(s.text)) is not None) for j, s in enumerate(sentences)], dtype=float)
    covered = sets[first]
    rest = np.array([sum(w for t, w in weights.items() if t in s and t not in covered) / total for s in sets])
    adds = np.array([sum(w for t, w in weights.items() if t in o and t not in covered) / total for o in own])
    group = groups if groups is not None else [0] * len(labels)
    near = np.array([group[s.evidence] == group[sentences[first].evidence] for s in sentences])
    follow = about * (1 + rest + TYPED * typed) + rest + TYPED * typed + DENSE_NEXT * similar
    # A sentence joins the first only for a reason of the chain's: it is about a bridge, or from
    # the first's group it adds a share of the question in its own words, or gives the value a
    # checkable type asks for and the first lacks.
    gives = typed.astype(bool) & (kind is not None and kind.required and not typed[first])
    # Of the sentences about a bridge, the best joins; another only when it adds to the question.
    best_about = int(np.argmax(np.where(about > 0, follow, -np.inf))) if about.any() else -1
    joins = (np.arange(len(sentences)) == best_about) | (((about > 0) | near) & ((adds >= MIN_GAIN) | gives))
    order = [first, *(int(j) for j in np.argsort(-follow, kind="stable") if j != first and joins[j])]
    chosen = order[:MAX_CLAIMS]
    answer = next((j for j in chosen[1:] if typed[j] and about[j]), None)
    answer = answer if answer is not None else next((j for j in chosen if typed[j]), chosen[0])
    # The short answer is new information: not the bridge the first statement already named.
    known = {n.casefold() for n in names_in(sentences[first].text)} if answer != first else set()
    fresh = [v for v in values[answer] if v.casefold() not in known]
    short = next(iter(fresh or values[answer]), None)
    found = frozenset(t for j in chosen for t in sets[j] if t in weights)
    return Reading(chosen, answer, short, found)


def _in_context(own: Sequence[set[str]], context: Sequence[set[str]], weights: Mapping[str, float]) -> list[set[str]]:
    """Each sentence's lexemes with its heading's, when it shares a question term itself: a table
    row matching only its table's heading says nothing the question asks."""
    return [(o | c) if o & weights.keys() else set() for o, c in zip(own, context, strict=True)]


def lexical_shares(own: Sequence[set[str]], context: Sequence[set[str]], weights: Mapping[str, float]) -> list[float]:
    """Each sentence's share of the question's weight, read in its heading's context."""
    total = sum(weights.values()) or 1.0
    return [sum(w for t, w in weights.items() if t in s) / total for s in _in_context(own, context, weights)]


def _opening(text: str) -> str:
    """A sentence's first three words (a table row's first cells), casefolded: where its subject is."""
    return " ".join(text.lstrip("|-*#> ").replace("|", " ").split()[:3]).casefold()


def _said(name: str, asked: frozenset[str]) -> bool:
    """Whether the question already says every word of `name`."""
    return {w.casefold() for w in re.findall(r"\w+", name)} <= asked
