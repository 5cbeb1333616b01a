"""Deterministic concept and edge extraction from chunked documents.

Concepts are names, acronyms, identifiers and a few key phrases per chunk, plus the
document title; each keeps every mention as an exact span of the document text. Edges
come from cue phrases ("X depends on Y") between the nearest concepts on either side of
the cue, and from co-occurrence within a sentence.
"""

from __future__ import annotations

import functools
import itertools
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from tortus_pg.ingest import prose
from tortus_pg.ingest.chunking import code_fence_spans, sentence_spans
from tortus_pg.ingest.types import Chunk, Concept, Document, ExtractedEdge, Extraction, Mention

# --- concept keys -------------------------------------------------------------------------


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_TRANSLATE = str.maketrans(
    {
        "\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-", "\u2014": "-",
        "\u2212": "-", "\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"',
    }
)  # fmt: skip
_SPACES = re.compile(r"\s+")
_SPACED_HYPHEN = re.compile(r" ?- ?")
_ARTICLE = re.compile(r"^(?:the|a|an) (?=\S)")
_INITIALS = re.compile(r"\b(\w)\. (?=\w\.)")  # "a. t. ummer" -> "a.t. ummer"
_POSSESSIVE = re.compile(r"(?<=\w)'s$")
_KEEP_AT_END = frozenset("#%&@_")
_PAIRS = {")": "(", "]": "[", "}": "{"}
_PLURAL_KEEP = _words(
    "news series species means physics mathematics economics politics ethics analysis basis "
    "status bus gas lens chaos bias canvas atlas corpus virus census campus bonus focus "
    "thesis crisis axis alias always perhaps whereas various previous famous"
)
_STRIP_S_ONLY = _words("caches niches headaches avalanches moustaches")


def concept_key(label: str, *, fold_plural: bool = False) -> str:
    """Normalize a concept label into the key that identifies it across documents.

    NFKC, casefold, dashes and quotes unified, whitespace collapsed (also around hyphens),
    punctuation stripped at the ends, possessive 's and a leading article removed. With
    `fold_plural` (used for lowercase key phrases, never for names) the last word is
    singularized. Idempotent: `concept_key(concept_key(x)) == concept_key(x)`.
    """
    return _cached_key(label, fold_plural)


@functools.lru_cache(maxsize=1 << 16)
def _cached_key(label: str, fold_plural: bool) -> str:
    key = label
    for _ in range(8):
        previous = key
        key = unicodedata.normalize("NFKC", key).translate(_TRANSLATE).casefold()
        key = _SPACED_HYPHEN.sub("-", _SPACES.sub(" ", key).strip())
        key = _strip_ends(key)
        key = _INITIALS.sub(r"\1.", _POSSESSIVE.sub("", key))
        key = _ARTICLE.sub("", key, count=1)
        if fold_plural:
            key = _fold_last_word(key)
        if key == previous:
            break
    return key


def _strip_ends(key: str) -> str:
    start, end = 0, len(key)
    while start < end and _strippable(key[start], key, at_start=True):
        start += 1
    while end > start and _strippable(key[end - 1], key[start:end], at_start=False):
        end -= 1
    key = key[start:end].strip()
    if len(key) > 1 and _PAIRS.get(key[-1]) == key[0] and _balanced(key[1:-1]):
        key = key[1:-1].strip()  # "(Lehman Brothers)"
    return key


def _balanced(text: str) -> bool:
    depth = 0
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth < 0:
                return False
    return depth == 0


def _strippable(ch: str, s: str, *, at_start: bool) -> bool:
    if ch.isspace() or ch in "`\u00b4":
        return True
    if ch in _KEEP_AT_END or not unicodedata.category(ch).startswith("P"):
        return False
    if at_start:
        return ch not in "([{" or not any(c in s for c in ")]}")
    if ch in _PAIRS:
        return _PAIRS[ch] not in s
    return True


def _fold_last_word(key: str) -> str:
    head, _, word = key.rpartition(" ")
    if len(word) <= 3 or not word.isalpha() or not word.endswith("s") or word in _PLURAL_KEEP:
        return key
    if word in _STRIP_S_ONLY:
        word = word[:-1]
    elif word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith(("sses", "xes", "ches", "shes")):
        word = word[:-2]
    elif not word.endswith(("ss", "us", "is", "ics", "ous")):
        word = word[:-1]
    return f"{head} {word}" if head else word


# --- surface patterns ---------------------------------------------------------------------

_TOKEN = re.compile(r"[^\W_](?:\w|['\u2019.\-](?=[^\W_]))*")
_VERSION = re.compile(r"[vV]?\d+(?:\.\d+){1,3}")
_BARE_VERSION = re.compile(r"[vV]\d+(?:\.\d+)+")
_VERSION_START = frozenset("0123456789vV")
_NUMBER = re.compile(r"\d{2,6}")
_NEGATION = re.compile(r"(?:\bnot|\bnever|n't|\bno longer|\bcannot)\s+(?:\w+\s+)?$", re.I)

_WORD = re.compile(r"[^\W_]+")
_ID_KIND = {"INC": "event", "INCIDENT": "event", "SEV": "event", "OUTAGE": "event"}
_ID_KIND |= {"PIR": "event", "ADR": "decision", "DECISION": "decision"}

