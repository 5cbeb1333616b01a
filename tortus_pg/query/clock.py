"""The question's time budget: a wall-clock deadline, per-stage timings, and each SQL stage run
in a savepoint under a statement timeout taken from the time left."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import psycopg

from tortus_pg import telemetry

_T = TypeVar("_T")


class DeadlineReached(Exception):
    """The question's time budget ran out before a stage could start."""


class Clock:
    """Wall-clock deadline plus per-stage timings; each SQL stage gets the remaining time as its
    statement timeout, inside a savepoint that a cancelled stage rolls back to (the caller's
    transaction stays usable). Use inside a transaction."""

    def __init__(self, conn: psycopg.Connection, max_ms: int) -> None:
        self.conn, self.max_ms = conn, max_ms
        self.start = time.perf_counter()
        self.timings: dict[str, float] = {}
        self.degraded: list[str] = []
        self.savepoint = False

    def elapsed_ms(self) -> float:
        return (time.perf_counter() - self.start) * 1000

    def remaining_ms(self) -> int:
        return int(self.max_ms - self.elapsed_ms())

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        if self.remaining_ms() <= 0:
            raise DeadlineReached(name)
        began = time.perf_counter()
        # One round trip per stage: the previous stage's savepoint is released, this stage's
        # opened and its timeout set (a local setting, undone by a rollback to the savepoint).
        self.conn.execute(("release savepoint tortus_stage; " if self.savepoint else "")
                          + f"savepoint tortus_stage; set local statement_timeout = {max(self.remaining_ms(), 1)}")
        self.savepoint = True
        try:
            with telemetry.span(f"tortus.query.{name}", remaining_ms=self.remaining_ms()):
                yield
        except BaseException:
            self.conn.execute("rollback to savepoint tortus_stage")
            raise
        finally:
            # A stage that runs more than once (synthesis after each bridge) adds up its time.
            key = f"{name}_ms"
            self.timings[key] = round(self.timings.get(key, 0.0) + (time.perf_counter() - began) * 1000, 2)

    def close(self) -> None:
        if self.savepoint:
            self.conn.execute("release savepoint tortus_stage")
            self.savepoint = False

    def attempt(self, name: str, fn: Callable[[], _T], fallback: _T) -> _T:
        """Run one stage; when the budget runs out before or during it, record why and go on."""
        try:
            with self.stage(name):
                return fn()
        except (DeadlineReached, psycopg.errors.QueryCanceled):
            self.degraded.append(name)
            return fallback
