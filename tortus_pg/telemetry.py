"""Traces of ingest and of each query stage, through OpenTelemetry when the `otel` extra is
installed (`pip install 'tortus-pg[otel]'`); without it every span here costs nothing.

Spans: `tortus.query` per question (its budgets, what it returned and how much of the
budget it used), `tortus.query.<stage>` per stage of the engine (seed, walk, portal_walk, bridge,
synthesis …, with the time left when it began), `tortus.ingest.source` per source with
`tortus.ingest.<step>` for parsing, chunking, extraction, embedding and storing. Question and
document text never go into a span, only ids, counts and timings. Spans only observe: nothing
the engine returns depends on them.

`configure()` exports spans over OTLP when the standard variables ask for it
(`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, with `OTEL_SERVICE_NAME`
and the exporter's other `OTEL_*` settings); `serve` also instruments FastAPI and psycopg.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tortus_pg.query.results import Budget

try:
    from opentelemetry import trace
except ImportError:  # the otel extra is not installed
    trace = None  # type: ignore[assignment]

TRACER = "tortus_pg"
ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
Attribute = str | bool | int | float | Sequence[str] | Sequence[int] | Sequence[float]


class Span:
    """The span of a piece of work, to which results are added when they are known; a no-op
    without OpenTelemetry."""

    def __init__(self, span: Any = None) -> None:
        self._span = span

    def set(self, **attributes: Attribute | None) -> None:
        if self._span is not None:
            self._span.set_attributes(_clean(attributes))


@contextmanager
def span(name: str, **attributes: Attribute | None) -> Iterator[Span]:
    """A span named `name`, the current span's child, open while the block runs; an exception
    leaving the block is recorded on it."""
    if trace is None:
        yield Span()
        return
    with trace.get_tracer(TRACER).start_as_current_span(name, attributes=_clean(attributes)) as current:
        yield Span(current)


def _clean(attributes: Mapping[str, Attribute | None]) -> dict[str, Any]:
    """The attributes OpenTelemetry accepts, under the `tortus.` prefix: None left out, lists as
    lists."""
    return {f"tortus.{k}": list(v) if isinstance(v, tuple | list) else v for k, v in attributes.items()
            if v is not None}


def budget_use(budget: Budget) -> dict[str, Attribute]:
    """An answer's budgets as span attributes: `<budget>_limit` and `<budget>_used` (ms, hops,
    tokens, portal hops)."""
    return {f"{name}_{part}": value for name, parts in budget.to_json().items() for part, value in parts.items()}


def enabled_by_environment(env: Mapping[str, str] | None = None) -> bool:
    """Whether the standard OTLP variables ask for spans to be exported."""
    env = os.environ if env is None else env
    return any(env.get(name) for name in ENDPOINT_VARIABLES)


def configure(env: Mapping[str, str] | None = None) -> bool:
    """Export spans over OTLP/HTTP when the environment asks for it (`enabled_by_environment`)
    and the otel extra is installed; True when it does. Calling it again changes nothing."""
    if trace is None or not enabled_by_environment(env):
        return False
    _export_over_otlp()
    return True


@functools.cache
def _export_over_otlp() -> None:
    """The process's tracer provider: a batch of spans at a time to the OTLP exporter, which
    reads its endpoint, headers and timeouts from the OTEL_* variables."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import OTELResourceDetector, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create({"service.name": "tortus-pg"}).merge(OTELResourceDetector().detect())
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)


def instrument_server(app: Any) -> None:
    """Spans for every HTTP request (FastAPI) and every SQL statement (psycopg)."""
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
    from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor

    FastAPIInstrumentor.instrument_app(app)
    PsycopgInstrumentor().instrument()