_CAMEL_SUFFIXES = _words(
    "Service Client Api API Manager Handler Controller Factory Error Exception Config "
    "Provider Repository Store Queue Worker Request Response Builder Adapter Gateway Proxy"
)
_CAMEL_HUMP = re.compile(r"[A-Z][a-z0-9]+")


_Classifier = Callable[[str], str | None]


def _id_kind(ident: str) -> str | None:
    return _ID_KIND.get(ident.split("-", 1)[0].upper(), "entity")


def _camel_kind(word: str) -> str | None:
    humps = _CAMEL_HUMP.findall(word)
    # Two-hump names ("McDonald", "PlayStation") are names unless they end like code.
    return "api" if len(humps) >= 3 or humps[-1] in _CAMEL_SUFFIXES else None


def _lower_camel_kind(word: str) -> str | None:
    return "api" if word[1:2].islower() else None  # not "iPhone", "eBay"


def _numbered_kind(word: str) -> str | None:
    return "entity" if any(c.isdigit() for c in word) and not word.rsplit("-", 1)[-1].isalpha() else None


def _constant(kind: str) -> _Classifier:
    return lambda _: kind


# (pattern, group, substrings one of which the sentence must contain, classifier), in
# tie-break order: the longest match wins, then the earlier row.
_DETECTORS: tuple[tuple[re.Pattern[str], int, tuple[str, ...], _Classifier], ...] = (
    (re.compile(r"\b[A-Z][A-Z0-9]{0,9}(?:-\d+)+\b"), 0, ("-",), _id_kind),
    (re.compile(r"\b[A-Z]{1,3}\d{3,5}\b"), 0, (), _id_kind),
    (
        re.compile(
            r"(?:\b(?:clause|section|article|paragraph|annex|appendix)\s+|\u00a7\s*)"
            r"\d+(?:\.\d+)*[a-z]?\b",
            re.I,
        ),
        0,
        ("lause", "ection", "rticle", "aragraph", "nnex", "ppendix", "\u00a7"),
        _constant("entity"),
    ),
    (
        re.compile(
            r"(?:\b(?:GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS)\s+|(?<![\w/.:~\-]))"
            r"/[A-Za-z{][\w.{}:~\-]*(?:/[\w.{}:~\-]+)*/?"
        ),
        0,
        ("/",),
        _constant("api"),
    ),
    (re.compile(r"\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*\(\)"), 0, ("()",), _constant("api")),
    (
        re.compile(r"\b_*[A-Za-z][A-Za-z0-9]*(?:_+[A-Za-z0-9]+)+\b"),
        0,
        ("_",),
        _constant("api"),
    ),
    (
        re.compile(
            r"\b[a-z][a-z0-9]*(?:-[a-z0-9]+)*-(?:api|service|svc|db|server|worker|gateway|"
            r"client|sdk|cli|proxy|queue|job|cron|lambda)\b"
        ),
        0,
        ("-",),
        _constant("api"),
    ),
    # Lowercase names with a number: hosts, clusters, buckets ("kestrel-2", "bay-sql-01").
    (re.compile(r"\b[a-z][a-z0-9]+(?:-[a-z0-9]+)+\b"), 0, ("-",), _numbered_kind),
    (re.compile(r"\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]+)+\b"), 0, (), _camel_kind),
    (re.compile(r"\b[a-z][a-z0-9]+[A-Z]\w*"), 0, (), _lower_camel_kind),
    (re.compile(r"`([^`\n]{1,80})`"), 1, ("`",), _constant("api")),
    # URLs and e-mail addresses claim their span so nothing inside becomes a concept.
    (
        re.compile(r"\b(?:https?|ftp)://[^\s<>()\[\]\"'`]+|\b[\w.+-]+@[\w-]+\.[\w.-]+\b"),
        0,
        ("://", "@"),
        _constant(""),
    ),
)

_STOP = _words(
    """a about above after again against all also although am among an and another any are
    around as at be became because become been before being below between both but by can
    could did do does doing done down during each either else even ever every few for from
    further had has have having he her here hers herself him himself his how however i if in
    into is it its itself just least less like many may me might more most much must my
    myself neither no nor not now of off often on once one only onto or other others our ours
    out over own per rather same several she should since so some such than that the their
    theirs them then there these they this those though through thus to too toward towards
    under until up upon us very via was we well were what when where whether which while who
    whom whose why will with within without would yet you your yours later today
    make makes made take takes took taken get gets got give
    gives gave given use uses used using known named born died include includes
    included including contain contains contained depends depend depended relies rely relied
    requires require required calls call called caused causes cause causing implements
    implemented supports supported confirms confirmed contradicts contradicted conflicts owns
    owned affects affected impacted impacts supersedes superseded replaces replaced part led
    leads lead resulted results due new first second third last next former latter"""
)
_CALENDAR = _words(
    """january february march april may june july august september october november december
    monday tuesday wednesday thursday friday saturday sunday"""
)
_CAP_STOP = (
    _STOP
    | _CALENDAR
    | _words(
        """according despite unlike following although meanwhile moreover furthermore
        therefore instead yes hello see note"""
    )
)
_LY_NOUNS = _words(
    "family supply assembly reply anomaly monopoly italy july rally ally belly jelly fly "
    "poly assembly butterfly firefly dragonfly lily"
)
_CONNECTORS = _words(
    "of the de von van der den da di del du la le des dos das zu ter af av al el bin ibn and \u00e0"
)
_LEADING_DROP = _CALENDAR | _words("the a an this that these those his her its their our my your")
_QUOTES = frozenset("\"'\u201c\u201d\u2018\u2019")
_NAME_TITLES = _words("st dr mr mrs ms jr sr mt ft prof gen col lt sgt capt rev hon")

