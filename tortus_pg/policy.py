"""The traversal policy of one question: what the caller may ask for, validated and clamped.

The same policy comes from CLI flags, REST fields or GraphQL directives. Values of the wrong
type or out of range are errors; values above the server's limits are lowered to the limit
and reported as a warning, so a caller learns what it actually got.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Literal

from tortus_pg.errors import InvalidInput

PortalPreference = Literal["auto", "prefer", "avoid"]
PORTAL_PREFERENCES: tuple[PortalPreference, ...] = ("auto", "prefer", "avoid")
Traversal = Literal["sql", "age"]
TRAVERSALS: tuple[Traversal, ...] = ("sql", "age")


@dataclass(frozen=True)
class Limits:
    """Server-side caps on what one question may spend."""

    max_hops: int = 4
    max_ms: int = 30_000
    max_tokens: int = 8_000


@dataclass(frozen=True)
class TraversalPolicy:
    """max_hops: edges a path may take from a seed (chunk -> concept -> chunk is two): a chain of
    typed relations from a concept the question names takes up to all of them, the graph walk
    at most two, a bridge two.
    max_ms: wall-clock budget of the whole question; also the statement timeout.
    max_tokens: evidence handed to synthesis, in whitespace tokens.
    semantic_group: keep the walk inside this subgraph (by name).
    portal_preference: auto (cross domains when coverage is low), prefer, or avoid.
    failover_level: 0 walks within the torus radius only; 1 and 2 walk again over the whole
    torus when the walk reaches fewer than k chunks beyond the seeds (the search ranking leads
    the candidates at every level). 0 is the default: widening changed no answer and no top-5
    ranking on the public multi-hop sets, the handbooks or the demo, and at 100k nodes it is
    a second walk (docs/benchmarks.md).
    local_only: stay in the seeds' subgraphs and take no portals.
    explain: keep the pruned candidates and per-stage detail in the response.
    no_personalization: seed from search alone, not also from the concepts the question names.
    traversal: where the walk reads the graph: sql (the tables) or age (the tenant's Apache AGE
    mirror, through Cypher; same paths, see `tortus-pg graph sync-age`).
    min_support: the support (`query.support`, from 0 to 1) an extractive answer needs; below it
    the answer is withheld and shown as a draft. Lower answers more questions and withholds fewer
    of those the sources cannot answer; a golden set's abstention curve shows that trade on a
    corpus (docs/evaluation.md). None: the tenant's own (`tortus-pg tenant min-support`), else
    `query.support.THRESHOLD`."""

    max_hops: int = 3
    max_ms: int = 3_000
    max_tokens: int = 1_200
    semantic_group: str | None = None
    portal_preference: PortalPreference = "auto"
    failover_level: int = 0
    local_only: bool = False
    explain: bool = False
    no_personalization: bool = False
    traversal: Traversal = "sql"
    min_support: float | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


_MINIMA = {"max_hops": 1, "max_ms": 50, "max_tokens": 50, "failover_level": 0}
_MAXIMA_FIXED = {"failover_level": 2}


def make_policy(
    values: Mapping[str, Any] | None = None, limits: Limits = Limits()
) -> tuple[TraversalPolicy, list[str]]:
    """A policy from loosely typed input (JSON, form fields), and warnings for clamped values."""
    values = dict(values or {})
    known = {f.name: f for f in fields(TraversalPolicy)}
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise InvalidInput(f"unknown policy field {unknown[0]!r}; known: {', '.join(known)}")
    policy = TraversalPolicy()
    warnings: list[str] = []
    for name, value in values.items():
        if value is None:
            continue
        default = getattr(policy, name)
        if isinstance(default, bool) or name in ("local_only", "explain", "no_personalization"):
            if not isinstance(value, bool):
                raise InvalidInput(f"policy {name} must be true or false, got {value!r}")
        elif name in _MINIMA:
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidInput(f"policy {name} must be an integer, got {value!r}")
            if value < _MINIMA[name]:
                raise InvalidInput(f"policy {name} must be at least {_MINIMA[name]}, got {value}")
            cap = _MAXIMA_FIXED.get(name, getattr(limits, name, None))
            if cap is not None and value > cap:
                if name in _MAXIMA_FIXED:
                    raise InvalidInput(f"policy {name} must be at most {cap}, got {value}")
                warnings.append(f"{name} {value} is above the server limit; using {cap}")
                value = cap
        elif name == "portal_preference" and value not in PORTAL_PREFERENCES:
            raise InvalidInput(f"policy portal_preference must be one of {', '.join(PORTAL_PREFERENCES)}")
        elif name == "traversal" and value not in TRAVERSALS:
            raise InvalidInput(f"policy traversal must be one of {', '.join(TRAVERSALS)}")
        elif name == "min_support" and (isinstance(value, bool) or not isinstance(value, int | float)
                                        or not 0.0 <= value <= 1.0):
            raise InvalidInput(f"policy min_support must be a number from 0 to 1, got {value!r}")
        elif name == "semantic_group" and (not isinstance(value, str) or not value.strip() or len(value) > 200):
            raise InvalidInput("policy semantic_group must be a subgraph name of 1 to 200 characters")
        policy = replace(policy, **{name: value})
    return policy, warnings
