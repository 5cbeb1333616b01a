"""Reading an evidence chain: which sentences answer the question, and the short answer.

A multi-hop answer is a chain of statements: the one that matches the question names a bridge
("Waypoint keeps its orders on kestrel-3"), and the statement about that bridge says what is
asked ("kestrel-3 is backed up to s3://…"). The reader measures every sentence of the evidence:

- `lexical`: the share of the question's weight (IDF) the sentence covers, read in the context
  of its heading path, when it shares at least one question term itself;
- `typed`: it holds a value of the asked type (a time, an amount, a person, a name …) that the
  question does not already say;
- `dense`: its embedding's cosine similarity to the question's, when an embedder is at hand;
- `keyed`: its subject (its opening words) is what the question names.

A sentence says a word of the question that it writes in another form (`in_other_forms`:
"directed by" says "director"), or in another word for the same family relation or event of a
life ("married" says "husband", "born" says "birth"); so does the choice of the sentences that
are embedded (`synth`).

The names a statement gives that the question does not are bridges. The first statement is one
of the STARTS best matches (lexical + typed/2 + dense/2 + keyed/4): the one whose match, with
what the likeliest sentence about its bridges adds to it as the answer, is worth most. A chain
is chosen as a whole, so a statement matching one more word of the question does not start it
when the next best leads on to the answer. The other sentences are rated by a logistic model of
whether a sentence holds the answer (`ANSWERS`), from what each adds to the first statement (the
question's weight it covers that the first does not), its type, its similarity, whether it is
about a bridge, from the first's group of evidence, opens its item or names something new; the
likeliest join the first while the model rates them at least JOIN; of the sentences about a
bridge, one saying part of what the first leaves unsaid follows it first (`_leading`). The
answer quotes at most MAX_CLAIMS; of them, the sentence giving a value of the asked type
answers, in a chain one about a bridge first, then one stating it after the type's cue; of a
run of places its short answer is the part the question asks for (`place_part`). Nothing
here is keyed to a corpus: the weights of the question's terms come from the tenant's BM25
statistics, the types from the question's form, the bridges from the evidence, and
the model's weights are fitted on public multi-hop sets (`benchmarks/fit_reader.py`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from tortus_pg.answer_type import AnswerType, cued_first, names_in, place_part, says_which, year_part
from tortus_pg.query.logistic import Model

MAX_CLAIMS = 3
TYPED = 0.5  # what holding a value of the asked type adds to the first statement's score
DENSE_FIRST = 0.5  # the weight of dense similarity for the first statement
KEYED = 0.25  # what opening with a thing the question names (its subject) adds to the first statement
# Whether a sentence holds the answer, fitted by `python benchmarks/fit_reader.py --fit musique
# hotpotqa` (each set's sentences with and without the expected answer weighing alike), checked
# on 2wiki-train500 and the handbooks (docs/benchmarks.md).
ANSWERS = Model(-2.679, {"typed": 0.791, "dense": 1.312, "about": 0.852, "rest": 2.914, "adds": 1.699, "near": 0.879,
                         "opens": 0.761, "names": 0.73})
JOIN = 0.6  # a sentence joins the first when ANSWERS rates it at least this (both classes weighing alike)
STARTS = 2  # the best matches that compete as the chain's first statement (`signals`)
FORM = 5  # the letters the shorter of two forms of a word has at least (`in_other_forms`)
DEATH = frozenset({"die", "died", "dies", "death", "dead"})  # a question's words asking about a death
# Lexemes that state one family relation (from either side, or as its event) or one event of a
# life: "X married Y" says who X's husband or wife is, "X, the son of Y" who X's father (or,
# read again of Y, X's grandfather) is, "born in" or "a native of" where X's place of birth is,
# "died" when X's death was, "graduated from" where X studied (`in_other_forms`).
RELATION_WORDS = (
    frozenset({"husband", "wife", "wive", "spous", "marri", "marriag", "wed", "widow"}),
    frozenset({"father", "mother", "parent", "son", "daughter", "child", "children", "grandfath", "grandmoth",
               "grandpar", "grandson", "granddaught", "stepfath", "stepmoth", "patern", "matern"}),
    frozenset({"brother", "sister", "sibl"}),
    frozenset({"birth", "born", "birthplac", "birthday", "nativ"}),
    frozenset({"death", "die", "dead", "deceas"}),
    frozenset({"studi", "educ", "graduat", "alma", "alumnus", "alumni"}),
)
_SPAN_DASH = re.compile(r"[–—]|\s-\s")  # what joins the two ends of a span ("1874 – 1954")


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
    the chain's own statements among them cover (with their headings); for a question asking for
    a judgment, the verdict the answer states before its quotes: the option a comparison picks
    (`query.compare`), "Yes" or "No" (`query.same`)."""

    chosen: list[int]
    answer: int | None
    short: str | None
    covered: frozenset[str]
    verdict: str | None = None


