"""Retrieval strategies compared by the evaluation runner, and the registry that names them.

A strategy turns a question into a ranked list of dataset ids (passage ids or golden-set source
paths), best first, without duplicates. Each is a small class built from a `StrategyContext`
and registered under its name with `@register("name")`; one that cannot run in this
environment raises `StrategySkipped` from its constructor and is reported, never scored.
A graph strategy is one more class, e.g.:

    @register("ppr")
    class Ppr(Hybrid):
        def retrieve(self, conn, question, k):
            seeds = [h.node_id for h in self.hits(conn, question, k)]
            nodes = [n for n, in conn.execute(PPR_SQL, [seeds, k * OVERFETCH])]
            return StrategyResult(source_ids(conn, nodes, self.ctx.uri_prefix)[:k], seed_ids=...)
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

import psycopg

from tortus_pg.embed import Embedder
from tortus_pg.errors import InvalidInput, TortusError
from tortus_pg.retrieve import MAX_K, Hit, Mode, rrf, search

# Passages can have several chunks: ask for more chunks than ids so k distinct ids remain.
OVERFETCH = 5
EXTERNAL_CMD_ENV = "TORTUS_EVAL_EXTERNAL_CMD"


class StrategySkipped(TortusError):
    """The strategy cannot run here (e.g. it is not configured); it is reported as skipped."""


class StrategyFailed(TortusError):
    """The strategy failed on one question; that question counts as a miss for it."""


@dataclass(frozen=True)
class StrategyResult:
    """Ranked ids (deduplicated, best first), diagnostics such as fan_out, portal_hops,
    shard_crossings and tokens when the strategy knows them, and the ids of its first
    (seed) stage when it has several stages."""

    ranked_ids: list[str]
    diagnostics: dict[str, float] = field(default_factory=dict)
    seed_ids: list[str] | None = None
    withheld: bool | None = None  # strategies that answer: whether they withheld the answer
    answer: str | None = None
    short_answer: str | None = None  # the span of the asked type in the sentence that answers
    confidence: float | None = None  # the answer's support, abstention curves sweep a threshold over it
    draft: str | None = None  # what a withheld answer would have said
    refusal: str | None = None  # why it was withheld: the name of the engine's `Refusal`


@dataclass(frozen=True)
class StrategyContext:
    """What strategies may use: the snapshot's uri prefix, the query embedder and options."""

    uri_prefix: str
    embedder: Embedder | None = None
    ts_config: str = "english"
    external_cmd: str | None = None
    external_timeout: float = 30.0


class Strategy(Protocol):
    name: str

    def retrieve(self, conn: psycopg.Connection, question: str, k: int) -> StrategyResult: ...


StrategyFactory = Callable[[StrategyContext], Strategy]
STRATEGIES: dict[str, StrategyFactory] = {}
_S = TypeVar("_S")


def register(name: str) -> Callable[[type[_S]], type[_S]]:
    """Class decorator: make the class available to `tortus-pg eval --strategies NAME`."""

    def add(cls: type[_S]) -> type[_S]:
        cls.name = name  # type: ignore[attr-defined]
        STRATEGIES[name] = cls  # type: ignore[assignment]
        return cls

    return add


def parse_names(text: str) -> list[str]:
    """'a, b,c' -> ['a', 'b', 'c']; rejects unknown and repeated names, listing the known ones."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise InvalidInput(f"no strategy given; available: {', '.join(sorted(STRATEGIES))}")
    unknown = [n for n in names if n not in STRATEGIES]
    if unknown:
        raise InvalidInput(f"unknown strategy {unknown[0]!r}; available: {', '.join(sorted(STRATEGIES))}")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise InvalidInput(f"strategy {repeated[0]!r} is listed twice")
    return names


def build(names: Sequence[str], ctx: StrategyContext) -> tuple[dict[str, Strategy], dict[str, str]]:
    """The runnable strategies by name, and the skipped ones with the reason."""
    ready: dict[str, Strategy] = {}
    skipped: dict[str, str] = {}
    for name in parse_names(",".join(names)):
        try:
            ready[name] = STRATEGIES[name](ctx)
        except StrategySkipped as exc:
            skipped[name] = str(exc)
    return ready, skipped


def hit_ids(hits: Iterable[Hit], prefix: str) -> list[str]:
    """Dataset ids of the hits' sources (uri minus the snapshot prefix), first occurrence first."""
    return list(dict.fromkeys(h.uri[len(prefix) :] for h in hits if h.uri.startswith(prefix)))


_SOURCES = """
select s.uri from unnest(%s::bigint[]) with ordinality as t(node_id, ord)
join tortus.node n on n.tenant_id = tortus.current_tenant() and n.node_id = t.node_id
join tortus.source s on s.tenant_id = n.tenant_id and s.source_id = n.source_id
order by t.ord
"""


def source_ids(conn: psycopg.Connection, node_ids: Sequence[int], prefix: str) -> list[str]:
    """Dataset ids of the sources of ranked nodes, first occurrence first; nodes without a
    source of their own (concepts shared by several sources) are left out."""
    uris = [uri for (uri,) in conn.execute(_SOURCES, [list(node_ids)])]
    return list(dict.fromkeys(u[len(prefix) :] for u in uris if u.startswith(prefix)))


def first_hits(hits: Iterable[Hit], prefix: str) -> dict[str, Hit]:
    """The best-ranked hit of each dataset id."""
    found: dict[str, Hit] = {}
    for h in hits:
        if h.uri.startswith(prefix):
            found.setdefault(h.uri[len(prefix) :], h)
    return found


