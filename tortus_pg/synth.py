"""Grounded synthesis: an answer only from selected evidence, or an honest refusal.

Extractive by default: sentences are chosen from the evidence spans, each claim citing the
exact span it copies. The question's terms are weighted by their IDF in the tenant's BM25
statistics (a term the corpus never uses weighs the most), and the answer is withheld when
the evidence covers less than half of that weight, or misses an identifier the question
names (an error code, clause or version must match exactly). An optional LLM synthesizer
writes the answer instead; its claims are checked against the evidence they cite.
"""

from __future__ import annotations

import math
import re
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import psycopg

from tortus_pg.answer_type import AnswerType, expected_type
from tortus_pg.ingest.chunking import line_blocks, sentence_spans

_PUNCTUATION = "\"'()[]{}<>,;:!?."
SUPPORTED = 0.5  # share of the question's weight the evidence must cover
ASKED_SUPPORT = 1 / 3  # share of the weight of what the question asks about its subject that claims must cover
MAX_CLAIMS = 3
# Words that frame a question rather than say what it is about.
FRAME_WORDS = frozenset(
    ["say", "mean", "tell", "describ", "explain", "requir", "indic", "happen", "know", "call", "name", "doe", "like",
     "whose"]
)

_TERMS = """
with q as (select distinct t.lexeme from unnest(to_tsvector(%(cfg)s::regconfig, %(q)s)) as t)
select q.lexeme, coalesce(t.df, 0), c.n, q.lexeme = any(tortus.identifier_lexemes(%(q)s, %(cfg)s::regconfig))
from q
cross join (select coalesce(max(n_docs), 0) as n from tortus.bm25_corpus
            where tenant_id = tortus.current_tenant()) c
left join tortus.bm25_term t on t.tenant_id = tortus.current_tenant() and t.lexeme = q.lexeme
"""

_LEXEMES = """
select coalesce(array(select l.lexeme from unnest(to_tsvector(%(cfg)s::regconfig, x.t)) as l), '{}')
from unnest(%(texts)s::text[]) with ordinality as x(t, i) order by x.i
"""


@dataclass(frozen=True)
class Terms:
    """The question's content lexemes with their weights, which are identifiers, and the names
    of the things the question is about (each a set of lexemes the answer's chain must have)."""

    weights: dict[str, float]
    identifiers: frozenset[str]
    names: dict[str, frozenset[str]] = field(default_factory=dict)
    spelled: dict[str, str] = field(default_factory=dict)  # identifier lexeme -> as the question writes it
    # name -> label -> lexemes of each standard, clause or decision the named thing implements
    # (an `implements` edge): what such a text requires applies to the named thing.
    inherits: dict[str, dict[str, frozenset[str]]] = field(default_factory=dict)
    unseen: frozenset[str] = frozenset()  # question terms no document of the corpus uses

    @property
    def total(self) -> float:
        return sum(self.weights.values())

    def weight(self, lexemes: set[str]) -> float:
        """The summed weight of the question's terms among `lexemes`, added in a fixed order and
        rounded: set order varies between processes, and float noise must not decide ties."""
        return round(sum(w for t, w in sorted(self.weights.items()) if t in lexemes), 9)

    def covered(self, lexemes: set[str]) -> float:
        share = sum(w for t, w in sorted(self.weights.items()) if t in lexemes) / self.total if self.total else 0.0
        return round(share, 9)


def question_terms(
    conn: psycopg.Connection, question: str, ts_config: str = "english", names: Sequence[str] = (),
    inherits: Mapping[str, Sequence[str]] | None = None,
) -> Terms:
    """Lexemes of the question (minus framing words) weighted by IDF (unseen terms weigh most),
    the lexemes of the `names` the question is about, and of what each name implements
    (`inherits`: name -> labels)."""
    rows = conn.execute(_TERMS, {"q": question, "cfg": ts_config}).fetchall()
    weights = {}
    for lexeme, df, n, _ in rows:
        if lexeme in FRAME_WORDS:
            continue
        weights[lexeme] = math.log(1 + (n - df + 0.5) / (df + 0.5))
    inherits = inherits or {}
    implemented = sorted({label for labels in inherits.values() for label in labels})
    found = dict(zip([*names, *implemented], lexemes(conn, [*names, *implemented], ts_config), strict=True))
    identifiers = frozenset(r[0] for r in rows if r[3])
    tokens = [t.strip(_PUNCTUATION) for t in question.split()]
    spelled = {i: next((t for t in tokens if i in t.casefold()), i) for i in identifiers}
    inherited = {name: {label: frozenset(found[label]) for label in labels if found[label]}
                 for name, labels in inherits.items() if name in names and found[name]}
    unseen = frozenset(r[0] for r in rows if r[0] in weights and not r[1])
    return Terms(weights, identifiers, {n: frozenset(found[n]) for n in names if found[n]}, spelled,
                 {name: sets for name, sets in inherited.items() if sets}, unseen)