_FWD, _REV, _PREFIX = "fwd", "rev", "prefix"
_BE = r"(?:is|are|was|were|been|being)\s+"
# Cue phrase -> (edge type, confidence, shape). fwd: "X cue Y" gives X->Y; rev: "Y cue X"
# gives X->Y; prefix: "cue Y" with X the nearest concept before (or else after) the phrase.
# At one position the first alternative wins, so passive forms come before active ones.
CUES: tuple[tuple[str, str, float, str], ...] = (
    (rf"(?:{_BE})?caused\s+by", "caused_by", 0.85, _FWD),
    (r"(?:resulted|results|resulting|stemmed|stems)\s+from", "caused_by", 0.75, _FWD),
    (r"because\s+of|due\s+to|owing\s+to|as\s+a\s+result\s+of", "caused_by", 0.7, _PREFIX),
    (r"caused|causes|causing|triggered|triggers", "caused_by", 0.75, _REV),
    (r"(?:led|leads)\s+to|(?:resulted|results)\s+in", "caused_by", 0.6, _REV),
    (r"(?:depends|depend|depended)\s+(?:up)?on", "depends_on", 0.85, _FWD),
    (r"(?:relies|rely|relied)\s+(?:up)?on", "depends_on", 0.85, _FWD),
    (rf"(?:{_BE})?required\s+by", "depends_on", 0.7, _REV),
    (r"requires|require", "depends_on", 0.7, _FWD),
    (r"(?:(?:everyone|everybody|people|we|staff)\s+)?(?:calls|call|called)\s+it", "same_as", 0.8, _FWD),
    (rf"(?:{_BE})?(?:also\s+|internally\s+|often\s+)?(?:known|referred\s+to)\s+(?:internally\s+)?as",
     "same_as", 0.8, _FWD),
    (r"calls|invokes", "depends_on", 0.6, _FWD),
    (rf"(?:{_BE})?implemented\s+by", "implements", 0.8, _REV),
    (r"implements|implemented", "implements", 0.8, _FWD),
    (rf"(?:{_BE})?(?:supported|confirmed)\s+by", "supports", 0.7, _REV),
    (r"supports|supported|confirms|confirmed|corroborates", "supports", 0.7, _FWD),
    (r"contradicts|contradicted|contradict|(?:conflicts|conflicted|conflict)\s+with|"
     rf"{_BE}inconsistent\s+with", "contradicts", 0.8, _FWD),
    (r"contrary\s+to", "contradicts", 0.7, _PREFIX),
    (rf"(?:{_BE})?(?:owned|maintained)\s+by", "owned_by", 0.85, _FWD),
    (r"owns|owned|maintains|maintain", "owned_by", 0.75, _REV),
    (rf"(?:{_BE})?(?:run|led|headed|managed)\s+by", "led_by", 0.8, _FWD),
    # Not the noun: "squad leads take turns".
    (r"(?<!team\s)(?<!squad\s)(?<!group\s)(?<!tech\s)(?:leads|heads(?:\s+up)?)", "led_by", 0.7, _REV),
    (rf"(?:{_BE})?(?:affected|impacted)\s+by", "affects", 0.75, _REV),
    (r"affects|affected|impacts|impacted", "affects", 0.75, _FWD),
    (rf"(?:{_BE})?(?:superseded|replaced)\s+by", "supersedes", 0.85, _REV),
    (r"supersedes|superseded|replaces|replaced", "supersedes", 0.8, _FWD),
    (rf"(?:{_BE})?(?:a\s+)?part\s+of|belongs\s+to", "part_of", 0.75, _FWD),
)  # fmt: skip
_CUE_RE = re.compile(
    "(?:" + "|".join(f"(?P<c{i}>{p})" for i, (p, _, _, _) in enumerate(CUES)) + r")\b",
    re.I,
)
# Words a cue can start with (any word not right after a required space); the cue regex is
# only tried at tokens from this set.
_CUE_WORDS = frozenset(
    m.group(2)
    for pattern, _, _, _ in CUES
    for m in re.finditer(r"(\\s\+(?:\(\?:)?)?([a-z]{2,})", pattern)
    if not m.group(1)
)

KIND_PRIORITY = {"event": 0, "decision": 1, "api": 2, "entity": 3, "concept": 4}
MAX_PHRASES_PER_CHUNK = 3
MAX_COOCCURRING = 6
# Stated by a key–value line or a table row: typed by its key (as sure as a cue), or related
# under the key's name (above a co-occurrence's 0.3–0.5).
KEYED_RELATION, KEYED_RELATED = 0.8, 0.6

Span = tuple[int, int]


@dataclass(frozen=True)
class _Hit:
    start: int
    end: int
    key: str
    label: str
    kind: str  # "" for spans that only block other matches (URLs)


@dataclass
class _Sentence:
    chunk: int
    start: int
    end: int
    tokens: list[Span]
    in_code: bool
    hits: list[_Hit]
    keys: list[prose.KeyValue]  # its "Key: value" lines


_CLAUSE_HEADING = re.compile(r"^\d+(?:\.\d+)+$")