@dataclass(frozen=True)
class Page:
    """What the reader reads: the evidence's sentences, each one's lexemes (`own`) and its
    heading's (`context`), the evidence items' heading paths (`labels`); each sentence's dense
    similarity to the question when known; the group of evidence items that may answer together
    (the walk's links, one document) of each item; and whether each sentence's subject (its
    opening) is what the question names."""

    sentences: Sequence[Sentence]
    own: Sequence[set[str]]
    context: Sequence[set[str]]
    labels: Sequence[str]
    dense: Sequence[float] | None = None
    groups: Sequence[int] | None = None
    keyed: Sequence[bool] | None = None


@dataclass(frozen=True)
class Signals:
    """What the reader measures of every sentence for a question: the first statement, the
    values of the asked type each holds and whether one is stated after the type's cue, and the
    answer model's signals (arrays over the sentences, named as `ANSWERS` weighs them)."""

    first: int
    values: list[list[str]]
    cued: np.ndarray
    arrays: dict[str, np.ndarray]
    covered: list[set[str]]  # each sentence's question lexemes, read in its heading's context
    lacks_value: bool  # the question asks for a checkable value (a time, an amount …) the first does not give
    bridges: bool  # whether the reading may cross from the first's group to another (a hop budget of two)


def signals(page: Page, weights: Mapping[str, float], kind: AnswerType | None, asked: frozenset[str],
            bridges: bool = True) -> Signals:
    """The first statement and every sentence's signals: `typed` (a value of the asked type),
    `dense`, `opens` (its item's first sentence), `names` (a name the question does not say) and
    those measured from the first (`_from_first`). The STARTS best matches (lexical + typed/2 +
    dense/2 + keyed/4) compete as the first: each is worth its match and what the likeliest
    sentence about a bridge it names adds to it as the answer (`ANSWERS`), so the statement that
    leads on to the answer starts the chain, not the one matching one word more. A sentence
    says a word of the question it writes in another form (`in_other_forms`)."""
    own, context = in_other_forms(page.own, page.context, weights)
    page = replace(page, own=own, context=context)
    sentences, n = page.sentences, len(page.sentences)
    sets = _in_context(page.own, page.context, weights)
    lexical = np.array(lexical_shares(page.own, page.context, weights))
    found = [kind.found(s.text, asked) if kind is not None else [] for s in sentences]
    values = [cued_first(f) for f in found]
    base = {  # the signals that do not depend on the first
        "typed": np.array([bool(v) for v in values], dtype=float),
        "dense": np.asarray(page.dense, dtype=float) if page.dense is not None else np.zeros(n),
        "opens": np.array([j == 0 or s.evidence != sentences[j - 1].evidence for j, s in enumerate(sentences)],
                          dtype=float),
        "names": np.array([any(not _said(x, asked) for x in names_in(s.text)) for s in sentences], dtype=float),
    }
    subject = np.asarray(page.keyed, dtype=float) if page.keyed is not None else np.zeros(n)
    match = lexical + TYPED * base["typed"] + DENSE_FIRST * base["dense"] + KEYED * subject
    starts = [(int(j), _from_first(int(j), page, weights, asked, base, sets, bridges))
              for j in np.argsort(-match, kind="stable")[:STARTS]]
    first, arrays = max(starts, key=lambda start: match[start[0]] + _leads_on(start[0], start[1], n))
    lacks = kind is not None and kind.required and not base["typed"][first]
    cued = np.array([any(c for c, _ in f) for f in found], dtype=bool)
    return Signals(first, values, cued, arrays, sets, lacks, bridges)


