"""The one state the query's stages pass along: what the caller asked for, the question, and
what each stage has found so far."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tortus_pg.embed import Embedder
from tortus_pg.evidence import Chunk, Evidence, Reached
from tortus_pg.policy import TraversalPolicy
from tortus_pg.query.clock import Clock
from tortus_pg.query.implements import Implemented
from tortus_pg.query.question import Question
from tortus_pg.query.refusal import Refusal
from tortus_pg.query.results import PathHop
from tortus_pg.retrieve import Hit
from tortus_pg.scoring import Scorer
from tortus_pg.synth import Synthesis, Synthesizer

Link = tuple[int, int, int, str]  # naming chunk, chunk about the concept, concept, edge type of the latter


@dataclass(frozen=True)
class Options:
    """What the caller chose for the question besides its text."""

    embedder: Embedder | None
    policy: TraversalPolicy
    k: int  # evidence chunks
    ts_config: str
    scorer: Scorer
    synthesizer: Synthesizer | None  # None: extractive
    layout: str | None  # alternative torus coordinates to walk with (layout ablations)


def _no_time() -> Synthesis:
    return Synthesis(None, True, 0.0, [], 0.0, [], [Refusal.NO_TIME.message()], refusal=Refusal.NO_TIME)


@dataclass
class State:
    """What the stages have found for one question so far; each stage reads it and adds to it."""

    question: Question
    options: Options
    clock: Clock
    notes: list[str]  # warnings for the caller
    tenant: str | None = None  # named in the plans of the statements that read large tables (`db.pinned`)
    hits: list[Hit] = field(default_factory=list)  # hybrid search, best first
    walk_seeds: list[int] = field(default_factory=list)  # the best hits, where the walk starts
    implements: list[Implemented] = field(default_factory=list)  # of the concepts the question names
    # Where else the walk starts: the named concepts and the defined standards they implement.
    roots: list[int] = field(default_factory=list)
    radius: float | None = None  # of the walk on the torus; None when no seed has coordinates
    density: list[dict[str, Any]] = field(default_factory=list)  # around each seed
    walk_policy: dict[str, Any] = field(default_factory=dict)  # the last walk's
    portals: list[dict[str, Any]] = field(default_factory=list)  # each decision on portal hops, and why
    reached: list[Reached] = field(default_factory=list)  # chunks the walk reached
    pruned: list[dict[str, Any]] = field(default_factory=list)  # candidates the walk dropped, and why
    info: dict[int, Chunk] = field(default_factory=dict)  # the candidate chunks
    ranking: list[int] = field(default_factory=list)  # every candidate chunk, best first
    scores: dict[int, float] = field(default_factory=dict)  # the scorer's, of the chunks the walk reached
    evidence: list[Evidence] = field(default_factory=list)
    routes: dict[int, Reached] = field(default_factory=dict)  # how each evidence chunk was reached
    links: list[Link] = field(default_factory=list)  # among the evidence (`query.chains`)
    synthesis: Synthesis = field(default_factory=_no_time)  # no time left to synthesize, until a synthesis runs
    path: list[PathHop] = field(default_factory=list)  # the hops behind the evidence shown
    contradictions: list[dict[str, Any]] = field(default_factory=list)

    @property
    def cited(self) -> list[Evidence]:
        """The evidence items the claims cite, each once."""
        claims = self.synthesis.claims
        return list({c.evidence: self.evidence[c.evidence] for c in claims if c.evidence is not None}
                    .values())