def heading_label(heading: str) -> str:
    """How a heading names its section: a bare number ("7.3.2") marks a numbered provision of
    a policy or standard, which the text elsewhere cites as "clause 7.3.2"."""
    return f"clause {heading}" if _CLAUSE_HEADING.match(heading) else heading


def _definitions(
    chunks: list[Chunk], title_key: str, concepts: tuple[Concept, ...]
) -> tuple[tuple[Concept, ...], tuple[tuple[int, str], ...]]:
    """Where concepts are defined: the title's concept in the first chunk, a clause in the chunk
    headed by its number. A clause nobody cites yet becomes a concept without mentions."""
    defines = [(chunks[0].index, title_key)] if title_key else []
    known = {c.key for c in concepts}
    added: list[Concept] = []
    for chunk in chunks:
        if chunk.headings and _CLAUSE_HEADING.match(chunk.headings[-1]):
            label = heading_label(chunk.headings[-1])
            key = concept_key(label)
            if key not in known:
                known.add(key)
                added.append(Concept(key, label, "entity"))
            defines.append((chunk.index, key))
    return concepts + tuple(added), tuple(dict.fromkeys(defines))


def extract_concepts(doc: Document, chunks: list[Chunk], *, title: str | None = None) -> Extraction:
    """Extract concepts (with exact mentions) and typed edges from a chunked document.

    `title` (default `doc.title`) becomes an entity concept with a mention in the first
    chunk, so mentions of that name in other documents link to the document about it.
    """
    if not chunks:
        return Extraction()
    text = doc.text
    sentences = _sentences(doc, chunks)
    title_hits = _title_hits(text, chunks[0], title if title is not None else doc.title)
    title_key = title_hits[0].key if title_hits else ""
    known_caps = _known_capitalized(text, sentences)
    for sent in sentences:
        hits = _detect_patterns(text, sent)
        if not sent.in_code:
            hits += _names(text, sent, hits, known_caps, title_hits)
        spans = {(h.start, h.end) for h in hits}
        hits += [
            h
            for h in title_hits
            if sent.start <= h.start and h.end <= sent.end and (h.start, h.end) not in spans
        ]
        sent.hits = hits
    _add_key_phrases(text, sentences)
    for sent in sentences:
        # The key of a "Key: value" line names a field, not a thing.
        keys = [k.key_span for k in sent.keys]
        sent.hits = [h for h in sent.hits if not any(s <= h.start and h.end <= e for s, e in keys)]
    concepts, defines = _definitions(chunks, title_key, _concepts(title_hits, title_key, chunks[0].index, sentences))
    return Extraction(concepts=concepts, edges=_edges(text, sentences, title_hits[0] if title_hits else None),
                      defines=defines)


def _sentences(doc: Document, chunks: list[Chunk]) -> list[_Sentence]:
    fences = code_fence_spans(doc.text) if doc.kind in ("markdown", "html") else []
    out: list[_Sentence] = []
    for chunk in chunks:
        for s, e in sentence_spans(doc.text, chunk.start, chunk.end):
            in_code = any(fs <= s < fe for fs, fe in fences)
            tokens = [m.span() for m in _TOKEN.finditer(doc.text, s, e)]
            out.append(_Sentence(chunk.index, s, e, tokens, in_code, [], prose.key_values(doc.text, s, e)))
    return out


def _title_hits(text: str, first: Chunk, title: str | None) -> list[_Hit]:
    """Mentions of the title concept: its occurrences, or else the whole first chunk.

    A trailing disambiguator is dropped ("Get Low (Lil Jon song)" -> "Get Low"); middle
    initials and spacing around hyphens in the text do not prevent a match.
    """
    if not title or not title.strip():
        return []
    base = re.sub(r"\s*\([^()]*\)\s*$", "", title.strip()) or title.strip()
    key = concept_key(base)
    if not key:
        return []
    kind = (_id_kind(base) or "entity") if _DETECTORS[0][0].fullmatch(base) else "entity"
    want = [w.lower() for w in _WORD.findall(base)]
    hits: list[_Hit] = []
    lowered = text.lower()
    if want and len(lowered) == len(text):  # lower() kept offsets, so find() can locate
        pos = lowered.find(want[0])
        while pos >= 0:
            if pos == 0 or not lowered[pos - 1].isalnum():
                words = [
                    (m.start(), m.end(), m.group(0).lower())
                    for m in itertools.islice(_WORD.finditer(text, pos), 2 * len(want))
                ]
                end = _match_words(text, words, want)
                if end is not None:
                    hits.append(_Hit(pos, end, key, base, kind))
            pos = lowered.find(want[0], pos + 1)
    if not any(first.start <= h.start and h.end <= first.end for h in hits):
        hits.insert(0, _Hit(first.start, first.end, key, base, kind))
    return hits


def _match_words(text: str, words: list[tuple[int, int, str]], want: list[str]) -> int | None:
    """End of `want` matched from words[0] on, skipping middle initials; None if no match."""
    if not words or words[0][2] != want[0]:
        return None
    j = 0
    for wanted in want[1:]:
        j += 1
        while j < len(words) and words[j][1] - words[j][0] == 1 and words[j][2] != wanted:
            j += 1  # a middle initial
        if j >= len(words) or words[j][2] != wanted:
            return None
        gap = text[words[j - 1][1] : words[j][0]]
        if len(gap) > 3 or gap.strip(" .-'&\u2019"):
            return None
    return words[j][1]