LEXEME_CACHE = 5_000  # texts whose lexemes are remembered (per database and configuration)
_lexeme_cache: OrderedDict[tuple[str, str, str, str], frozenset[str]] = OrderedDict()


def lexemes(conn: psycopg.Connection, texts: Sequence[str], ts_config: str = "english") -> list[set[str]]:
    """The lexemes of each text, as BM25 sees them. Synthesis asks for the same evidence
    sentences several times per answer, and the same chunks recur across questions, so only
    texts not seen before go to the server."""
    place = (conn.info.host, conn.info.dbname, ts_config)
    missing = list(dict.fromkeys(t for t in texts if (*place, t) not in _lexeme_cache))
    if missing:
        rows = conn.execute(_LEXEMES, {"texts": missing, "cfg": ts_config}).fetchall()
        for text, row in zip(missing, rows, strict=True):
            _lexeme_cache[(*place, text)] = frozenset(row[0])
    found = []
    for text in texts:
        _lexeme_cache.move_to_end((*place, text))
        found.append(set(_lexeme_cache[(*place, text)]))
    while len(_lexeme_cache) > LEXEME_CACHE:
        _lexeme_cache.popitem(last=False)
    return found


def coverage_of(conn: psycopg.Connection, terms: Terms, texts: Sequence[str], ts_config: str = "english") -> float:
    """Share of the question's weight (`question_terms`) that the texts contain together."""
    found = set().union(*lexemes(conn, texts, ts_config)) if texts else set()
    return terms.covered(found)


class Source(Protocol):
    """What synthesis needs of one evidence item; `label` is its heading path, the context of
    every sentence in the chunk."""

    @property
    def label(self) -> str: ...
    @property
    def uri(self) -> str: ...
    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...
    @property
    def page(self) -> int | None: ...
    @property
    def text(self) -> str: ...


@dataclass
class Synthesis:
    answer: str | None
    withheld: bool
    confidence: float
    claims: list[dict[str, Any]]
    coverage: float
    missing: list[str]
    warnings: list[str] = field(default_factory=list)
    missing_from_claims: list[str] = field(default_factory=list)  # question terms no claim covers
    draft: list[dict[str, Any]] = field(default_factory=list)  # claims of an answer withheld for low coverage
    # (name, standard): the claims quote a standard that the named thing implements, and no claim names it
    inherited: list[tuple[str, str]] = field(default_factory=list)


def cited_text(claims: Sequence[Mapping[str, Any]]) -> str:
    """An answer's text: each claim followed by its citation number ("… [1] … [2]")."""
    return " ".join(f"{c['text']} [{c['citation']}]" for c in claims)


class Synthesizer(Protocol):
    def __call__(
        self, conn: psycopg.Connection, question: str, evidence: Sequence[Source], chains: Sequence[Sequence[int]],
        terms: Terms, ts_config: str,
    ) -> Synthesis: ...


_TABLE_RULE = re.compile(r"[ \t]*\|?[ \t]*:?-{3,}")


def _sentences(evidence: Sequence[Source]) -> list[tuple[int, int, int, str]]:
    """(evidence index, start, end, text) of the sentences worth quoting: not headings or a line
    repeating one (a passage's title as its first line), not table header rows (they state
    nothing), not fragments of fewer than four words."""
    out = []
    for i, item in enumerate(evidence):
        headings = {" ".join(part.split()).casefold() for part in item.label.split(" > ")}
        for start, end in sentence_spans(item.text):
            text = item.text[start:end]
            flat = " ".join(text.split())
            if text.lstrip().startswith("#") or len(text.split()) < 4 or flat.casefold() in headings:
                continue
            if text.startswith("|") and _TABLE_RULE.match(item.text, item.text.find("\n", end) + 1 or len(item.text)):
                continue
            out.append((i, start, end, flat))
    return out