def in_other_forms(own: Sequence[set[str]], context: Sequence[set[str]], terms: Iterable[str],
                   ) -> tuple[list[set[str]], list[set[str]]]:
    """Each sentence's lexemes (`own`) and its heading's (`context`), joined by the question's
    terms it writes in another form of the word: of the two lexemes one begins the other and the
    shorter has FORM letters or more ("direct", of "directed by", says "director"; "found" says
    "founder"), which PostgreSQL's English stemmer keeps apart; or both state one family
    relation or one event of a life (`RELATION_WORDS`: "married" says "husband", "born" says
    "birth")."""
    asked = list(terms)
    related = {t: words for t in asked for words in RELATION_WORDS if t in words}

    def widened(lexemes: set[str]) -> set[str]:
        return lexemes | {t for t in asked if t not in lexemes and (bool(related.get(t, frozenset()) & lexemes) or any(
            min(len(t), len(x)) >= FORM and (t.startswith(x) or x.startswith(t)) for x in lexemes))}

    return [widened(s) for s in own], [widened(s) for s in context]


def _leads_on(first: int, arrays: dict[str, np.ndarray], n: int) -> float:
    """What following the first's bridges adds to it as the answer: how much likelier (`ANSWERS`)
    the likeliest sentence about a bridge holds the answer than the first itself."""
    about = arrays["about"]
    if not about.any():
        return 0.0
    likely = ANSWERS.probabilities(arrays, n)
    return max(float(np.max(np.where(about > 0, likely, 0.0))) - float(likely[first]), 0.0)


def _from_first(first: int, page: Page, weights: Mapping[str, float], asked: frozenset[str],
                base: dict[str, np.ndarray], sets: list[set[str]], bridges: bool) -> dict[str, np.ndarray]:
    """The signals of every sentence with `first` as the first statement, added to `base`:
    `about` (a bridge the first names heads its item or opens it; none without `bridges`), `rest`
    and `adds` (the question's weight it adds to the first's, in its heading's context and in its
    own words) and `near` (the first's group)."""
    sentences, n = page.sentences, len(page.sentences)
    total = sum(weights.values()) or 1.0
    covered = sets[first]
    group = page.groups if page.groups is not None else [0] * len(page.labels)
    return {
        **base,
        "about": _about(page, first, asked) if bridges else np.zeros(n),
        "rest": np.array([sum(w for t, w in weights.items() if t in s and t not in covered) / total for s in sets]),
        "adds": np.array([sum(w for t, w in weights.items() if t in o and t not in covered) / total for o in page.own]),
        "near": np.array([group[s.evidence] == group[sentences[first].evidence] for s in sentences], dtype=float),
    }


def _about(page: Page, first: int, asked: frozenset[str]) -> np.ndarray:
    """Whether each sentence is about a bridge the first statement names (a name the question
    does not say): the bridge heads its evidence item (another item's) or opens the sentence,
    or the item's title is written in the first statement, whatever the first puts around it
    ("a son of former Supreme Leader Kim Jong-il" names the item titled "Kim Jong-il")."""
    sentences = page.sentences
    text = sentences[first].text
    named = {x.casefold() for x in names_in(text) if not _said(x, asked)}
    pattern = re.compile("|".join(rf"(?<!\w){re.escape(b)}(?!\w)" for b in sorted(named))) if named else None
    titled = {i for i, label in enumerate(page.labels) if _titles(label, text, asked)}

    def about(j: int, s: Sentence) -> bool:
        other = s.evidence != sentences[first].evidence
        heads = pattern is not None and pattern.search(page.labels[s.evidence].casefold()) is not None
        opens = pattern is not None and pattern.search(_opening(s.text)) is not None
        return j != first and ((other and (heads or s.evidence in titled)) or opens)

    return np.array([about(j, s) for j, s in enumerate(sentences)], dtype=float)


def _titles(label: str, text: str, asked: frozenset[str]) -> bool:
    """Whether `text` writes the title of the item labelled `label` (its heading path's first
    part, without a closing parenthesis: "Planet of the Apes" for "Planet of the Apes (2001
    film)"), as written, and the question does not say it."""
    title = re.sub(r"\s*\([^)]*\)$", "", label.split(" > ")[0]).strip()
    if len(title) < 3 or _said(title, asked):
        return False
    return re.search(rf"(?<!\w){re.escape(title)}(?!\w)", text) is not None