def _known_capitalized(text: str, sentences: list[_Sentence]) -> set[str]:
    """Capitalized words seen away from a sentence start: names rather than sentence case."""
    known: set[str] = set()
    for sent in sentences:
        for s, e in sent.tokens[1:]:
            if text[s].isupper():
                known.add(text[s:e].casefold())
    return known


def _detect_patterns(text: str, sent: _Sentence) -> list[_Hit]:
    found: list[tuple[int, int, int, str]] = []  # start, end, row, kind
    snippet = text[sent.start : sent.end]
    for row, (pattern, group, needs, classify) in enumerate(_DETECTORS):
        if needs and not any(n in snippet for n in needs):
            continue
        for m in pattern.finditer(text, sent.start, sent.end):
            kind = classify(m.group(0))
            if kind is not None and (not sent.in_code or kind in ("api", "")):
                found.append((m.start(group), m.end(group), row, kind))
    found.sort(key=lambda f: (f[0], f[0] - f[1], f[2]))
    hits: list[_Hit] = []
    last_end = -1
    for start, end, _, kind in found:
        if start >= last_end:
            last_end = end
            label = text[start:end]
            key = concept_key(label) if kind else ""
            hits.append(_Hit(start, end, key, label, kind if key else ""))
    return hits


def _free_tokens(sent: _Sentence, hits: list[_Hit]) -> list[Span]:
    """Tokens of the sentence that no hit overlaps."""
    if not hits:
        return sent.tokens
    offset = sent.start
    covered = bytearray(sent.end - offset)
    for h in hits:
        covered[h.start - offset : h.end - offset] = b"\x01" * (h.end - h.start)
    return [t for t in sent.tokens if 1 not in covered[t[0] - offset : t[1] - offset]]


def _names(
    text: str, sent: _Sentence, claimed: list[_Hit], known_caps: set[str], title_hits: list[_Hit]
) -> list[_Hit]:
    """Capitalized names, acronyms and versioned product names in one sentence."""
    tokens = _free_tokens(sent, claimed)
    title_key = title_hits[0].key if title_hits else ""
    title_spans = {(h.start, h.end) for h in title_hits}
    first_token = sent.tokens[0] if sent.tokens else (-1, -1)
    hits: list[_Hit] = []
    for run in _name_runs(text, tokens):
        for part in _split_and(text, run):
            # Sentence case capitalizes any first word; elsewhere "Per Blom" is a name.
            drop = _CAP_STOP if part and part[0] == first_token else _LEADING_DROP
            while part and text[part[0][0] : part[0][1]].casefold() in drop:
                if (
                    _is_acronym(text[part[0][0] : part[0][1]])
                    or text[part[0][1] : part[0][1] + 1] == "."
                ):
                    break
                part = part[1:]
                while part and text[part[0][0]].islower():  # "April the Committee ..."
                    part = part[1:]
            if not part:
                continue
            start, end = part[0][0], _strip_possessive(text, part[-1])
            label = text[start:end]
            key = concept_key(label)
            if len(part) == 1 and not _is_acronym(label):
                sentence_case = part[0] == first_token and label.casefold() not in known_caps
                if _is_stop_name(label) or (sentence_case and key != title_key):
                    continue
            if (start, end) in title_spans:
                key, label = title_key, title_hits[0].label
            if key:
                hits.append(_Hit(start, end, key, label, "entity"))
                hits += _versioned(text, start, part[-1], tokens)
    for s, e in tokens:
        if _BARE_VERSION.fullmatch(text, s, e) and not any(h.end <= s < h.end + 2 for h in hits):
            hits.append(_Hit(s, e, concept_key(text[s:e]), text[s:e], "entity"))
    return hits


def _name_runs(text: str, tokens: list[Span]) -> list[list[Span]]:
    """Runs of capitalized tokens, joined by connectors ("Bank of England")."""
    runs: list[list[Span]] = []
    run: list[Span] = []
    connectors: list[Span] = []  # "of", "van der", "and" waiting for a name after them
    for tok in tokens:
        first = text[tok[0]]
        if first.isupper():
            if run and _gap_ok(text, connectors[-1] if connectors else run[-1], tok):
                run += connectors
            elif run:
                runs.append(run)
                run = []
            connectors = []
            run.append(tok)
            if text.startswith(("'s", "\u2019s"), tok[1] - 2):
                runs.append(run)
                run = []
        elif (
            run
            and len(connectors) < 2
            and text[tok[0] : tok[1]] in _CONNECTORS
            and _gap_ok(text, connectors[-1] if connectors else run[-1], tok)
        ):
            connectors.append(tok)
        else:
            if run:
                runs.append(run)
            run, connectors = [], []
    if run:
        runs.append(run)
    return runs


def _gap_ok(text: str, prev: Span, tok: Span) -> bool:
    gap = text[prev[1] : tok[0]]
    if "\n" in gap and prose.is_key_line(text, tok[0]):
        return False  # a name does not run on into the key of a "Key: value" line
    if gap.isspace() and "\n\n" not in gap:
        return True
    prev_word = text[prev[0] : prev[1]]
    short = len(prev_word) == 1 or prev_word.casefold() in _NAME_TITLES
    return short and len(gap) > 1 and gap[0] == "." and gap[1:].isspace()


