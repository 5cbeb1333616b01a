"""The question, analysed once: the value every stage of the query reads instead of its text."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import psycopg

from tortus_pg.answer_type import AnswerType, expected_type
from tortus_pg.ingest.chunking import chunk_document
from tortus_pg.ingest.extract import extract_concepts
from tortus_pg.ingest.types import Document
from tortus_pg.policy import TraversalPolicy
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
    yes/no question asks whether they share an origin."""

    text: str
    vector: np.ndarray
    concepts: tuple[int, ...]  # every concept node it names
    # Of those, the ones some chunk defines: they seed the walk (personalization), and their
    # labels are names the answer must mention. Empty when the policy turns personalization off.
    named: tuple[int, ...]
    terms: Terms | None  # None when the time budget ran out before they were weighed
    answer_type: AnswerType | None = field(init=False)
    asked: frozenset[str] = field(init=False)  # its words, casefolded
    target: Target | None = field(init=False)
    comparison: Comparison | None = field(init=False)  # "…, A or B?" with a comparative
    sameness: Sameness | None = field(init=False)  # "Are A and B from the same country?"

    def __post_init__(self) -> None:
        # Read from the text here, once, whoever builds the question.
        object.__setattr__(self, "answer_type", expected_type(self.text))
        object.__setattr__(self, "asked", frozenset(w.casefold() for w in re.findall(r"\w+", self.text)))
        object.__setattr__(self, "target", target_of(self.text))
        object.__setattr__(self, "comparison", comparison_of(self.text))
        object.__setattr__(self, "sameness", sameness_of(self.text))


def analyse(
    conn: psycopg.Connection, text: str, vector: np.ndarray, clock: Clock, policy: TraversalPolicy, ts_config: str,
    tenant: str | None = None,
) -> Question:
    """The question analysed before any stage reads it; the concepts it names (stage `link`) and
    its weighted terms (stage `terms`) come from the tenant's graph and statistics."""
    concepts: list[tuple[int, bool]] = clock.attempt("link", lambda: concepts_in(conn, text), [])
    named = [] if policy.no_personalization else [node for node, defined in concepts if defined]
    terms = clock.attempt("terms", lambda: question_terms(conn, text, ts_config, labels(conn, named), tenant), None)
    return Question(text, vector, tuple(node for node, _ in concepts), tuple(named), terms)


_CONCEPTS = """
select n.node_id, exists (select 1 from tortus.edge d
                          where d.tenant_id = n.tenant_id and d.dst = n.node_id and d.type = 'defines')
from tortus.node n
where n.tenant_id = tortus.current_tenant() and n.kind <> 'chunk' and n.key = any(%s)
"""


def concepts_in(conn: psycopg.Connection, question: str) -> list[tuple[int, bool]]:
    """Graph nodes of the concepts the deterministic extractor finds in the question, each with
    whether some chunk defines it (a document titled by it, a clause)."""
    doc = Document(text=question, kind="text")
    keys = [c.key for c in extract_concepts(doc, chunk_document(doc)).concepts]
    return [(r[0], r[1]) for r in conn.execute(_CONCEPTS, [keys]).fetchall()]


def question_concepts(conn: psycopg.Connection, question: str) -> list[int]:
    """The node ids of `concepts_in`."""
    return [node for node, _ in concepts_in(conn, question)]


_LABELS = "select label from tortus.node where tenant_id = tortus.current_tenant() and node_id = any(%s) order by 1"


def labels(conn: psycopg.Connection, nodes: Sequence[int]) -> list[str]:
    """The labels of `nodes`, sorted."""
    return [r[0] for r in conn.execute(_LABELS, [list(nodes)]).fetchall()]
