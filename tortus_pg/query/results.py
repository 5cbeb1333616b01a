"""What an answer gives besides its text, as values: the claims it quotes, the hops of the path
behind its evidence and the budget it used. Each has a JSON form (`to_json`), the one the REST
and GraphQL APIs, `tortus-pg query --json` and the stored trace carry."""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any


class ClaimSupport(StrEnum):
    """Whether the evidence a claim cites states it: an extractive claim quotes its evidence; a
    chat model's claim is checked against the evidence it cites (`synth.LLMSynthesizer`)."""

    SUPPORTED = "supported"
    UNSUPPORTED = "unsupported"


@dataclass(frozen=True)
class SourceSpan:
    """A span of a source: its text, where it is (character offsets, the page of a PDF)."""

    uri: str | None
    span: tuple[int, int]
    page: int | None
    text: str

    def to_json(self) -> dict[str, Any]:
        return {"uri": self.uri, "span": list(self.span), "page": self.page, "text": self.text}


@dataclass(frozen=True)
class Claim:
    """A statement of the answer, numbered by its citation, and the evidence item (an index into
    the answer's evidence) and span it quotes; what else each way of answering knows of it: the
    question's terms it matches and the short answer it gives (the reader of evidence chains),
    the share of its words the cited evidence holds (a chat model's claim), the typed relation it
    states (a chain of typed relations)."""

    text: str
    citation: int
    evidence: int | None
    uri: str | None
    page: int | None
    span: tuple[int, int] | None
    support: ClaimSupport = ClaimSupport.SUPPORTED
    matched_terms: tuple[str, ...] | None = None
    short_answer: str | None = None
    support_share: float | None = None
    relation: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "text": self.text, "citation": self.citation, "evidence": self.evidence, "uri": self.uri,
            "page": self.page, "span": list(self.span) if self.span is not None else None,
            "support": self.support.value,
        }
        known = {"matched_terms": list(self.matched_terms) if self.matched_terms is not None else None,
                 "short_answer": self.short_answer, "support_share": self.support_share, "relation": self.relation}
        out.update({name: value for name, value in known.items() if value is not None})
        return out


@dataclass(frozen=True)
class PathHop:
    """A hop of the reasoning path: from the question to a search hit (`edge_type` "search",
    no `source_id`), or along a typed edge of the walk, with the spans that state it."""

    source: str
    source_id: int | None
    target: str
    target_id: int
    edge_type: str
    weight: float
    reason: str | None
    evidence: tuple[SourceSpan, ...]
    torus_distance: float | None = None  # of the walk's last hop to the chunk it reached
    shard_crossing: bool = False  # its ends lie in different torus shards

    @property
    def searched(self) -> bool:
        return self.source_id is None

    def to_json(self) -> dict[str, Any]:
        ends = ({"from": self.source} if self.searched else {"from": self.source, "from_id": self.source_id}) \
            | {"to": self.target, "to_id": self.target_id}
        walked = {} if self.searched else {"torus_distance": self.torus_distance}
        return {**ends, "edge_type": self.edge_type, "weight": self.weight, "reason": self.reason, **walked,
                "evidence": [q.to_json() for q in self.evidence], "shard_crossing": self.shard_crossing}


@dataclass(frozen=True)
class Use:
    """One budget: its limit and how much of it the answer used."""

    limit: float
    used: float


@dataclass(frozen=True)
class Budget:
    """The budgets of a question: time (ms), the hops of the longest evidence path, the portal
    hops of any one path, and the evidence's tokens (words)."""

    ms: Use
    hops: Use
    tokens: Use
    portal_hops: Use

    def to_json(self) -> dict[str, dict[str, float]]:
        return {f.name: {"limit": getattr(self, f.name).limit, "used": getattr(self, f.name).used}
                for f in fields(self)}
