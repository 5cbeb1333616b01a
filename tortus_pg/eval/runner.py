"""Run retrieval strategies side by side on one ingested snapshot of a dataset's corpus.

`prepare` ingests the corpus into a tenant of its own (once per corpus and embedder); `run`
asks every strategy every question and writes one tortus.eval_result row per (question,
strategy), with the question's text and, for strategies that answer, their reply. It commits
after each question, so an interrupted run loses nothing and `resume_run_id` continues it.
Both commit as they go: pass an idle connection.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from tortus_pg import tenants
from tortus_pg.db import require_idle, tenant_scope
from tortus_pg.embed import Embedder
from tortus_pg.errors import InvalidInput, TortusError
from tortus_pg.eval import community, graph_strategies  # noqa: F401  (register community_summary, graph_local, ppr)
from tortus_pg.eval.datasets import Dataset, Question
from tortus_pg.eval.strategies import Strategy, StrategyContext, StrategyFailed, StrategyResult, build
from tortus_pg.eval.summary import (
    EvalRun,
    Reply,
    Result,
    asked,
    document,
    question_metrics,
    question_rows,
    summarize,
    twins_section,
)
from tortus_pg.indexing import build_index
from tortus_pg.ingest import pipeline, sources
from tortus_pg.ingest.corpus import ingest_passages, read_passages
from tortus_pg.ingest.store import GRAPH_VERSION

__all__ = [
    "DEFAULT_STRATEGIES", "EvalRun", "Result", "document", "prepare", "run", "stored_summary", "summarize",
    "tenant_for",
]

DEFAULT_STRATEGIES = ("bm25", "vector", "hybrid", "bounded_agentic")
DEFAULT_K = 10
SNAPSHOT_KEY = "eval_snapshot"
Progress = Callable[[int, int], None]


def tenant_for(dataset: Dataset) -> str:
    """The tenant holding a dataset's snapshot: eval-<name>-<hash>, a readable name and six hex
    digits of the set's resolved corpus path (and name, so a set's twins differ from it). Two
    sets kept in folders of the same name (`…/normalized/`) get snapshots of their own."""
    slug = re.sub(r"[^a-z0-9_-]+", "-", dataset.name.lower()).strip("-_") or "dataset"
    where = str(dataset.corpus_path.resolve()) if dataset.corpus_path is not None else ""
    digest = hashlib.sha256(f"{dataset.name}\0{where}".encode()).hexdigest()[:6]
    return f"eval-{slug}"[:55].rstrip("-_") + f"-{digest}"


def _fingerprint(paths: Sequence[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(str(path.name).encode() + b"\0")
        with path.open("rb") as handle:
            while block := handle.read(1 << 20):
                digest.update(block)
    return digest.hexdigest()


def _snapshot(conn: psycopg.Connection, tenant: str) -> tuple[dict[str, Any] | None, int]:
    with conn.transaction():
        row = conn.execute(
            "select settings -> %s from tortus.tenant where tenant_id = %s", [SNAPSHOT_KEY, tenant]
        ).fetchone()
    with tenant_scope(conn, tenant):
        count = conn.execute("select count(*) from tortus.source").fetchone()
    return (row[0] if row else None), int(count[0]) if count else 0


def _record(conn: psycopg.Connection, tenant: str, snapshot: dict[str, Any]) -> None:
    with conn.transaction():
        conn.execute(
            "update tortus.tenant set settings = settings || jsonb_build_object(%s::text, %s::jsonb) "
            "where tenant_id = %s",
            [SNAPSHOT_KEY, Jsonb(snapshot), tenant],
        )


def _clear(conn: psycopg.Connection, tenant: str) -> None:
    # Runs (eval_run, eval_result) stay: they record the snapshot they were made on.
    with tenant_scope(conn, tenant):
        for table in ("node", "source", "subgraph"):
            conn.execute(sql.SQL("delete from tortus.{}").format(sql.Identifier(table)))


def _wanted(dataset: Dataset, embedder: Embedder, files: Sequence[Path], total: int, prefix: str) -> dict[str, Any]:
    """What a snapshot of the dataset's corpus records, to be reused only when all of it matches."""
    return {
        "corpus_sha256": _fingerprint(files),
        "passages": total,
        "embedder": embedder.name,
        "uri_prefix": prefix,
        "graph_version": GRAPH_VERSION,
        # Twins leave passages out: a snapshot of the same corpus with other gaps is another snapshot.
        **({"excluded": hashlib.sha256("\n".join(sorted(dataset.excluded)).encode()).hexdigest()}
           if dataset.excluded else {}),
    }