def _refusal(terms: Terms, found: set[str], coverage: float) -> str | None:
    missing_ids = sorted({terms.spelled.get(i, i) for i in terms.identifiers - found})
    if missing_ids:
        return f"no evidence mentions {', '.join(missing_ids)}"
    unnamed = sorted(name for name, words in terms.names.items() if not words <= found)
    if unnamed:
        return f"no evidence about {', '.join(unnamed)} answers it"
    if coverage < SUPPORTED:
        return f"the evidence covers {coverage:.0%} of what the question asks (at least {SUPPORTED:.0%} needed)"
    return None


def _keyed(conn: psycopg.Connection, sentences: Sequence[str], terms: Terms, ts_config: str) -> list[bool]:
    """Whether each sentence opens with an identifier or a name of the question: its subject
    ("E-2107 | Ledger write timed out", "Checkout Gateway is owned by ..."), which makes it the
    statement about that thing rather than one mentioning it on the way."""
    return _opens_with(conn, sentences, set(terms.identifiers).union(*terms.names.values()), ts_config)


def _opens_with(conn: psycopg.Connection, sentences: Sequence[str], subject: set[str], ts_config: str) -> list[bool]:
    """Whether each sentence's first three words carry one of the `subject` lexemes."""
    if not subject:
        return [False] * len(sentences)
    openings = [" ".join(s.lstrip("|-*# ").split()[:3]) for s in sentences]
    return [bool(found & subject) for found in lexemes(conn, openings, ts_config)]


_IDENTIFIERS = "select tortus.identifier_lexemes(%(t)s, %(cfg)s::regconfig)"
_TWO_DIGITS = re.compile(r"\d\D*\d")  # an identifier has at least two (tortus.identifier_lexemes)


def _bridged(conn: psycopg.Connection, claim: str, terms: Terms, ts_config: str) -> set[str]:
    """The identifiers a claim names and the question does not: what the claim resolves the
    question's description to ("Merchants received E-1042" for "the error code that merchants
    received")."""
    if not _TWO_DIGITS.search(claim):  # most claims: no round trip
        return set()
    row = conn.execute(_IDENTIFIERS, {"t": claim, "cfg": ts_config}).fetchone()
    return set(row[0] if row else []) - terms.identifiers


def _unasked(terms: Terms, said: set[str]) -> str | None:
    """Why the quoted sentences do not answer: they never mention a thing or an identifier the
    question names (the p99 target of another service is no answer about Ledger Service, an
    error code's row no answer about the incident it does not name), or they are about
    what it names (its identifiers and named things) but say too little of what it asks about
    them ("how much does the Feature Store cost" answered by sentences about the Feature Store)."""
    unsaid = sorted(name for name, words in terms.names.items() if not words <= said)
    unsaid += sorted({terms.spelled.get(i, i) for i in terms.identifiers - said})
    if unsaid:
        return f"the sentences that match the question do not mention {', '.join(unsaid)}"
    subject = set(terms.identifiers).union(*terms.names.values())
    asked = {t: w for t, w in terms.weights.items() if t not in subject}
    total = sum(asked.values())
    if not subject or not total or sum(w for t, w in asked.items() if t in said) >= ASKED_SUPPORT * total:
        return None
    wanted = sorted((t for t in asked if t not in said), key=lambda t: -asked[t])
    return f"the evidence is about what the question names but not what it asks ({', '.join(wanted[:4])})"


_POSITIONS = """
select x.i, t.lexeme, t.positions
from unnest(%(texts)s::text[]) with ordinality as x(t, i)
cross join lateral unnest(to_tsvector(%(cfg)s::regconfig, x.t)) as t
"""


