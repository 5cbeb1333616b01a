"""The question, analysed once: the value every stage of the query reads instead of its text."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import psycopg

from tortus_pg.answer_type import AnswerType, expected_type
from tortus_pg.ingest.chunking import chunk_document
from tortus_pg.ingest.extract import concept_key, extract_concepts
from tortus_pg.ingest.types import Document
from tortus_pg.policy import TraversalPolicy
from tortus_pg.query.both import Membership, membership_of
from tortus_pg.query.clock import Clock
from tortus_pg.query.compare import Comparison, comparison_of
from tortus_pg.query.same import Sameness, sameness_of
from tortus_pg.query.terms import Terms, question_terms
from tortus_pg.relations import Target, target_of


@dataclass(frozen=True)
class Question:
    """A question as the stages read it: its text and embedding, the graph's concepts it names,
    its weighted terms (with its identifiers and the names it must be answered about), and what
    its text says once read: the answer type its opening asks for, its words, the kind of node a
    "Which …" question asks for, the two things a comparison question compares, and the two a
    yes/no question asks whether they share an origin or are both of a kind."""

    text: str
    vector: np.ndarray
    concepts: tuple[int, ...]  # every concept node it names
    # Of those, the ones some chunk defines: they seed the walk (personalization), and their
    # labels are names the answer must mention. Empty when the policy turns personalization off.
    named: tuple[int, ...]
    terms: Terms | None  # None when the time budget ran out before they were weighed
    defining: tuple[int, ...] = ()  # the chunks that define the named concepts
    answer_type: AnswerType | None = field(init=False)
    asked: frozenset[str] = field(init=False)  # its words, casefolded
    target: Target | None = field(init=False)
    comparison: Comparison | None = field(init=False)  # "…, A or B?" with a comparative
    sameness: Sameness | None = field(init=False)  # "Are A and B from the same country?"
    membership: Membership | None = field(init=False)  # "Are A and B both board games?"

    def __post_init__(self) -> None:
        # Read from the text here, once, whoever builds the question.
        object.__setattr__(self, "answer_type", expected_type(self.text))
        object.__setattr__(self, "asked", frozenset(w.casefold() for w in re.findall(r"\w+", self.text)))
        object.__setattr__(self, "target", target_of(self.text))
        object.__setattr__(self, "comparison", comparison_of(self.text))
        object.__setattr__(self, "sameness", sameness_of(self.text))
        object.__setattr__(self, "membership", membership_of(self.text))


def analyse(
    conn: psycopg.Connection, text: str, vector: np.ndarray, clock: Clock, policy: TraversalPolicy, ts_config: str,
    tenant: str | None = None,
) -> Question:
    """The question analysed before any stage reads it; the concepts it names (stage `link`) and
    its weighted terms (stage `terms`) come from the tenant's graph and statistics."""
    concepts: list[Named] = clock.attempt("link", lambda: concepts_in(conn, text), [])
    named = [] if policy.no_personalization else [c for c in concepts if c.defined_by]
    nodes = [c.node for c in named]
    terms = clock.attempt("terms", lambda: question_terms(conn, text, ts_config, labels(conn, nodes), tenant), None)
    return Question(text, vector, tuple(c.node for c in concepts), tuple(nodes), terms,
                    tuple(dict.fromkeys(chunk for c in named for chunk in c.defined_by)))


# The concepts with these keys, each with the chunks that define it (a document titled by it, a
# clause); a concept no chunk defines has none.
_CONCEPTS = """
select n.node_id, n.key,
       array(select d.src from tortus.edge d
             where d.tenant_id = n.tenant_id and d.dst = n.node_id and d.type = 'defines' order by d.src)
from tortus.node n
where n.tenant_id = tortus.current_tenant() and n.kind <> 'chunk' and n.key = any(%s)
"""
NAME_WORDS = 6  # the longest run of words read as the name of a documented thing


@dataclass(frozen=True)
class Named:
    """A concept the question names, and the chunks that define it."""

    node: int
    defined_by: tuple[int, ...]


def concepts_in(conn: psycopg.Connection, question: str) -> list[Named]:
    """Graph nodes of the concepts the question names: those the deterministic extractor finds in
    it, and the documented things (concepts some chunk defines) whose names it writes as a name
    is written, opening with a capital or a digit. The extractor reads a name from its capitalised
    words, so "the Calendar squad" gives it "Calendar" alone; the graph knows the document titled
    "Calendar squad". Overlapping runs keep the longest ("Fleet Data" over "Fleet")."""
    doc = Document(text=question, kind="text")
    extracted = {c.key for c in extract_concepts(doc, chunk_document(doc)).concepts}
    runs = name_runs(question)
    rows = conn.execute(_CONCEPTS, [[*extracted, *runs]]).fetchall()
    found = [Named(node, tuple(chunks)) for node, key, chunks in rows if key in extracted]
    known = {c.node for c in found}
    taken: list[tuple[int, int]] = []
    documented = sorted((r for r in rows if r[1] in runs and r[2]), key=lambda r: (-_width(runs[r[1]]), r[0]))
    for node, key, chunks in documented:
        start, end = runs[key]
        if any(s < end and start < e for s, e in taken):
            continue
        taken.append((start, end))
        if node not in known:
            found.append(Named(node, tuple(chunks)))
    return found


def name_runs(question: str) -> dict[str, tuple[int, int]]:
    """The concept keys of the question's runs of up to NAME_WORDS words that open and close
    where a name does, each with the words it spans (first, after last). A name opens at a word
    written as a name opens (a capital or a digit) and runs on through the words after it that
    open so too: "Cry Wolf" is not named in "Never Cry Wolf", nor "Peter Holmes" in "Peter
    Holmes À Court". Lowercase words may be inside a name or close it ("Comets on Fire", "the
    Calendar squad"). The question's first word is capitalised whatever it is; a comma, a colon
    or a parenthesis ends a name ("Johnnycake, West Virginia", "Dune (1952 film)")."""
    words = question.split()
    # Whether each word goes on the name the word before it opens or goes on.
    joined = [i > 1 and _opens_name(words[i]) and _opens_name(words[i - 1]) and words[i - 1][-1] not in ",:;"
              for i in range(len(words))]
    runs: dict[str, tuple[int, int]] = {}
    for i in range(len(words)):
        if not _opens_name(words[i]) or joined[i]:
            continue
        for j in range(i + 1, min(i + NAME_WORDS, len(words)) + 1):
            key = concept_key(" ".join(words[i:j]))
            if key and (j == len(words) or not joined[j]):
                runs.setdefault(key, (i, j))
    return runs


def _opens_name(word: str) -> bool:
    """Whether the word is written as a name opens: a capital or a digit, after a quote, a section
    sign or a hash ("§3.4", "#tce-help"); not a parenthesis, which ends a name."""
    first = word.lstrip("\"'§#[")[:1]
    return first.isupper() or first.isdigit()


def _width(span: tuple[int, int]) -> int:
    return span[1] - span[0]


def question_concepts(conn: psycopg.Connection, question: str) -> list[int]:
    """The node ids of `concepts_in`."""
    return [c.node for c in concepts_in(conn, question)]


_LABELS = "select label from tortus.node where tenant_id = tortus.current_tenant() and node_id = any(%s) order by 1"


def labels(conn: psycopg.Connection, nodes: Sequence[int]) -> list[str]:
    """The labels of `nodes`, sorted."""
    return [r[0] for r in conn.execute(_LABELS, [list(nodes)]).fetchall()]