def _split_and(text: str, run: list[Span]) -> Iterable[list[Span]]:
    """'A and B' yields A and B; the whole too for two single words or a quoted title."""
    cuts = [i for i, (s, e) in enumerate(run) if text[s:e] == "and"]
    if not cuts:
        yield _drop_lone_letters(text, run)
        return
    bounds = [-1, *cuts, len(run)]
    parts = [run[bounds[i] + 1 : bounds[i + 1]] for i in range(len(bounds) - 1)]
    for part in parts:
        yield _drop_lone_letters(text, part)
    before = text[max(0, run[0][0] - 2) : run[0][0]].strip()
    quoted = before[-1:] in _QUOTES and text[run[-1][1] : run[-1][1] + 1] in _QUOTES
    if quoted or (len(parts) == 2 and all(len(p) == 1 for p in parts)):
        yield run


def _drop_lone_letters(text: str, part: list[Span]) -> list[Span]:
    # A leading capital letter is a name part only as an initial ("A. T. Ummer"), not "A"/"I".
    while part and part[0][1] - part[0][0] == 1 and text[part[0][1] : part[0][1] + 1] != ".":
        part = part[1:]
    return part


def _is_stop_name(word: str) -> bool:
    return word.casefold() in _CAP_STOP and not _is_acronym(word)


def _strip_possessive(text: str, tok: Span) -> int:
    s, e = tok
    return e - 2 if e - s > 2 and text.startswith(("'s", "\u2019s"), e - 2) else e


def _is_acronym(word: str) -> bool:
    return word.isupper() and 2 <= sum(c.isalpha() for c in word) <= 6


def _versioned(text: str, start: int, last: Span, tokens: list[Span]) -> list[_Hit]:
    """'PostgreSQL 15.4', 'TLS 1.3', 'RFC 8446': the name with its version attached."""
    if text[last[1] : last[1] + 1] != " " or text[last[1] + 1 : last[1] + 2] not in _VERSION_START:
        return []
    nxt = next((t for t in tokens if t[0] >= last[1]), None)
    if nxt is None or not text[last[1] : nxt[0]].isspace() or "\n" in text[last[1] : nxt[0]]:
        return []
    acronym = _is_acronym(text[last[0] : last[1]])
    if _VERSION.fullmatch(text, *nxt) or (acronym and _NUMBER.fullmatch(text, *nxt)):
        label = text[start : nxt[1]]
        return [_Hit(start, nxt[1], concept_key(label), label, "entity")]
    return []


def _add_key_phrases(text: str, sentences: list[_Sentence]) -> None:
    """Add the best few noun-ish phrases of each chunk, with all their occurrences."""
    candidates: list[tuple[_Sentence, _Hit, int]] = []
    for sent in sentences:
        if not sent.in_code:
            candidates += [(sent, hit, n) for hit, n in _phrase_candidates(text, sent)]
    counts = Counter(hit.key for _, hit, _ in candidates)
    ranked: dict[int, list[tuple[float, int, str]]] = {}
    for sent, hit, n in candidates:
        score = counts[hit.key] + 0.5 * (n - 1)  # frequent first, then longer
        ranked.setdefault(sent.chunk, []).append((-score, hit.start, hit.key))
    chosen: set[str] = set()
    for entries in ranked.values():
        picked: list[str] = []
        for _, _, key in sorted(entries):
            if key not in picked:
                picked.append(key)
                if len(picked) == MAX_PHRASES_PER_CHUNK:
                    break
        chosen.update(picked)
    for sent, hit, _ in candidates:
        if hit.key in chosen:
            sent.hits.append(hit)
    for sent in sentences:
        sent.hits.sort(key=lambda h: (h.start, -h.end))


def _phrase_candidates(text: str, sent: _Sentence) -> list[tuple[_Hit, int]]:
    """Runs of up to three lowercase content words, optionally led by an acronym."""
    free = set(_free_tokens(sent, sent.hits))
    acronyms = {(h.start, h.end) for h in sent.hits if h.kind == "entity" and _is_acronym(h.label)}
    out: list[tuple[_Hit, int]] = []
    run: list[Span] = []

    def close() -> None:
        tail = run[-3:]
        last = text[tail[-1][0] : tail[-1][1]]
        if last.endswith("ed") or tail[-1] in acronyms or (len(tail) == 1 and len(last) < 4):
            return
        label = text[tail[0][0] : tail[-1][1]]
        key = concept_key(label, fold_plural=True)
        if key:
            out.append((_Hit(tail[0][0], tail[-1][1], key, label, "concept"), len(tail)))

    for i, tok in enumerate(sent.tokens):
        if tok in acronyms:
            if run:
                close()
            run = [tok]
            continue
        word = text[tok[0] : tok[1]]
        lower = word.lower()
        if (
            lower in _STOP
            or len(word) < 3
            or tok not in free
            or not (word.islower() or (i == 0 and word[1:].islower()))
            or not (word.isalpha() or word.replace("-", "").replace("'", "").isalpha())
            or (lower.endswith("ly") and lower not in _LY_NOUNS)
        ):
            if run:
                close()
                run = []
            continue
        if run:
            gap = text[run[-1][1] : tok[0]]
            hyphen = gap.strip() == "-"  # "person - centered" in tokenized text
            # A participle after a noun ("journal published") starts a new phrase.
            if not (hyphen or gap.isspace()) or (lower.endswith("ed") and not hyphen):
                close()
                run = []
        run.append(tok)
    if run:
        close()
    return out