def _another_compound(
    conn: psycopg.Connection, question: str, claims: Sequence[dict[str, Any]], terms: Terms, covered: set[str],
    ts_config: str,
) -> str | None:
    """Why the claims name another thing than the question: a question word that no document
    uses stands between two words that a claim has with one to three other words between them
    ("chief executive officer" against "Chief Information Security Officer"). The claims then
    speak of another title, name or term of the same shape, not of the one asked about."""
    missing = terms.unseen - covered
    if not missing or not claims:
        return None
    at: dict[int, dict[str, list[int]]] = {}
    for i, lexeme, positions in conn.execute(_POSITIONS, {"texts": [question, *(c["text"] for c in claims)],
                                                          "cfg": ts_config}).fetchall():
        at.setdefault(i, {})[lexeme] = list(positions)
    asked = {p: lexeme for lexeme, positions in at.get(1, {}).items() for p in positions}
    words = re.findall(r"\w+", question)

    def spelled(lexeme: str) -> str:  # the question's word for a lexeme (stems are mostly prefixes)
        return next((w for w in words if w.casefold().startswith(lexeme)), lexeme)

    for word in sorted(missing):
        for p in at.get(1, {}).get(word, []):
            before, after = asked.get(p - 1), asked.get(p + 1)
            if before not in terms.weights or after not in terms.weights:
                continue
            for claim in range(2, len(claims) + 2):
                said = at.get(claim, {})
                if any(2 <= b - a <= 4 for a in said.get(before, []) for b in said.get(after, [])):
                    first, last = spelled(before), spelled(after)
                    return (f"the evidence names another {first} … {last} than the {first} {spelled(word)} {last} "
                            "asked about")
    return None


def best_chain(
    conn: psycopg.Connection, evidence: Sequence[Source], chains: Sequence[Sequence[int]], terms: Terms,
    ts_config: str = "english",
) -> tuple[list[int], float, set[str]]:
    """The chain of evidence that answers best: first the one naming most of what the question
    requires (its identifiers and named things), then the one covering most of its weight, then
    one with a sentence about the question's subject (`_keyed`).
    Returns the chain's indices, coverage and lexemes (of texts and their heading paths)."""
    sets = lexemes(conn, [f"{e.label}\n{e.text}" for e in evidence], ts_config) if evidence else []
    sentences = _sentences(evidence)
    keyed = {i for (i, *_), k in zip(sentences, _keyed(conn, [s[3] for s in sentences], terms, ts_config),
                                     strict=True) if k}
    scored = []
    for n, chain in enumerate(chains):
        found = set().union(*(sets[i] for i in chain)) if chain else set()
        required = len(terms.identifiers & found) + sum(1 for words in terms.names.values() if words <= found)
        scored.append((required, terms.covered(found), bool(keyed.intersection(chain)), -n, list(chain), found))
    if not scored:
        return [], 0.0, set()
    _, coverage, _, _, chain, found = max(scored, key=lambda x: x[:4])
    return chain, coverage, found


def extractive(
    conn: psycopg.Connection, question: str, evidence: Sequence[Source], chains: Sequence[Sequence[int]],
    terms: Terms, ts_config: str = "english",
) -> Synthesis:
    """Quote up to MAX_CLAIMS sentences of the best chain that together cover the question best.
    When the chain covers too little of the question, the answer is withheld but the sentences
    are kept as a draft: the engine may follow a bridge they name to the rest of the answer."""
    chain, coverage, found = best_chain(conn, evidence, chains, terms, ts_config)
    missing = sorted(t for t in terms.weights if t not in found)
    named_missing = _refusal(terms, found, 1.0)  # an identifier or a named thing: nothing to draft
    if named_missing is not None:
        return Synthesis(None, True, 0.0, [], coverage, missing, [f"answer withheld: {named_missing}"])
    why = _refusal(terms, found, coverage)
    kind = expected_type(question)
    claims, covered, inherited = _quote(conn, evidence, chain, terms, ts_config, kind)
    uncovered = sorted((t for t in terms.weights if t not in covered), key=lambda t: -terms.weights[t])
    why = why or ("no sentence matches the question" if not claims else _unasked(terms, covered))
    if why is None and kind is not None and not any(kind.given_by(c["text"]) for c in claims):
        why = f"the question asks for {kind.name} and no sentence that matches it gives one"
    if why is None:
        why = _another_compound(conn, question, claims, terms, covered, ts_config)
    if why is not None:
        return Synthesis(None, True, 0.0, [], coverage, missing, [f"answer withheld: {why}"],
                         missing_from_claims=uncovered, draft=claims)
    answer = cited_text(claims)
    confidence = round(coverage * terms.covered(covered) ** 0.5, 4)
    return Synthesis(answer, False, confidence, claims, coverage, missing, missing_from_claims=uncovered,
                     inherited=inherited)