def prepare(
    conn: psycopg.Connection,
    dataset: Dataset,
    embedder: Embedder,
    tenant: str,
    *,
    ts_config: str = "english",
    on_progress: Progress | None = None,
) -> str:
    """Ingest the dataset's corpus into `tenant` (created when missing) and index it; return the
    uri prefix that turns a source uri into a dataset id.

    A snapshot of the same corpus bytes, passage count, embedder and graph version is reused as it
    is; one of a different corpus, embedder or graph version is cleared and ingested again; an
    interrupted one is completed.
    """
    require_idle(conn, "preparing an evaluation corpus")
    if dataset.corpus_path is None:
        raise InvalidInput(f"dataset {dataset.name!r} has no corpus to ingest")
    prefix = f"{dataset.name}/"
    specs = sources.from_manifest(dataset.corpus_path, uri_base=dataset.name) if dataset.kind == "golden" else []
    passages = [] if specs else [p for p in read_passages(dataset.corpus_path) if p.id not in dataset.excluded]
    files = [dataset.corpus_path, *(Path(s.location) for s in specs if not s.is_url)]
    total = len(specs or passages)
    wanted = _wanted(dataset, embedder, files, total, prefix)
    with conn.transaction():
        tenants.create_tenant(conn, tenant)
    recorded, count = _snapshot(conn, tenant)
    if recorded == {**wanted, "complete": True} and count == wanted["passages"]:
        return prefix
    if count and (recorded is None or {**recorded, "complete": False} != {**wanted, "complete": False}):
        _clear(conn, tenant)
    _record(conn, tenant, {**wanted, "complete": False})
    done = 0

    def step(n: int) -> None:
        nonlocal done
        done += n
        if on_progress is not None:
            on_progress(done, total)

    if specs:
        options = pipeline.IngestOptions(ts_config=ts_config)
        summary = pipeline.ingest(conn, tenant, specs, embedder, options, on_progress=lambda _s, _r: step(1))
        if summary.failed:
            uri, reason = summary.failed[0]
            raise TortusError(f"{len(summary.failed)} corpus sources failed to ingest, e.g. {uri}: {reason}")
    else:
        ingest_passages(conn, tenant, passages, embedder, uri_prefix=prefix, subgraph=dataset.name[:200],
                        ts_config=ts_config, on_batch=step)
    build_index(conn, tenant)
    _record(conn, tenant, {**wanted, "complete": True})
    return prefix


_INSERT_RUN = (
    "insert into tortus.eval_run (tenant_id, dataset, config) "
    "values (tortus.current_tenant(), %(dataset)s, %(config)s) returning run_id"
)
_INSERT_RESULT = (
    "insert into tortus.eval_result"
    " (tenant_id, run_id, question_id, strategy, metrics, retrieved, latency_ms, question, reply) "
    "values (tortus.current_tenant(), %(run)s, %(q)s, %(s)s, %(m)s, %(r)s, %(ms)s, %(text)s, %(reply)s)"
)
_RESULTS = ("select question_id, strategy, metrics, retrieved, latency_ms, reply from tortus.eval_result"
            " where run_id = %s")


def _load(conn: psycopg.Connection, run_id: int, dataset: Dataset) -> tuple[dict[str, Any], list[Result]]:
    row = conn.execute("select dataset, config from tortus.eval_run where run_id = %s", [run_id]).fetchone()
    if row is None:
        raise InvalidInput(f"no evaluation run {run_id} for dataset {dataset.name!r}")
    if row[0] != dataset.name:
        raise InvalidInput(f"run {run_id} evaluated dataset {row[0]!r}, not {dataset.name!r}")
    return dict(row[1]), _results(conn, run_id)


def _results(conn: psycopg.Connection, run_id: int) -> list[Result]:
    return [Result(q, s, m, list(r), float(ms or 0.0), Reply.stored(reply))
            for q, s, m, r, ms, reply in conn.execute(_RESULTS, [run_id])]


def _start(conn: psycopg.Connection, dataset: Dataset, config: dict[str, Any], run_id: int | None) -> int:
    if run_id is None:
        row = conn.execute(_INSERT_RUN, {"dataset": dataset.name, "config": Jsonb(config)}).fetchone()
        assert row is not None
        return int(row[0])
    conn.execute(
        "update tortus.eval_run set config = %s, status = 'running', finished_at = null where run_id = %s",
        [Jsonb(config), run_id],
    )
    return run_id


def _ask(conn: psycopg.Connection, strategy: Strategy, question: Question, k: int) -> Result:
    start = time.perf_counter()
    error = None
    try:
        out = strategy.retrieve(conn, question.text, k)
    except StrategyFailed as exc:
        out, error = StrategyResult([]), str(exc)
    latency_ms = (time.perf_counter() - start) * 1000
    metrics: dict[str, Any] = question_metrics(out, question.gold, negative=question.is_negative,
                                               expected=(question.answer, *question.aliases))
    if error is not None:
        metrics["error"] = error
    return Result(question.id, strategy.name, metrics, out.ranked_ids, latency_ms, Reply.of(out))


def _answer(
    conn: psycopg.Connection, run_id: int, todo: Sequence[Strategy], question: Question, k: int
) -> list[Result]:
    fresh = [_ask(conn, s, question, k) for s in todo]
    for r in fresh:
        params = {"run": run_id, "q": r.question_id, "s": r.strategy, "m": Jsonb(r.metrics),
                  "r": Jsonb(r.retrieved), "ms": r.latency_ms, "text": question.text,
                  "reply": Jsonb(r.reply.json()) if r.reply is not None else None}
        conn.execute(_INSERT_RESULT, params)
    return fresh


