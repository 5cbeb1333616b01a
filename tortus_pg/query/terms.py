"""The question's weighted terms, and the lexemes of texts as BM25 sees them.

A question's content lexemes are weighted by their IDF in the tenant's BM25 statistics (a term
the corpus never uses weighs the most); its identifiers (an error code, a clause, a version)
and the names of the things it is about are the words an answer's evidence must have. The verb
closing a question of the form "What does X say?" is not one of them: English syntax puts the
main verb last there, and the question asks what X states ("say", "mean", "indicate" …), which
a sentence stating it need not repeat."""

from __future__ import annotations

import math
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

import psycopg

from tortus_pg.db import pinned

_PUNCTUATION = "\"'()[]{}<>,;:!?."
# "What does clause 7.3.2 say?", "What did the review recommend?": "what" with do-support, whose
# last word is the main verb. ("Which city does the river cross?" asks for a city the verb names.)
_CLOSING_VERB = re.compile(r"^\W*what\s+(?:does|do|did)\s+[^?]+?\s(?P<verb>[a-z]+)\W*$", re.I)

# The identifiers come from a sub-select so that they are read once, not once per lexeme.
_TERMS = """
with q as (select distinct t.lexeme from unnest(to_tsvector(%(cfg)s::regconfig, %(q)s)) as t)
select q.lexeme, coalesce(t.df, 0), c.n,
       q.lexeme = any((select tortus.identifier_lexemes(%(q)s, %(cfg)s::regconfig))::text[])
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

    @property
    def total(self) -> float:
        return sum(self.weights.values())

    def covered(self, lexemes: set[str]) -> float:
        share = sum(w for t, w in sorted(self.weights.items()) if t in lexemes) / self.total if self.total else 0.0
        return round(share, 9)


def question_terms(
    conn: psycopg.Connection, question: str, ts_config: str = "english", names: Sequence[str] = (),
    tenant: str | None = None,
) -> Terms:
    """Lexemes of the question but its closing verb (`_CLOSING_VERB`), weighted by IDF (terms no
    document uses weigh most), and the lexemes of the `names` the question is about."""
    rows = conn.execute(pinned(_TERMS, tenant), {"q": question, "cfg": ts_config}).fetchall()
    closing = _CLOSING_VERB.match(question)
    frame = lexemes(conn, [closing["verb"]], ts_config)[0] if closing else set()
    weights = {lexeme: math.log(1 + (n - df + 0.5) / (df + 0.5)) for lexeme, df, n, _ in rows if lexeme not in frame}
    found = dict(zip(names, lexemes(conn, names, ts_config), strict=True))
    identifiers = frozenset(r[0] for r in rows if r[3])
    tokens = [t.strip(_PUNCTUATION) for t in question.split()]
    spelled = {i: next((t for t in tokens if i in t.casefold()), i) for i in identifiers}
    return Terms(weights, identifiers, {n: frozenset(found[n]) for n in names if found[n]}, spelled)


LEXEME_CACHE = 5_000  # texts whose lexemes are remembered (per database and configuration)
_lexeme_cache: OrderedDict[tuple[str, str, str, str], frozenset[str]] = OrderedDict()
_lexeme_lock = threading.Lock()


def lexemes(conn: psycopg.Connection, texts: Sequence[str], ts_config: str = "english") -> list[set[str]]:
    """The lexemes of each text, as BM25 sees them. Synthesis asks for the same evidence
    sentences several times per answer, and the same chunks recur across questions, so only
    texts not seen before go to the server. The cache is shared by the process's threads (API
    workers, concurrent clients): it is read and updated under a lock, never while the server
    is asked, and each call answers from what it read itself."""
    place = (conn.info.host, conn.info.dbname, ts_config)
    with _lexeme_lock:
        known = {t: _lexeme_cache[(*place, t)] for t in texts if (*place, t) in _lexeme_cache}
    missing = [t for t in dict.fromkeys(texts) if t not in known]
    if missing:
        rows = conn.execute(_LEXEMES, {"texts": missing, "cfg": ts_config}).fetchall()
        known.update({t: frozenset(row[0]) for t, row in zip(missing, rows, strict=True)})
    with _lexeme_lock:
        for t, words in known.items():
            _lexeme_cache[(*place, t)] = words
            _lexeme_cache.move_to_end((*place, t))
        while len(_lexeme_cache) > LEXEME_CACHE:
            _lexeme_cache.popitem(last=False)
    return [set(known[t]) for t in texts]


def coverage_of(conn: psycopg.Connection, terms: Terms, texts: Sequence[str], ts_config: str = "english") -> float:
    """Share of the question's weight (`question_terms`) that the texts contain together."""
    found = set().union(*lexemes(conn, texts, ts_config)) if texts else set()
    return terms.covered(found)