class _Search:
    """One call of `retrieve.search` in a fixed mode."""

    name: str
    mode: Mode

    def __init__(self, ctx: StrategyContext) -> None:
        self.ctx = ctx

    def hits(self, conn: psycopg.Connection, query: str, k: int) -> list[Hit]:
        return search(
            conn, query, mode=self.mode, k=min(MAX_K, k * OVERFETCH), embedder=self.ctx.embedder,
            ts_config=self.ctx.ts_config,
        )

    def retrieve(self, conn: psycopg.Connection, question: str, k: int) -> StrategyResult:
        return StrategyResult(hit_ids(self.hits(conn, question, k), self.ctx.uri_prefix)[:k])


@register("bm25")
class Bm25(_Search):
    mode = "keyword"


@register("vector")
class Vector(_Search):
    mode = "vector"


@register("hybrid")
class Hybrid(_Search):
    mode = "hybrid"


_NAME = re.compile(r"[A-Z][\w'’.-]*(?:\s+(?:(?:of|the|de|la|von|van|and|du|del|di)\s+)*[A-Z][\w'’.-]*)*")
_WORD = re.compile(r"\w+")
_NOT_NAMES = frozenset(
    ["a", "an", "the", "he", "she", "it", "its", "his", "her", "they", "their", "this", "that", "in", "on", "at"]
)


def salient_terms(title: str, text: str, question: str, limit: int = 3) -> list[str]:
    """Up to `limit` names from a passage (its title first, then capitalized spans) that bring
    at least one word the question does not have."""
    asked = {w.casefold() for w in _WORD.findall(question)}
    terms: list[str] = []
    for candidate in [title, *(m.group(0).rstrip(".") for m in _NAME.finditer(text))]:
        words = {w.casefold() for w in _WORD.findall(candidate)}
        if not words or words <= _NOT_NAMES or words <= asked or candidate in terms:
            continue
        terms.append(candidate)
        if len(terms) == limit:
            break
    return terms


@register("bounded_agentic")
class BoundedAgentic(Hybrid):
    """Query expansion under a fixed budget: retrieve (hybrid), add the salient names of the
    best passage not yet expanded, retrieve again, ... at most `steps` retrievals, fused by
    RRF. Deterministic; the number of retrievals made is reported as fan_out."""

    def __init__(self, ctx: StrategyContext, steps: int = 3) -> None:
        super().__init__(ctx)
        self.steps = steps

    def retrieve(self, conn: psycopg.Connection, question: str, k: int) -> StrategyResult:
        prefix = self.ctx.uri_prefix
        first = self.hits(conn, question, k)
        passages = first_hits(first, prefix)
        rounds = [hit_ids(first, prefix)[:k]]
        expanded: set[str] = set()
        while len(rounds) < self.steps:
            terms: list[str] = []
            for pivot in rrf(rounds):
                if pivot in expanded or pivot not in passages:
                    continue
                expanded.add(pivot)
                hit = passages[pivot]
                terms = salient_terms(hit.label.split(" > ")[0], hit.text, question)
                if terms:
                    break
            if not terms:
                break
            hits = self.hits(conn, f"{question} {' '.join(terms)}", k)
            passages = {**first_hits(hits, prefix), **passages}
            rounds.append(hit_ids(hits, prefix)[:k])
        return StrategyResult(rrf(rounds)[:k], {"fan_out": float(len(rounds))}, seed_ids=rounds[0])


@register("external")
class External:
    """A command outside tortus-pg: the question on stdin, TORTUS_EVAL_K in its environment,
    a JSON list of ids on stdout (or {"ids": [...], "diagnostics": {...}})."""

    name = "external"

    def __init__(self, ctx: StrategyContext) -> None:
        if not ctx.external_cmd:
            raise StrategySkipped(f"{EXTERNAL_CMD_ENV} is not set")
        self.argv = shlex.split(ctx.external_cmd)
        self.timeout = ctx.external_timeout

    def retrieve(self, conn: psycopg.Connection, question: str, k: int) -> StrategyResult:
        try:
            done = subprocess.run(
                self.argv, input=question, capture_output=True, text=True, timeout=self.timeout, check=False,
                env={**os.environ, "TORTUS_EVAL_K": str(k)},
            )
        except subprocess.TimeoutExpired:
            raise StrategyFailed(f"external command timed out after {self.timeout:g} s") from None
        except OSError as exc:
            raise StrategyFailed(f"external command could not start: {exc}") from None
        if done.returncode != 0:
            tail = (done.stderr.strip().splitlines() or ["no message"])[-1]
            raise StrategyFailed(f"external command exited with {done.returncode}: {tail}")
        return _external_result(done.stdout, k)


def _external_result(stdout: str, k: int) -> StrategyResult:
    try:
        data = json.loads(stdout)
    except json.JSONDecodeError:
        raise StrategyFailed("external command did not print JSON") from None
    ids, diagnostics = (data.get("ids"), data.get("diagnostics") or {}) if isinstance(data, dict) else (data, {})
    if not isinstance(ids, list) or not all(isinstance(i, str | int) for i in ids):
        raise StrategyFailed("external command must print a JSON list of ids")
    if not isinstance(diagnostics, dict) or not all(isinstance(v, int | float) for v in diagnostics.values()):
        raise StrategyFailed("external diagnostics must be an object of numbers")
    ranked = list(dict.fromkeys(str(i) for i in ids))[:k]
    return StrategyResult(ranked, {str(n): float(v) for n, v in diagnostics.items()})