def _finish(conn: psycopg.Connection, evaluation: EvalRun, status: str) -> None:
    evaluation.status = status
    summary = {**summarize(evaluation), "questions": asked(evaluation)} if status == "done" else {}
    with tenant_scope(conn, evaluation.tenant):
        conn.execute(
            "update tortus.eval_run set status = %s, finished_at = now(), summary = %s where run_id = %s",
            [status, Jsonb(summary), evaluation.run_id],
        )


def run(
    conn: psycopg.Connection,
    dataset: Dataset,
    strategies: Sequence[str] | None,
    *,
    tenant: str,
    context: StrategyContext,
    k: int | None = None,
    limit: int | None = None,
    resume_run_id: int | None = None,
    on_progress: Progress | None = None,
) -> EvalRun:
    """Evaluate `strategies` (default: DEFAULT_STRATEGIES, or the resumed run's) on the first
    `limit` questions, retrieving `k` ids each (default 10, or the resumed run's k).

    Writes tortus.eval_run and one tortus.eval_result per (question, strategy), committed per
    question; a resumed run skips the pairs already stored. Marks the run done (with its
    summary) at the end, or failed when interrupted. Unknown strategies raise InvalidInput.
    """
    require_idle(conn, "an evaluation run")
    if limit is not None and limit < 1:
        raise InvalidInput(f"limit must be at least 1, got {limit}")
    stored: dict[str, Any] = {}
    results: list[Result] = []
    if resume_run_id is not None:
        with tenant_scope(conn, tenant):
            stored, results = _load(conn, resume_run_id, dataset)
    names = list(strategies or stored.get("strategies") or DEFAULT_STRATEGIES)
    k = k or int(stored.get("k", DEFAULT_K))
    for key, value in (("strategies", names), ("k", k)):
        if stored and stored.get(key) != value:
            raise InvalidInput(f"run {resume_run_id} was started with {key} {stored.get(key)}; resume it with the same")
    ready, skipped = build(names, context)
    questions = dataset.questions[:limit] if limit else dataset.questions
    embedder = context.embedder.name if context.embedder is not None else None
    config = {**stored, "kind": dataset.kind, "k": k, "limit": limit, "strategies": names, "skipped": skipped,
              "embedder": embedder, "uri_prefix": context.uri_prefix, "questions": len(questions)}
    with tenant_scope(conn, tenant):
        run_id = _start(conn, dataset, config, resume_run_id)
    evaluation = EvalRun(run_id, tenant, dataset, config, list(ready), skipped, results)
    done = {(r.question_id, r.strategy) for r in results}
    try:
        for number, question in enumerate(questions, 1):
            if todo := [s for name, s in ready.items() if (question.id, name) not in done]:
                with tenant_scope(conn, tenant):
                    results.extend(_answer(conn, run_id, todo, question, k))
            if on_progress is not None:
                on_progress(number, len(questions))
    except BaseException:
        with contextlib.suppress(psycopg.Error):  # keep the original error if the database is gone too
            conn.rollback()
            _finish(conn, evaluation, "failed")
        raise
    _finish(conn, evaluation, "done")
    return evaluation


def link_twins(conn: psycopg.Connection, evaluation: EvalRun, twin_run: EvalRun) -> None:
    """Record on a finished run the run of its unanswerable twins (`datasets.twins`), so that the
    run's stored summary carries their abstention curve as its JSON document does."""
    with tenant_scope(conn, evaluation.tenant):
        conn.execute("update tortus.eval_run set summary = summary || jsonb_build_object('twins_run', %s::bigint)"
                     " where run_id = %s and status = 'done'", [twin_run.run_id, evaluation.run_id])


def stored_summary(conn: psycopg.Connection, run_id: int) -> dict[str, Any]:
    """The summary saved with a finished run, found in any tenant (owner connection), with its
    question rows read back from the run's results, as `document` writes them, and the section of
    its twins' run when it has one (`link_twins`)."""
    row = conn.execute("select status, summary from tortus.eval_run where run_id = %s", [run_id]).fetchone()
    if row is None:
        raise InvalidInput(f"no evaluation run {run_id}")
    status, summary = row
    if status != "done" or not summary:
        raise InvalidInput(f"run {run_id} is {status}; finish it with `tortus-pg eval DATASET --resume {run_id}`")
    results = _results(conn, run_id)
    stored = {**summary, "questions": question_rows(summary.get("questions", []), results)}
    twin_run = summary.get("twins_run")
    twin = conn.execute("select dataset from tortus.eval_run where run_id = %s and status = 'done'",
                        [twin_run]).fetchone() if twin_run is not None else None
    if twin is not None:
        stored["twins"] = twins_section(results, int(twin_run), twin[0], _results(conn, int(twin_run)))
    return stored
