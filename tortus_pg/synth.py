"""Grounded synthesis: an answer only from selected evidence, or an honest refusal.

Extractive by default: the evidence chain's reader (`query.read`) chooses sentences of the
evidence for the question's weighted terms (`query.terms`), each claim citing the exact span
it copies. The answer is withheld when its support (`query.support`, calibrated on public
data) is below the threshold, or when the evidence misses an identifier the question names (an
error code, clause or version must match exactly). An optional LLM synthesizer writes the
answer instead; its claims are checked against the evidence they cite.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import psycopg
from pydantic import Field

from tortus_pg.answer_type import AnswerType
from tortus_pg.ingest.chunking import sentence_spans
from tortus_pg.ingest.prose import is_key_line, table_header, table_row
from tortus_pg.llm import Answer
from tortus_pg.query.both import judge as judge_membership
from tortus_pg.query.compare import Comparison, Described, document, lead_with_pick
from tortus_pg.query.read import Page, Sentence, in_other_forms, lexical_shares, read_chain
from tortus_pg.query.refusal import CHECKS_OF_FORM, Refusal
from tortus_pg.query.results import Claim, ClaimSupport
from tortus_pg.query.same import judge as judge_sameness
from tortus_pg.query.same import lead_with_verdict
from tortus_pg.query.support import THRESHOLD, model_for
from tortus_pg.query.terms import Terms, lexemes

if TYPE_CHECKING:
    from tortus_pg.query.question import Question

SUPPORTED = 0.5  # share of the question's weight a relation chain, or the LLM synthesizer's evidence, must cover


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
    claims: list[Claim]
    coverage: float
    missing: list[str]
    warnings: list[str] = field(default_factory=list)
    missing_from_claims: list[str] = field(default_factory=list)  # question terms no claim covers
    draft: list[Claim] = field(default_factory=list)  # claims of an answer withheld for low coverage
    # What the support model reads of the claims, answered or drafted (`query.support`): the
    # best chain's coverage, whether the question names a documented thing, the best claim's
    # dense similarity.
    signals: dict[str, float] = field(default_factory=dict)
    refusal: Refusal | None = None  # why it is withheld


def cited_text(claims: Sequence[Claim]) -> str:
    """An answer's text: each claim followed by its citation number ("… [1] … [2]")."""
    return " ".join(f"{c.text} [{c.citation}]" for c in claims)


class Similarity(Protocol):
    """Each text's similarity to the question (cosine of embeddings), by the named embedder."""

    @property
    def name(self) -> str: ...

    def __call__(self, texts: Sequence[str]) -> Sequence[float]: ...


class Synthesizer(Protocol):
    def __call__(
        self, conn: psycopg.Connection, question: Question, evidence: Sequence[Source],
        chains: Sequence[Sequence[int]], terms: Terms, ts_config: str,
    ) -> Synthesis: ...


_TABLE_RULE = re.compile(r"[ \t]*\|?[ \t]*:?-{3,}")


def evidence_sentences(evidence: Sequence[Source]) -> list[Sentence]:
    """The sentences worth quoting: not headings or a line repeating one (a passage's title as
    its first line), not table header rows (they state nothing), not fragments of fewer than
    four words unless a key–value line ("Lead: Priya Raman"). A table row carries its table's
    column headers (`_Tables`)."""
    out = []
    for i, item in enumerate(evidence):
        headings = {" ".join(part.split()).casefold() for part in item.label.split(" > ")}
        tables = _Tables(item.text)
        for start, end in _rows_whole(item.text, sentence_spans(item.text)):
            header = tables.header(start)
            text = item.text[start:end]
            flat = " ".join(text.split())
            short = len(text.split()) < (2 if is_key_line(item.text, start) else 4)
            if text.lstrip().startswith("#") or short or flat.casefold() in headings:
                continue
            if text.startswith("|") and _TABLE_RULE.match(item.text, item.text.find("\n", end) + 1 or len(item.text)):
                continue
            out.append(Sentence(i, start, end, flat, header))
    return out