def _quote(
    conn: psycopg.Connection, evidence: Sequence[Source], chain: Sequence[int], terms: Terms, ts_config: str,
    kind: AnswerType | None = None,
) -> tuple[list[dict[str, Any]], set[str], list[tuple[str, str]]]:
    """The claims quoted from `chain`, chosen greedily by the question weight each adds, the
    lexemes they cover, and the (name, standard) pairs they speak for only by inheritance. When the
    question asks for a `kind` of answer (a time, an amount), a sentence giving one joins them:
    the one right after a claim in its clause, else the one matching the question best."""
    sentences = [(chain[i], start, end, text) for i, start, end, text in _sentences([evidence[i] for i in chain])]
    if not sentences:
        return [], set(), []
    # A sentence is read in the context of its heading path ("clause 7.3.2" heads its text).
    # It must match the question itself, though: a table row matching only its table's heading
    # says nothing the question asks.
    texts = [evidence[i].text for i in chain] if terms.inherits else []  # only read to inherit
    found = lexemes(conn, [*(evidence[i].label for i in chain), *texts], ts_config)
    heading_of = dict(zip(chain, found[: len(chain)], strict=True))
    text_of = dict(zip(chain, found[len(chain) :] or [set()] * len(chain), strict=True))
    # What a named thing implements applies to it: a section of the standard or decision it
    # implements that never names it speaks of it too.
    speaks_for = {i: [(name, label) for name, standards in terms.inherits.items()
                      for label, standard in standards.items()
                      if standard <= heading and not terms.names[name] <= text_of[i]]
                  for i, heading in heading_of.items()}
    context_of = {i: heading.union(*(terms.names[name] for name, _ in speaks_for[i]))
                  for i, heading in heading_of.items()}
    own = lexemes(conn, [s[3] for s in sentences], ts_config)
    sets = [found_in | context_of[s[0]] if found_in & terms.weights.keys() else set()
            for found_in, s in zip(own, sentences, strict=True)]
    keyed = _keyed(conn, [s[3] for s in sentences], terms, ts_config)
    typed = [kind is not None and kind.given_by(s[3]) for s in sentences]
    measured = kind is not None and kind.measured
    values = [_value_after(evidence, sentences, j, typed) if measured else None for j in range(len(sentences))]
    chosen: list[int] = []
    covered: set[str] = set()
    resolves = [False] * len(sentences)
    value: int | None = None  # the sentence quoted for the value its clause gives
    while len(chosen) < MAX_CLAIMS:
        # Of sentences matching alike, the one giving the measure asked (or followed by it) goes
        # first. Once a clause's value is quoted, another value of that kind is no answer.
        gains = [(resolves[j], terms.weight(sets[j] - covered), measured and (typed[j] or values[j] is not None),
                  keyed[j], -j)
                 for j in range(len(sentences)) if j not in chosen and not (value is not None and typed[j])]
        if not gains:
            break
        resolved, gain, _, _, neg_j = max(gains)
        if not resolved and (gain <= 0 or (chosen and gain < 0.1 * terms.total)):
            break
        pick = -neg_j
        chosen.append(pick)
        covered |= sets[pick]
        follows = values[pick]
        if value is None and follows is not None and follows not in chosen and len(chosen) < MAX_CLAIMS:
            value = follows
            chosen.append(follows)
            covered |= own[follows]
        if pick == chosen[0]:
            resolves = _resolutions(conn, sentences, own, context_of, sets, pick, terms, ts_config)
    if chosen and not any(typed[j] for j in chosen):
        giving = [(terms.weight(sets[j]), keyed[j], -j) for j in range(len(sentences)) if sets[j] and typed[j]]
        if giving:
            chosen.append(-max(giving)[2])
            covered |= sets[chosen[-1]]
    # A named thing the claims do not mention may implement what they quote ("Token Service
    # implements clause 7.3.2" beside clause 7.3.2's text): the chain's sentence that says so
    # joins the claims, as the reason the quoted requirement applies to it.
    said = set().union(*(own[j] | heading_of[sentences[j][0]] for j in chosen)) if chosen else set()
    for name, words in terms.names.items():
        standard = next((w for w in terms.inherits.get(name, {}).values() if w <= covered), None)
        if chosen and not words <= said and standard is not None:
            link = next((j for j in range(len(sentences)) if j not in chosen and words | standard <= own[j]), None)
            if link is not None:
                chosen.append(link)
                covered |= own[link]
                said |= own[link]
    unsaid = {name for name, words in terms.names.items() if words <= covered and not words <= said}
    inherited = list(dict.fromkeys(pair for j in chosen for pair in speaks_for[sentences[j][0]] if pair[0] in unsaid))
    chosen.sort(key=lambda j: (sentences[j][0], sentences[j][1]))
    claims = []
    for n, j in enumerate(chosen, 1):
        i, start, end, text = sentences[j]
        item = evidence[i]
        claims.append({
            "text": text, "citation": n, "evidence": i, "uri": item.uri, "page": item.page,
            "span": [item.start + start, item.start + end], "support": "supported",
            "matched_terms": sorted(t for t in sets[j] if t in terms.weights),
        })
    return claims, covered, inherited


