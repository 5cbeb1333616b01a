"""The cost ledger: milliseconds and tokens per step of ingest and of each question.

A source's steps (parse, chunk, extract, embed: `<step>_ms`, and `<step>_tokens` when a model
behind an OpenAI-compatible API was paid for them) are kept in its metadata (`cost`); a
question's are its trace's stage timings and the evidence tokens of its budget. SQL reads both
in `tortus.cost_ledger`; `tortus-pg sources show` prints a source's. Each step is also a span
(`telemetry`) carrying the same figures.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from tortus_pg import telemetry


class Spent(Protocol):
    """What a client has spent so far (`openai_client.TokenLedger`)."""

    @property
    def total_tokens(self) -> int: ...


def ledger_of(client: object) -> Spent | None:
    """The token ledger of an embedder or extractor that calls a paid API, else None."""
    ledger = getattr(client, "ledger", None)
    return ledger if ledger is not None and hasattr(ledger, "total_tokens") else None


class Costs:
    """What one source (or batch) cost, step by step."""

    def __init__(self) -> None:
        self.entries: dict[str, float | int] = {}

    @contextmanager
    def step(self, name: str, span: str, spent: Spent | None = None, **attributes: Any) -> Iterator[None]:
        """Time the block as step `name` (and count the tokens `spent` grows by), in a span."""
        began, before = time.perf_counter(), spent.total_tokens if spent is not None else 0
        with telemetry.span(span, **attributes) as current:
            yield
            self.entries[f"{name}_ms"] = round((time.perf_counter() - began) * 1000, 2)
            if spent is not None:
                self.entries[f"{name}_tokens"] = spent.total_tokens - before
                current.set(tokens=spent.total_tokens - before)

    def share(self, fraction: float) -> dict[str, float | int]:
        """A part of these costs (one source's of a batch's), by `fraction` of the work."""
        return {k: round(v * fraction, 2) if k.endswith("_ms") else round(v * fraction)
                for k, v in self.entries.items()}