def read_chain(page: Page, weights: Mapping[str, float], kind: AnswerType | None, asked: frozenset[str],
               bridges: bool = True) -> Reading:
    """Read `page` for a question of term `weights`, answer type `kind` and words `asked`: the
    first statement, then the sentences the answer model (`ANSWERS`) rates likeliest to hold the
    answer, while at least JOIN; without `bridges` (a hop budget under two) no bridge is followed."""
    if not page.sentences:
        return Reading([], None, None, frozenset())
    measured = signals(page, weights, kind, asked, bridges)
    first, values, typed = measured.first, measured.values, measured.arrays["typed"]
    likely = ANSWERS.probabilities(measured.arrays, len(page.sentences))
    chosen = quoted(measured, likely)
    # The answering sentence holds a value of the asked type. In a chain, one about a bridge
    # answers before the first statement: the question asks what the thing it names leads to
    # ("the date of birth of the director of film X" is the director's, not the film's). Then
    # one stating its value plainly, after the type's cue ("born in Rome"); then the likeliest.
    about, cued = measured.arrays["about"], measured.cued
    answer = max(chosen, key=lambda j: (bool(typed[j]), bool(about[j]), bool(cued[j]), likely[j]))
    # The short answer is new information: not the bridge the first statement already named.
    known = {x.casefold() for x in names_in(page.sentences[first].text)} if answer != first else set()
    short = short_answer(page.sentences[answer].text, values[answer], known, asked)
    if short is not None and kind is not None and kind.nested:
        short = place_part(short, asked)
    if short is not None and kind is not None and kind.required:
        short = year_part(short, asked)
    # What the chain's statements leave unsaid is what a bridge is followed to; the sentences
    # the model adds answer, but they do not redirect the chain.
    found = frozenset(t for j in chain(measured, likely) if j in chosen for t in measured.covered[j] if t in weights)
    return Reading(chosen, answer, short, found)


def short_answer(text: str, values: Sequence[str], known: set[str], asked: frozenset[str]) -> str | None:
    """The short answer of the answering sentence `text`: the first of its `values` (of the asked
    type) that is new, not a name the first statement gave (`known`, casefolded). For a question
    about a death, the second as the text gives them when a dash joins the first two as a span
    does: "(6 May 1874 in Melbourne – 17 January 1954 in Fontana)" gives the death's date and
    place after its dash, inside the span ("(1911, Berlin – 1979) was a German …" gives no place
    of death). A word that only says a time is given ("after", "during") is none."""
    values = [v for v in values if says_which(v)]
    fresh = [v for v in values if v.casefold() not in known] or values
    placed = sorted((text.find(v), v) for v in fresh if v in text)
    if asked & DEATH and len(placed) > 1:
        (start, first), (end, second) = placed[:2]
        dash = _SPAN_DASH.search(text, start + len(first), end)
        if dash is not None and ")" not in text[dash.end():end]:
            return second
    return next(iter(fresh), None)


def chain(measured: Signals, likely: np.ndarray) -> list[int]:
    """The chain's own statements: the first; the sentence about a bridge that leads on from it
    (`_leading`); and, when the first lacks the checkable value asked for, the one of its group
    giving one that leads so."""
    arrays = measured.arrays
    gives = arrays["typed"] * arrays["near"] * float(measured.lacks_value)
    lead = [_leading(reason, measured, likely) for reason in (arrays["about"], gives) if reason.any()]
    return list(dict.fromkeys([measured.first, *lead]))


def _leading(reason: np.ndarray, measured: Signals, likely: np.ndarray) -> int:
    """Of the sentences with a `reason` to follow the first, the one saying part of what the first
    leaves unsaid ("died", of "Where did the director … die?"), then stating a value of the asked
    type plainly, after its cue ("died in Los Angeles"), then the likeliest (`likely`) to hold the
    answer: the bridge's own first sentence is likelier by its form, not by what it says."""
    rest = measured.arrays["rest"]
    return int(max(np.flatnonzero(reason > 0), key=lambda j: (rest[j] > 0, bool(measured.cued[j]), likely[j])))


def quoted(measured: Signals, likely: np.ndarray) -> list[int]:
    """The sentences quoted, MAX_CLAIMS at most: the chain's own statements (`chain`), then the
    sentences `likely` rates at least JOIN, likeliest first, of those saying part of the question
    the first leaves unsaid or about a bridge: every quote is there for a reason of the
    question's, not for its form alone; without bridges, from the first's group only."""
    arrays = measured.arrays
    reasoned = ((arrays["rest"] > 0) | (arrays["about"] > 0)) & ((arrays["near"] > 0) | measured.bridges)
    joins = [int(j) for j in np.argsort(-likely, kind="stable") if likely[j] >= JOIN and reasoned[j]]
    return list(dict.fromkeys([*chain(measured, likely), *joins]))[:MAX_CLAIMS]


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