def _concepts(
    title_hits: list[_Hit], title_key: str, first_chunk: int, sentences: list[_Sentence]
) -> tuple[Concept, ...]:
    mentions: dict[str, dict[tuple[int, int, int], None]] = {}  # an ordered set per key
    labels: dict[str, str] = {}
    kinds: dict[str, str] = {}
    for hit in title_hits:
        chunk = next((s.chunk for s in sentences if s.start <= hit.start < s.end), first_chunk)
        mentions.setdefault(hit.key, {})[(chunk, hit.start, hit.end)] = None
        labels[hit.key], kinds[hit.key] = hit.label, hit.kind
    for sent in sentences:
        for hit in sent.hits:
            if not hit.kind:
                continue
            mentions.setdefault(hit.key, {})[(sent.chunk, hit.start, hit.end)] = None
            labels.setdefault(hit.key, hit.label)
            old = kinds.setdefault(hit.key, hit.kind)
            # The title keeps its kind, so the same name links across documents.
            if hit.key != title_key and KIND_PRIORITY[hit.kind] < KIND_PRIORITY[old]:
                kinds[hit.key] = hit.kind
    concepts = [
        Concept(key, labels[key], kinds[key], tuple(Mention(*m) for m in sorted(found, key=_pos)))
        for key, found in mentions.items()
    ]
    concepts.sort(key=lambda c: (c.key != title_key, c.mentions[0].start))
    return tuple(concepts)


def _pos(mention: tuple[int, int, int]) -> tuple[int, int]:
    return mention[1], mention[2]


class _Edges:
    """The edges found so far, keeping the most confident of each (src, dst, type)."""

    def __init__(self) -> None:
        self.best: dict[tuple[str, str, str], ExtractedEdge] = {}

    def add(self, src: str, dst: str, type_: str, confidence: float, rule: str, evidence: Mention) -> None:
        if src == dst:
            return
        if (type_ == "same_as" or rule == "cooccurrence") and dst < src:  # symmetric: one edge per pair
            src, dst = dst, src
        old = self.best.get((src, dst, type_))
        if old is None or confidence > old.confidence:
            self.best[(src, dst, type_)] = ExtractedEdge(src, dst, type_, confidence, rule, evidence)

    def result(self) -> tuple[ExtractedEdge, ...]:
        """Every edge, less the co-occurrences of pairs a typed edge links."""
        typed = {frozenset((e.src, e.dst)) for e in self.best.values() if e.type != "related_to"}
        return tuple(e for e in self.best.values()
                     if e.type != "related_to" or e.rule != "cooccurrence" or frozenset((e.src, e.dst)) not in typed)


def _edges(text: str, sentences: list[_Sentence], title: _Hit | None) -> tuple[ExtractedEdge, ...]:
    """Typed edges from cue phrases, key–value lines and table rows; co-occurrence edges between
    the other concepts a sentence names together."""
    edges = _Edges()
    subject = title
    header: list[str] | None = None
    previous_row = -1  # where the last table row ended: the next row of that table starts a line later
    for sent in sentences:
        hits = [h for h in sent.hits if h.kind]
        if text.startswith("#", sent.start):
            # A heading naming one thing makes it the subject of the key–value lines below it.
            subject = hits[0] if len(hits) == 1 else title
        cells = prose.table_row(text, sent.start, sent.end)
        if cells is not None:
            header = header if sent.start == previous_row + 1 else prose.table_header(text, sent.start)
            previous_row = sent.end
        if sent.in_code or not hits:
            continue
        linked = _cue_edges(edges, text, sent, hits, title)
        linked |= _stated_edges(edges, text, sent, hits, subject, cells, header)
        _cooccurrence_edges(edges, sent, hits, linked)
    return edges.result()


def _cue_edges(edges: _Edges, text: str, sent: _Sentence, hits: list[_Hit], title: _Hit | None) -> set[frozenset[str]]:
    """Edges from cue phrases ("X is owned by Y"); a sentence whose subject refers to the
    document's title entity ("It is owned by Y") has that entity on the left of its cue."""
    linked: set[frozenset[str]] = set()
    reference = prose.reference_end(text, sent.start)
    for m in _cues(text, sent):
        _, type_, confidence, shape = CUES[int((m.lastgroup or "c0")[1:])]
        if _NEGATION.search(text, sent.start, m.start()):
            continue
        x, y = _nearest_left(hits, m.start()), _nearest_right(hits, m.end())
        if y is not None and x is None and shape == _PREFIX:
            x = _nearest_right(hits, y.end)
        elif title is not None and (
                (reference >= 0 and (x is None or (x.start < reference and x.kind == "concept")))
                or (x is None and _opens(text, sent.start, m.start()))):
            x = title  # "It is owned by …", "The service depends on …", "Headed by …": the document's subject
        if title is not None and _names_object(y, prose.object_reference_end(text, m.end())):
            y = title  # "Dario Feltham leads the team.": the document's subject
        y = _apposed(text, y, hits)
        if x is None or y is None or x.key == y.key:
            continue
        src, dst = (y, x) if shape == _REV else (x, y)
        edges.add(src.key, dst.key, type_, confidence, "cue:" + " ".join(m.group(0).lower().split()),
                  Mention(sent.chunk, sent.start, sent.end))
        linked.add(frozenset((src.key, dst.key)))
    return linked


