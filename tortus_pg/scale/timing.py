"""Latency of one kind of query over a list of inputs, from one or several concurrent clients,
each a connection of its own running every query as the application role inside a tenant."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np
import psycopg

from tortus_pg.db import TENANT_SETTING, connect, tenant_scope

T = TypeVar("T")


@dataclass(frozen=True)
class Latency:
    """Milliseconds per query (p50, p95, p99) and queries per second over all clients."""

    kind: str
    clients: int
    queries: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    qps: float

    @classmethod
    def of(cls, kind: str, clients: int, ms: Sequence[float], seconds: float) -> Latency:
        p50, p95, p99 = (float(v) for v in np.percentile(ms, [50, 95, 99]))
        return cls(kind, clients, len(ms), p50, p95, p99, len(ms) / seconds if seconds else 0.0)


def time_each(kind: str, call: Callable[[T], object], inputs: Sequence[T]) -> Latency:
    """One client in this process: `call` on each input in turn, each timed."""
    ms = []
    began_all = time.perf_counter()
    for item in inputs:
        began = time.perf_counter()
        call(item)
        ms.append((time.perf_counter() - began) * 1000)
    return Latency.of(kind, 1, ms, time.perf_counter() - began_all)


@dataclass(frozen=True)
class Workload(Generic[T]):
    """A kind of query and its inputs: `run` asks one of them on a connection in tenant scope."""

    kind: str
    run: Callable[[psycopg.Connection, T], object]
    inputs: Sequence[T]
    as_owner: bool = False  # asked by the tables' owner with the tenant set, not as the application role


def measure(url: str, tenant: str, work: Workload[T], clients: int = 1, warm: int = 3) -> Latency:
    """Time every input of `work` once, its inputs dealt round-robin to `clients` connections that
    start together; each connection first asks `warm` inputs untimed (plans, caches)."""
    shares = [list(work.inputs[c::clients]) for c in range(clients)]
    times: list[list[float]] = [[] for _ in range(clients)]
    errors: list[BaseException] = []
    ready = threading.Barrier(clients + 1)

    def client(c: int) -> None:
        try:
            with connect(url) as conn:
                for item in shares[c][:warm]:
                    _ask(conn, tenant, work, item)
                ready.wait()
                for item in shares[c]:
                    began = time.perf_counter()
                    _ask(conn, tenant, work, item)
                    times[c].append((time.perf_counter() - began) * 1000)
        except BaseException as exc:  # reported after the threads join
            errors.append(exc)
            ready.abort()

    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    with contextlib.suppress(threading.BrokenBarrierError):  # a client failed: its error is raised below
        ready.wait()
    began = time.perf_counter()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return Latency.of(work.kind, clients, [ms for c in times for ms in c], time.perf_counter() - began)


def _ask(conn: psycopg.Connection, tenant: str, work: Workload[T], item: T) -> None:
    if work.as_owner:
        with conn.transaction():
            conn.execute("select set_config(%s, %s, true)", [TENANT_SETTING, tenant])
            work.run(conn, item)
        return
    with tenant_scope(conn, tenant):
        work.run(conn, item)