def _rows_whole(text: str, spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """`spans` with the sentences of one table row joined: a row is one record, whatever its cells
    say ("| 04:30 | Job resumed. First run purges 2.3 TB. |" reads whole, under its headers)."""
    out: list[tuple[int, int]] = []
    for start, end in spans:
        line = text.rfind("\n", 0, start) + 1
        if out and "\n" not in text[start:end] and text.rfind("\n", 0, out[-1][0]) + 1 == line and _row(text, line):
            out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


def _row(text: str, line: int) -> bool:
    """Whether the line starting at `line` is a table row."""
    end = text.find("\n", line)
    return table_row(text, line, len(text) if end < 0 else end) is not None


class _Tables:
    """The column headers of the table rows of one text, read in order: a cell means what its
    column says. The header row is looked up once per table (the rows after it share it)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.line = (-2, -2)  # the last table row's line (start, end)
        self.columns: tuple[str, ...] = ()

    def header(self, start: int) -> tuple[str, ...]:
        """The column headers of the row on the line at `start`; empty for any other line, or
        when the table's header row is not in this text."""
        line_start = self.text.rfind("\n", 0, start) + 1
        line_end = self.text.find("\n", start)
        line_end = len(self.text) if line_end < 0 else line_end
        cells = table_row(self.text, line_start, line_end)
        if cells is None:
            return ()
        if line_start not in (self.line[0], self.line[1] + 1):  # not the same table as the last row
            found = table_header(self.text, line_start)
            self.columns = tuple(found) if found else ()
        self.line = (line_start, line_end)
        return self.columns if len(self.columns) == len(cells) else ()


Verdict = tuple[Refusal, str] | None  # why an answer is withheld, with the detail its message names


def _missing_identifiers(terms: Terms, found: set[str]) -> Verdict:
    missing_ids = sorted({terms.spelled.get(i, i) for i in terms.identifiers - found})
    return (Refusal.MISSING_IDENTIFIER, ", ".join(missing_ids)) if missing_ids else None


def _untyped(kind: AnswerType | None, claims: Sequence[Claim]) -> Verdict:
    """A question asking for a checkable value (a time, a sum, a duration, an amount) that no
    claim gives is not answered, however well the claims match it."""
    if kind is None or not kind.required or any(kind.given_by(c.text) for c in claims):
        return None
    return Refusal.NO_VALUE_OF_TYPE, kind.name


def _not_about(terms: Terms, read: Read) -> Verdict:
    """An answer of one sentence must say (with its heading) one of the things the question
    names: "the Ledger Service's p99 target" is not answered by the gateway's, however well the
    sentence matches the rest. A chain's later sentences are about the bridges it leads to."""
    if read.alone is None or not terms.names or any(words <= read.alone for words in terms.names.values()):
        return None
    return Refusal.NOT_ABOUT, " or ".join(sorted(terms.names))


def _refusal(terms: Terms, found: set[str], coverage: float) -> Verdict:
    """The LLM synthesizer's checks before the model is asked: every identifier and named thing
    of the question in the evidence, and half of its weight covered."""
    unnamed = sorted(name for name, words in terms.names.items() if not words <= found)
    if verdict := _missing_identifiers(terms, found):
        return verdict
    if unnamed:
        return Refusal.MISSING_NAME, ", ".join(unnamed)
    if coverage < SUPPORTED:
        return Refusal.LOW_SUPPORT, f"{coverage:.0%} of the question's weight, at least {SUPPORTED:.0%} needed"
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


def best_chain(
    conn: psycopg.Connection, evidence: Sequence[Source], chains: Sequence[Sequence[int]], terms: Terms,
    ts_config: str = "english",
) -> tuple[list[int], float, set[str]]:
    """The chain of evidence that answers best: first the one naming most of what the question
    requires (its identifiers and named things), then the one covering most of its weight, then
    one with a sentence about the question's subject (`_keyed`).
    Returns the chain's indices, coverage and lexemes (of texts and their heading paths)."""
    sets = lexemes(conn, [f"{e.label}\n{e.text}" for e in evidence], ts_config) if evidence else []
    sentences = evidence_sentences(evidence)
    keyed = {s.evidence for s, k in zip(sentences, _keyed(conn, [s.text for s in sentences], terms, ts_config),
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


def page_of(
    conn: psycopg.Connection, evidence: Sequence[Source], chains: Sequence[Sequence[int]], terms: Terms,
    ts_config: str, similarity: Similarity | None, bridges: bool,
) -> Page:
    """What the reader reads of `evidence` (`query.read.Page`): its sentences with their lexemes,
    headings, dense similarities, groups and subjects."""
    sentences = evidence_sentences(evidence)
    if not sentences:
        return Page([], [], [], [e.label for e in evidence])
    columns = list(dict.fromkeys(s.header for s in sentences if s.header))
    found = lexemes(conn, [*(s.text for s in sentences), *(e.label for e in evidence),
                           *(" ".join(c) for c in columns)], ts_config)
    count, items = len(sentences), len(evidence)
    own, headings = found[:count], found[count:count + items]
    of_columns = dict(zip(columns, found[count + items:], strict=True))
    # A sentence reads in the context of its heading path, and a table row of its column headers too.
    context = [headings[s.evidence] | of_columns.get(s.header, set()) for s in sentences]
    dense = _dense(similarity, evidence, sentences, own, context, terms) if similarity else None
    # Without bridges (a hop budget under two) a chain is one document: crossing to another is a hop.
    group = {i: n for n, chain in enumerate(chains) for i in chain} if bridges else \
        {i: hash(e.uri) for i, e in enumerate(evidence)}
    keyed = _keyed(conn, [s.text for s in sentences], terms, ts_config)
    return Page(sentences, own, context, [e.label for e in evidence], dense,
                [group.get(i, -1 - i) for i in range(len(evidence))], keyed)


@dataclass(frozen=True)
class Read:
    """The claims the evidence chain gives (`query.read`), the lexemes they cover, the best dense
    similarity of a claim to the question, and the verdict of a question asking for a judgment
    (the option a comparison picks, yes or no)."""

    claims: list[Claim]
    covered: set[str]
    dense: float
    verdict: str | None = None
    alone: set[str] | None = None  # the lexemes of an answer of one sentence (none for a chain or a judgment)

    @property
    def text(self) -> str:
        """The answer's text: the claims with their citations, after the verdict when there is one."""
        cited = cited_text(self.claims)
        return cited if self.verdict is None else f"{self.verdict}. {cited}"


def _read(
    conn: psycopg.Connection, question: Question, evidence: Sequence[Source], chains: Sequence[Sequence[int]],
    terms: Terms, ts_config: str, kind: AnswerType | None, similarity: Similarity | None, bridges: bool,
) -> Read:
    """What the evidence chain says for `question` (`Read`)."""
    page = page_of(conn, evidence, chains, terms, ts_config, similarity, bridges)
    if not page.sentences:
        return Read([], set(), 0.0)
    sentences, own, context, dense = page.sentences, page.own, page.context, page.dense
    reading = read_chain(page, terms.weights, kind, question.asked, bridges)
    comparison, labels = question.comparison, [e.label for e in evidence]
    if comparison is not None:  # "…, A or B?": the values compared lead, the option they favour answers
        described = _options_described(conn, comparison, labels, ts_config)
        reading = lead_with_pick(reading, comparison, page, terms.weights, described)
    if question.sameness is not None:  # "Are A and B from the same country?": the origins lead, yes or no
        reading = lead_with_verdict(reading, judge_sameness(question.sameness, sentences, labels))
    if question.membership is not None:  # "Are A and B both board games?": their descriptions lead
        of_kind = frozenset(lexemes(conn, [question.membership.kind], ts_config)[0])
        reading = lead_with_verdict(reading, judge_membership(question.membership, of_kind, sentences, labels, own))
    claims = []
    for n, j in enumerate(reading.chosen, 1):
        s = sentences[j]
        item = evidence[s.evidence]
        claims.append(Claim(
            s.text, n, s.evidence, item.uri, item.page, (item.start + s.start, item.start + s.end),
            matched_terms=tuple(sorted(t for t in own[j] | context[j] if t in terms.weights)),
            short_answer=reading.short if j == reading.answer and reading.short else None,
        ))
    best = max((dense[j] for j in reading.chosen), default=0.0) if dense else 0.0
    alone = own[reading.chosen[0]] | context[reading.chosen[0]] \
        if len(reading.chosen) == 1 and reading.verdict is None else None
    return Read(claims, set(reading.covered), best, reading.verdict, alone)


def _options_described(conn: psycopg.Connection, comparison: Comparison, labels: Sequence[str],
                       ts_config: str) -> Described:
    """The lexemes of a comparison's options and of the evidence documents' titles."""
    titles = list(dict.fromkeys(document(label) for label in labels))
    found = lexemes(conn, [*comparison.options, *titles], ts_config)
    return Described((found[0], found[1]), dict(zip(titles, found[2:], strict=True)))


# Sentences embedded per reading, the best lexical matches first: twelve cost 120 ms more at
# p95 on hotpotqa-train100 for one more answer with the expected text.
DENSE_CANDIDATES = 6


def _dense(
    similarity: Similarity, evidence: Sequence[Source], sentences: Sequence[Sentence], own: Sequence[set[str]],
    context: Sequence[set[str]], terms: Terms,
) -> list[float]:
    """Each sentence's similarity to the question, for the DENSE_CANDIDATES sentences that match
    its terms best (0 for the others): embedding every sentence of the evidence, after every
    bridge, cost nine times the rest of the question's time."""
    shares = lexical_shares(*in_other_forms(own, context, terms.weights), terms.weights)
    best = sorted(range(len(sentences)), key=lambda j: -shares[j])[:DENSE_CANDIDATES]
    scores = similarity([f"{evidence[sentences[j].evidence].label}: {sentences[j].read_as}" for j in best])
    dense = [0.0] * len(sentences)
    for j, score in zip(best, scores, strict=True):
        dense[j] = score
    return dense


def extractive(
    conn: psycopg.Connection, question: Question, evidence: Sequence[Source], chains: Sequence[Sequence[int]],
    terms: Terms, ts_config: str = "english", similarity: Similarity | None = None, bridges: bool = True,
    min_support: float | None = None,
) -> Synthesis:
    """Read the evidence chain (`query.read`) and answer with its sentences when the support
    model (`query.support`) rates them at least `min_support` (default THRESHOLD); otherwise
    withhold them as a draft (the engine may follow a bridge they name to the rest of the
    answer). Checks of form withhold whatever the support: an identifier the question names that
    no evidence mentions, a value the question asks for (a time, a sum …) that no claim gives."""
    _, coverage, found = best_chain(conn, evidence, chains, terms, ts_config)
    missing = sorted(t for t in terms.weights if t not in found)
    kind = question.answer_type
    read = _read(conn, question, evidence, chains, terms, ts_config, kind, similarity, bridges)
    claims, covered, dense = read.claims, read.covered, read.dense
    uncovered = sorted((t for t in terms.weights if t not in covered), key=lambda t: -terms.weights[t])
    signals = {"coverage": coverage, "named": float(bool(terms.names)), **({"dense": dense} if similarity else {})}
    supported = model_for(similarity.name if similarity else None).probability(signals)
    verdict = _missing_identifiers(terms, found) or (None if claims else (Refusal.NO_SENTENCE, "")) \
        or _untyped(kind, claims) or _not_about(terms, read)
    needed = THRESHOLD if min_support is None else min_support
    if verdict is None and supported < needed:
        verdict = Refusal.LOW_SUPPORT, f"support {supported:.2f}, {needed:.2f} needed"
    if verdict is not None:
        refusal, detail = verdict
        confidence = 0.0 if refusal in CHECKS_OF_FORM else supported
        return Synthesis(None, True, confidence, [], coverage, missing, [refusal.message(detail)],
                         missing_from_claims=uncovered, draft=claims, signals=signals, refusal=refusal)
    return Synthesis(read.text, False, supported, claims, coverage, missing, missing_from_claims=uncovered,
                     signals=signals)


def synthesize(
    conn: psycopg.Connection,
    question: Question,
    evidence: Sequence[Source],
    chains: Sequence[Sequence[int]] | None = None,
    *,
    ts_config: str = "english",
    synthesizer: Synthesizer | None = None,
    similarity: Similarity | None = None,
    bridges: bool = True,
    min_support: float | None = None,
) -> Synthesis:
    """An answer to `question`, whose terms are weighed, from `evidence` alone (extractive unless
    another synthesizer is given); `chains` groups evidence that may answer together (default:
    all of it); the names in its terms are what the question is about, which the answering
    chain must mention; `similarity` scores texts against the question for the reader; without
    `bridges` (a hop budget under two) the reader follows none; an extractive answer needs support
    `min_support` (the policy's)."""
    terms = question.terms
    if terms is None:
        raise ValueError("synthesis needs the question's weighted terms")
    groups = chains if chains is not None else [list(range(len(evidence)))]
    if synthesizer is not None:
        return synthesizer(conn, question, evidence, groups, terms, ts_config)
    return extractive(conn, question, evidence, groups, terms, ts_config, similarity, bridges, min_support)


_LLM_SYSTEM = """Answer the question only from the numbered evidence. Every claim must cite the \
evidence numbers that state it. If the evidence does not answer the question, set answerable to \
false and give no claims. Do not use outside knowledge."""

class _Claim(Answer):
    text: str = Field(max_length=1000)
    citations: list[int] = Field(max_length=8)


class GroundedAnswer(Answer):
    """What the chat model is asked for: claims, each citing the evidence numbers that state it."""

    answerable: bool
    claims: list[_Claim] = Field(max_length=8)


SUPPORT_SHARE = 0.6  # of a claim's words that its cited evidence must contain


class ChatModel(Protocol):
    def complete_json(self, system: str, user: str, answer: type[GroundedAnswer], *,
                      schema_name: str) -> GroundedAnswer: ...


class LLMSynthesizer:
    """Synthesis by an OpenAI-compatible chat model, checked against the evidence: a claim is
    supported when its cited evidence contains at least SUPPORT_SHARE of its words (as lexemes),
    unsupported otherwise (kept, flagged and left out of the confidence). The same refusal rules
    as extractive synthesis apply before the model is asked."""

    def __init__(self, model: ChatModel) -> None:
        self.model = model

    def __call__(
        self, conn: psycopg.Connection, question: Question, evidence: Sequence[Source],
        chains: Sequence[Sequence[int]], terms: Terms, ts_config: str = "english",
    ) -> Synthesis:
        chain, coverage, found = best_chain(conn, evidence, chains, terms, ts_config)
        missing = sorted(t for t in terms.weights if t not in found)
        verdict = _refusal(terms, found, coverage)
        if verdict is not None:
            refusal, detail = verdict
            return Synthesis(None, True, 0.0, [], coverage, missing, [refusal.message(detail)], refusal=refusal)
        numbered = "\n\n".join(f"[{n}] {evidence[i].text}" for n, i in enumerate(chain, 1))
        reply = self.model.complete_json(_LLM_SYSTEM, f"Question: {question.text}\n\nEvidence:\n{numbered}",
                                         GroundedAnswer, schema_name="grounded_answer")
        drafted = [c for c in reply.claims if c.text.strip()]
        if not reply.answerable or not drafted:
            return Synthesis(None, True, 0.0, [], coverage, missing, [Refusal.MODEL_DECLINED.message()],
                             refusal=Refusal.MODEL_DECLINED)
        claim_sets = lexemes(conn, [c.text for c in drafted], ts_config)
        cited_sets = lexemes(conn, [evidence[i].text for i in chain], ts_config)
        claims: list[Claim] = []
        notes: list[str] = []
        for n, (claim, words) in enumerate(zip(drafted, claim_sets, strict=True), 1):
            cited = [c for c in dict.fromkeys(claim.citations) if 1 <= c <= len(chain)]
            support_words = set().union(*(cited_sets[c - 1] for c in cited)) if cited else set()
            share = len(words & support_words) / len(words) if words else 0.0
            supported = bool(cited) and share >= SUPPORT_SHARE
            if not supported:
                notes.append(f"claim {n} is not supported by the evidence it cites")
            first = evidence[chain[cited[0] - 1]] if cited else None
            claims.append(Claim(
                claim.text.strip(), n, chain[cited[0] - 1] if cited else None, first.uri if first else None,
                first.page if first else None, (first.start, first.end) if first else None,
                ClaimSupport.SUPPORTED if supported else ClaimSupport.UNSUPPORTED, support_share=round(share, 3),
            ))
        if not any(c.support is ClaimSupport.SUPPORTED for c in claims):
            return Synthesis(None, True, 0.0, claims, coverage, missing, [Refusal.MODEL_UNSUPPORTED.message(), *notes],
                             refusal=Refusal.MODEL_UNSUPPORTED)
        kind = question.answer_type
        if kind is not None and kind.required and not any(kind.given_by(c.text) for c in claims
                                                          if c.support is ClaimSupport.SUPPORTED):
            return Synthesis(None, True, 0.0, claims, coverage, missing,
                             [Refusal.NO_VALUE_OF_TYPE.message(kind.name), *notes], refusal=Refusal.NO_VALUE_OF_TYPE)
        answer = cited_text(claims)
        supported_share = sum(c.support is ClaimSupport.SUPPORTED for c in claims) / len(claims)
        return Synthesis(answer, False, round(coverage * supported_share, 4), claims, coverage, missing, notes)