def _names_object(hit: _Hit | None, reference: int) -> bool:
    """Whether the reference a cue's object makes, ending at `reference` (-1: none), is the object
    rather than `hit`, the nearest concept after the cue: there is none, it lies beyond the
    reference, or it is a generic phrase within it ("the team")."""
    return reference >= 0 and (hit is None or hit.start >= reference or hit.kind == "concept")


def _apposed(text: str, hit: _Hit | None, hits: list[_Hit]) -> _Hit | None:
    """The thing a generic phrase is said to be by an apposition right after it ("the database
    cluster named pg-core", "a cluster, kestrel-3,", "the PostgreSQL cluster kestrel-3", where a
    name qualifies the phrase), else `hit` itself."""
    if hit is None:
        return None
    generic = hit
    if hit.kind != "concept":  # "PostgreSQL" in "the PostgreSQL cluster kestrel-3"
        generic = _nearest_right(hits, hit.end) or hit
        if generic.kind != "concept" or text[hit.end:generic.start].strip():
            return hit
    after = _nearest_right(hits, generic.end)
    if after is None or after.kind == "concept" or not prose.is_apposition(text[generic.end:after.start]):
        return hit
    return after


def _opens(text: str, start: int, pos: int) -> bool:
    """Whether only markup stands between a sentence's start and `pos` ("**Headed by** …")."""
    return not text[start:pos].strip(" \t*_#>-")


def _stated_edges(
    edges: _Edges, text: str, sent: _Sentence, hits: list[_Hit], subject: _Hit | None,
    cells: list[Span] | None, header: list[str] | None,
) -> set[frozenset[str]]:
    """Edges a key–value line ("Owner: Team X", under the document's or the heading's subject) or
    a table row (its first cell's concept, related to the others by their column's header)
    states."""
    pairs: list[tuple[_Hit, _Hit, prose.KeyRelation, str, Mention]] = []
    if cells and header is not None and len(cells) == 2 and prose.lists_key_values(header):
        # A two-column table with an empty header, or "| Field | Value |", is a list of "key | value" lines.
        key = text[cells[0][0]:cells[0][1]].strip("*_ `")
        if key and subject is not None:
            pairs += [(subject, hit, prose.key_relation(key), key, Mention(sent.chunk, sent.start, sent.end))
                      for hit in hits if cells[1][0] <= hit.start and hit.end <= cells[1][1]]
    elif cells and header and len(header) == len(cells):
        first = [h for h in hits if cells[0][0] <= h.start and h.end <= cells[0][1]]
        for (start, end), key in list(zip(cells, header, strict=True))[1:]:
            for hit in (h for h in hits if start <= h.start and h.end <= end) if first else ():
                pairs.append((first[0], hit, prose.key_relation(key), key, Mention(sent.chunk, sent.start, sent.end)))
    elif subject is not None and not cells:
        for kv in sent.keys:
            line = Mention(sent.chunk, max(sent.start, text.rfind("\n", 0, kv.key_span[0]) + 1), kv.value[1])
            pairs += [(subject, hit, prose.key_relation(kv.key), kv.key, line)
                      for hit in hits if kv.value[0] <= hit.start and hit.end <= kv.value[1]]
    linked: set[frozenset[str]] = set()
    for owner, value, relation, key, evidence in pairs:
        src, dst = (value, owner) if relation.value_first else (owner, value)
        confidence = KEYED_RELATION if relation.type != "related_to" else KEYED_RELATED
        edges.add(src.key, dst.key, relation.type, confidence, "key:" + " ".join(key.casefold().split()), evidence)
        linked.add(frozenset((src.key, dst.key)))
    return linked


def _cooccurrence_edges(edges: _Edges, sent: _Sentence, hits: list[_Hit], linked: set[frozenset[str]]) -> None:
    """`related_to` between the first few concepts a sentence names together, unless linked."""
    firsts: dict[str, _Hit] = {}
    for h in sorted(hits, key=lambda h: (h.kind == "concept", h.start)):
        firsts.setdefault(h.key, h)
    top = list(firsts.values())[:MAX_COOCCURRING]
    for i, a in enumerate(top):
        for b in top[i + 1 :]:
            if frozenset((a.key, b.key)) not in linked:
                phrases = (a.kind == "concept") + (b.kind == "concept")
                edges.add(a.key, b.key, "related_to", 0.5 - 0.1 * phrases, "cooccurrence",
                          Mention(sent.chunk, sent.start, sent.end))


def _cues(text: str, sent: _Sentence) -> list[re.Match[str]]:
    found: list[re.Match[str]] = []
    after = -1
    for s, e in sent.tokens:
        if s >= after and text[s:e].casefold() in _CUE_WORDS:
            m = _CUE_RE.match(text, s, sent.end)
            if m:
                found.append(m)
                after = m.end()
    return found


def _nearest_left(hits: list[_Hit], pos: int) -> _Hit | None:
    before = [h for h in hits if h.end <= pos]
    return max(before, key=lambda h: (h.end, -h.start)) if before else None


def _nearest_right(hits: list[_Hit], pos: int) -> _Hit | None:
    after = [h for h in hits if h.start >= pos]
    return min(after, key=lambda h: (h.start, -h.end)) if after else None