def _value_after(
    evidence: Sequence[Source], sentences: Sequence[tuple[int, int, int, str]], j: int, typed: Sequence[bool],
) -> int | None:
    """The sentence that gives the asked kind of answer right after claim `j` in the same
    paragraph or clause, when `j` gives none: a clause's value may follow its subject in a
    sentence of its own ("Ledger entries, payment records … Retained for 10 years …"). Only for
    measured kinds (a duration, a sum): a narrative's next sentence often has a year or an
    "every" that answers nothing."""
    nxt = j + 1
    if typed[j] or nxt >= len(sentences) or not typed[nxt] or sentences[nxt][0] != sentences[j][0]:
        return None
    text = evidence[sentences[j][0]].text
    block = next(b for b in line_blocks(text, 0, len(text)) if b[0] <= sentences[j][1] < b[1])
    return nxt if sentences[nxt][1] < block[1] else None


def _resolutions(
    conn: psycopg.Connection, sentences: Sequence[tuple[int, int, int, str]], own: Sequence[set[str]],
    context_of: Mapping[int, set[str]], sets: list[set[str]], first: int, terms: Terms, ts_config: str,
) -> list[bool]:
    """Which sentences say what the first claim resolves the question to: when that claim names
    an identifier the question does not (a bridge), a sentence of another chunk of the chain that
    opens with it is the statement about it ("E-1042 | Upstream TLS handshake failed" after
    "Merchants received E-1042"). It shares no word with the question, so it is read in its
    heading's context (`sets` is updated) and quoted next; one is enough."""
    bridged = _bridged(conn, sentences[first][3], terms, ts_config)
    opens = _opens_with(conn, [s[3] for s in sentences], bridged, ts_config)
    best = next((j for j, s in enumerate(sentences) if opens[j] and s[0] != sentences[first][0]), None)
    if best is None:
        return [False] * len(sentences)
    sets[best] = own[best] | context_of[sentences[best][0]]
    return [j == best for j in range(len(sentences))]


def synthesize(
    conn: psycopg.Connection,
    question: str,
    evidence: Sequence[Source],
    chains: Sequence[Sequence[int]] | None = None,
    *,
    ts_config: str = "english",
    synthesizer: Synthesizer | None = None,
    names: Sequence[str] = (),
    terms: Terms | None = None,
) -> Synthesis:
    """An answer from `evidence` alone (extractive unless another synthesizer is given); `chains`
    groups evidence that may answer together (default: all of it); `names` are what the question
    is about, which the answering chain must mention; `terms` the question's, when already known."""
    terms = terms or question_terms(conn, question, ts_config, names)
    groups = chains if chains is not None else [list(range(len(evidence)))]
    return (synthesizer or extractive)(conn, question, evidence, groups, terms, ts_config)


_LLM_SYSTEM = """Answer the question only from the numbered evidence. Every claim must cite the \
evidence numbers that state it. If the evidence does not answer the question, set answerable to \
false and give no claims. Do not use outside knowledge."""

_LLM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["answerable", "claims"],
    "properties": {
        "answerable": {"type": "boolean"},
        "claims": {
            "type": "array",
            "maxItems": 8,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["text", "citations"],
                "properties": {
                    "text": {"type": "string", "maxLength": 1000},
                    "citations": {"type": "array", "maxItems": 8, "items": {"type": "integer"}},
                },
            },
        },
    },
}
SUPPORT_SHARE = 0.6  # of a claim's words that its cited evidence must contain


class ChatModel(Protocol):
    def complete_json(self, system: str, user: str, schema: Any, *, schema_name: str) -> dict[str, Any]: ...


class LLMSynthesizer:
    """Synthesis by an OpenAI-compatible chat model, checked against the evidence: a claim is
    supported when its cited evidence contains at least SUPPORT_SHARE of its words (as lexemes),
    unsupported otherwise (kept, flagged and left out of the confidence). The same refusal rules
    as extractive synthesis apply before the model is asked."""

    def __init__(self, model: ChatModel) -> None:
        self.model = model

    def __call__(
        self, conn: psycopg.Connection, question: str, evidence: Sequence[Source], chains: Sequence[Sequence[int]],
        terms: Terms, ts_config: str = "english",
    ) -> Synthesis:
        chain, coverage, found = best_chain(conn, evidence, chains, terms, ts_config)
        missing = sorted(t for t in terms.weights if t not in found)
        why = _refusal(terms, found, coverage)
        if why is not None:
            return Synthesis(None, True, 0.0, [], coverage, missing, [f"answer withheld: {why}"])
        numbered = "\n\n".join(f"[{n}] {evidence[i].text}" for n, i in enumerate(chain, 1))
        reply = self.model.complete_json(
            _LLM_SYSTEM, f"Question: {question}\n\nEvidence:\n{numbered}", _LLM_SCHEMA, schema_name="grounded_answer"
        )
        drafted = [c for c in reply["claims"] if c["text"].strip()]
        if not reply["answerable"] or not drafted:
            return Synthesis(None, True, 0.0, [], coverage, missing, ["answer withheld: the model found no answer"])
        claim_sets = lexemes(conn, [c["text"] for c in drafted], ts_config)
        cited_sets = lexemes(conn, [evidence[i].text for i in chain], ts_config)
        claims, notes = [], []
        for n, (claim, words) in enumerate(zip(drafted, claim_sets, strict=True), 1):
            cited = [c for c in dict.fromkeys(claim["citations"]) if 1 <= c <= len(chain)]
            support_words = set().union(*(cited_sets[c - 1] for c in cited)) if cited else set()
            share = len(words & support_words) / len(words) if words else 0.0
            supported = bool(cited) and share >= SUPPORT_SHARE
            if not supported:
                notes.append(f"claim {n} is not supported by the evidence it cites")
            first = evidence[chain[cited[0] - 1]] if cited else None
            claims.append({
                "text": claim["text"].strip(), "citation": n, "evidence": chain[cited[0] - 1] if cited else None,
                "uri": first.uri if first else None, "page": first.page if first else None,
                "span": [first.start, first.end] if first else None,
                "support": "supported" if supported else "unsupported", "support_share": round(share, 3),
            })
        if not any(c["support"] == "supported" for c in claims):
            return Synthesis(None, True, 0.0, claims, coverage, missing,
                             ["answer withheld: no claim of the model is supported by the evidence", *notes])
        kind = expected_type(question)
        if kind is not None and not any(kind.given_by(c["text"]) for c in claims if c["support"] == "supported"):
            return Synthesis(None, True, 0.0, claims, coverage, missing,
                             [f"answer withheld: the question asks for {kind.name} and no supported claim gives one",
                              *notes])
        answer = cited_text(claims)
        supported_share = sum(c["support"] == "supported" for c in claims) / len(claims)
        return Synthesis(answer, False, round(coverage * supported_share, 4), claims, coverage, missing, notes)
