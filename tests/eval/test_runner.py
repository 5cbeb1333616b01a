"""The evaluation runner on a tiny generated multi-hop dataset, in a real database."""

from __future__ import annotations

import json
import re
import shlex
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from tortus_pg.cli.main import app
from typer.testing import CliRunner

from tortus_pg import migrate
from tortus_pg.db import connect, tenant_scope
from tortus_pg.embed import HashEmbedder
from tortus_pg.errors import InvalidInput
from tortus_pg.eval import report, runner
from tortus_pg.eval.datasets import TWIN, Dataset, TwinGap, load_dataset, twins
from tortus_pg.eval.strategies import StrategyContext, hit_ids, salient_terms, source_ids
from tortus_pg.retrieve import search

EMBEDDER = HashEmbedder(dim=384)
STRATEGIES = ["bm25", "vector", "hybrid", "bounded_agentic"]
LOG2_3 = 1.5849625007211562

PASSAGES = [
    ("p00", "Zorblax Tower", "Zorblax Tower is a lighthouse designed by Quintella Marsh in a coastal style."),
    ("p01", "Quintella Marsh", "Quintella Marsh came from Velmora and drew ships before buildings."),
    ("p02", "Velmora", "Velmora is a harbour town known for its rope works and herring market."),
    ("p03", "Kestrel Hall", "Kestrel Hall stands in Wuppertal beside an old dye works."),
    ("p04", "Dye works", "A dye works colours cloth with vats of indigo and madder."),
    ("p05", "Gannet Bridge", "Gannet Bridge crosses the estuary with seven stone arches."),
    ("p06", "Estuary ferry", "The estuary ferry ran every hour until the bridge opened."),
    ("p07", "Rope works", "Rope works twist hemp fibres into cables for sailing ships."),
    ("p08", "Tram museum", "The tram museum in Wuppertal keeps a dozen restored carriages."),
    ("p09", "Herring market", "The herring market opens at dawn on the quay every weekday."),
    ("p10", "Orchard Lane", "Orchard Lane is lined with pear trees planted by a schoolteacher."),
    ("p11", "Pear harvest", "The pear harvest festival draws visitors each September."),
    ("p12", "Lantern maker", "A lantern maker shapes tin and glass into portable lights."),
    ("p13", "Clock tower", "The clock tower chimes the quarter hours over the square."),
    ("p14", "Salt marsh", "A salt marsh floods at high tide and shelters wading birds."),
    ("p15", "Wading birds", "Wading birds such as avocets probe the mud for worms."),
    ("p16", "Stone arches", "Stone arches carry loads outward into their abutments."),
    ("p17", "Indigo", "Indigo is a deep blue dye obtained from plants."),
    ("p18", "Sailing ships", "Sailing ships need cables, canvas and a skilled crew."),
    ("p19", "Town square", "The town square hosts a market and an annual fair."),
]
QUESTIONS = [
    {"id": "q1", "question": "Who designed Zorblax Tower?", "answer": "Quintella Marsh",
     "gold_ids": ["p00"], "type": "single-hop", "n_hops": 1},
    # bm25 ranks p03 (kestrel + wuppertal) before p08 (wuppertal), and never finds p12.
    {"id": "q2", "question": "Kestrel Wuppertal", "answer": "x", "gold_ids": ["p08", "p12"],
     "type": "comparison", "n_hops": 2},
    # The bridge passage p01 shares no word with the question: only expansion reaches it.
    {"id": "q3", "question": "What is the hometown of the architect of Zorblax Tower?", "answer": "Velmora",
     "gold_ids": ["p00", "p01"], "type": "compositional", "n_hops": 2},
    {"id": "q4", "question": "How many arches does Gannet Bridge have?", "answer": "seven",
     "gold_ids": ["p05"], "type": "single-hop", "n_hops": 1},
    {"id": "q5", "question": "What is the airspeed velocity of an unladen swallow?", "answer": None,
     "gold_ids": [], "type": "negative", "n_hops": 0},
]


def write_dataset(root: Path) -> Path:
    root.mkdir(parents=True)
    corpus = [{"id": i, "title": t, "text": x} for i, t, x in PASSAGES]
    (root / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus), encoding="utf-8")
    (root / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS), encoding="utf-8")
    return root


@pytest.fixture
def dataset(tmp_path: Path) -> Dataset:
    return load_dataset(write_dataset(tmp_path / "tiny-hop"))


@pytest.fixture
def url(fresh_db: Callable[..., str]) -> str:
    url = fresh_db()
    migrate.upgrade(url)
    return url


@pytest.fixture
def db(url: str) -> Iterator[psycopg.Connection]:
    with connect(url) as conn:
        yield conn


def prepared(conn: psycopg.Connection, dataset: Dataset, external: str | None = None) -> tuple[str, StrategyContext]:
    tenant = runner.tenant_for(dataset)
    prefix = runner.prepare(conn, dataset, EMBEDDER, tenant)
    return tenant, StrategyContext(prefix, EMBEDDER, external_cmd=external)


def answers(evaluation: runner.EvalRun) -> dict[tuple[str, str], tuple[dict[str, Any], list[str]]]:
    return {(r.question_id, r.strategy): (r.metrics, r.retrieved) for r in evaluation.results}


def stored(conn: psycopg.Connection, tenant: str, run_id: int) -> list[tuple[Any, ...]]:
    with tenant_scope(conn, tenant):
        return conn.execute(
            "select question_id, strategy, metrics, retrieved from tortus.eval_result where run_id = %s "
            "order by question_id, strategy",
            [run_id],
        ).fetchall()


def test_prepare_ingests_once_and_again_for_another_embedder(db: psycopg.Connection, dataset: Dataset) -> None:
    tenant = runner.tenant_for(dataset)
    assert re.fullmatch(r"eval-tiny-hop-[0-9a-f]{6}", tenant)
    assert runner.prepare(db, dataset, EMBEDDER, tenant) == "tiny-hop/"
    with tenant_scope(db, tenant):
        first = db.execute("select uri, source_id from tortus.source order by uri").fetchall()
    runner.prepare(db, dataset, EMBEDDER, tenant)
    with tenant_scope(db, tenant):
        assert db.execute("select uri, source_id from tortus.source order by uri").fetchall() == first
    runner.prepare(db, dataset, HashEmbedder(dim=64), tenant)
    with tenant_scope(db, tenant):
        again = db.execute("select uri, source_id from tortus.source order by uri").fetchall()
        dims = db.execute("select distinct vector_dims(embedding) from tortus.node where kind = 'chunk'").fetchall()
    assert [u for u, _ in again] == [f"tiny-hop/{p[0]}" for p in PASSAGES]
    assert {s for _, s in again}.isdisjoint({s for _, s in first}) and dims == [(64,)]


def test_bm25_metrics_match_hand_computed_values(db: psycopg.Connection, dataset: Dataset) -> None:
    tenant, ctx = prepared(db, dataset)
    evaluation = runner.run(db, dataset, ["bm25"], tenant=tenant, context=ctx)
    got = answers(evaluation)
    metrics, retrieved = got[("q2", "bm25")]
    assert retrieved == ["p03", "p08"]  # only passages with a query word; p12 has none
    assert metrics["recall@2"] == metrics["recall@10"] == 0.5
    assert metrics["mrr"] == 0.5 and metrics["all_gold@5"] == 0.0
    assert metrics["ndcg@10"] == pytest.approx((1 / LOG2_3) / (1 + 1 / LOG2_3))  # 0.3869
    q1, top = got[("q1", "bm25")]
    assert top[0] == "p00" and q1["recall@2"] == q1["mrr"] == q1["ndcg@10"] == q1["all_gold@5"] == 1.0
    negative, _ = got[("q5", "bm25")]
    assert negative["recall@5"] is None and negative["mrr"] is None
    summary = runner.summarize(evaluation)["strategies"]["bm25"]
    assert summary["scored"] == 4 and summary["questions"] == 5
    scored = ("q1", "q2", "q3", "q4")
    assert summary["recall@2"] == pytest.approx(sum(got[(q, "bm25")][0]["recall@2"] for q in scored) / 4)
    assert summary["by_type"]["comparison"] == {"n": 1, "recall@5": 0.5, "all_gold@5": 0.0,
                                                "ndcg@10": pytest.approx(0.38685, abs=1e-5), "mrr": 0.5,
                                                "answer_match": None, "answer_em": None,
                                                "answer_f1": None}  # bm25 does not answer
    # q2 found one of two gold (traversal miss); q3 never reaches p01 but bm25 found p00 too.
    assert summary["failures"]["seed_miss"] == 0 and summary["failures"]["traversal_miss"] == 2


def test_eval_writes_the_documented_json_and_rows(db: psycopg.Connection, dataset: Dataset) -> None:
    tenant, ctx = prepared(db, dataset)
    evaluation = runner.run(db, dataset, STRATEGIES, tenant=tenant, context=ctx)
    doc = json.loads(json.dumps(runner.document(evaluation), allow_nan=False))
    assert doc["dataset"] == "tiny-hop" and doc["run_id"] == evaluation.run_id and doc["status"] == "done"
    assert list(doc["strategies"]) == STRATEGIES
    for name, entry in doc["strategies"].items():
        for metric in ("recall@2", "recall@5", "recall@10", "ndcg@10", "mrr", "all_gold@5"):
            lo, hi = entry["ci95"][metric]
            assert 0 <= lo <= entry[metric] <= hi <= 1, (name, metric)
        assert 0 < entry["latency_p50_ms"] <= entry["latency_p95_ms"]
        assert set(entry["failures"]) == {"seed_miss", "traversal_miss", "over_expansion"}
        assert ("vs_baseline" in entry) == (name != "bm25")
        for metric in ("recall@5", "all_gold@5", "ndcg@10") if "vs_baseline" in entry else ():
            paired = entry["vs_baseline"][metric]  # Holm never lowers a p-value
            assert paired["p"] is None or paired["p"] <= paired["p_holm"] <= 1
    assert 1 <= doc["strategies"]["bounded_agentic"]["fan_out"] <= 3
    assert [q["id"] for q in doc["questions"]] == ["q1", "q2", "q3", "q4", "q5"]
    assert set(doc["questions"][0]["results"]) == set(STRATEGIES) and doc["questions"][4]["negative"]
    rows = stored(db, tenant, evaluation.run_id)
    assert len(rows) == 5 * len(STRATEGIES)
    with tenant_scope(db, tenant):
        status, summary = db.execute(
            "select status, summary from tortus.eval_run where run_id = %s", [evaluation.run_id]
        ).fetchone() or (None, None)
    assert status == "done" and summary["strategies"]["hybrid"]["recall@5"] == doc["strategies"]["hybrid"]["recall@5"]


def test_expansion_reaches_the_bridge_passage_that_bm25_misses(db: psycopg.Connection, dataset: Dataset) -> None:
    tenant, ctx = prepared(db, dataset)
    got = answers(runner.run(db, dataset, ["bm25", "bounded_agentic"], tenant=tenant, context=ctx))
    assert "p01" not in got[("q3", "bm25")][1]
    metrics, retrieved = got[("q3", "bounded_agentic")]
    assert {"p00", "p01"} <= set(retrieved[:5]) and metrics["all_gold@5"] == 1.0 and metrics["fan_out"] >= 2
    question = "What is the hometown of the architect of Zorblax Tower?"
    assert salient_terms("Zorblax Tower", PASSAGES[0][2], question) == ["Quintella Marsh"]


def test_graph_strategies_walk_from_the_seed_to_the_bridge_passage(db: psycopg.Connection, dataset: Dataset) -> None:
    tenant, ctx = prepared(db, dataset)
    got = answers(runner.run(db, dataset, ["graph_local", "ppr"], tenant=tenant, context=ctx))
    ppr = got[("q3", "ppr")][1]
    assert {"p00", "p01"} <= set(ppr[:5])
    metrics, local = got[("q3", "graph_local")]
    assert "p00" in local[:5] and "p01" in local and metrics["fan_out"] > 0


def test_node_ids_map_back_to_dataset_ids(db: psycopg.Connection, dataset: Dataset) -> None:
    tenant, ctx = prepared(db, dataset)
    with tenant_scope(db, tenant):
        hits = search(db, "Kestrel Wuppertal", mode="keyword", k=10)
        assert source_ids(db, [h.node_id for h in hits], ctx.uri_prefix) == hit_ids(hits, ctx.uri_prefix)
        assert source_ids(db, [h.node_id for h in reversed(hits)], ctx.uri_prefix) == ["p08", "p03"]


def stop_after(questions: int) -> Callable[[int, int], None]:
    """A progress callback that interrupts a run once it has asked `questions` questions."""

    def progress(done: int, total: int) -> None:
        if done == questions:
            raise KeyboardInterrupt

    return progress


def test_interrupted_run_resumes_without_duplicates(db: psycopg.Connection, dataset: Dataset) -> None:
    tenant, ctx = prepared(db, dataset)
    with pytest.raises(KeyboardInterrupt):
        runner.run(db, dataset, STRATEGIES, tenant=tenant, context=ctx, on_progress=stop_after(2))
    with tenant_scope(db, tenant):
        run_id, status = db.execute("select run_id, status from tortus.eval_run").fetchone() or (0, "")
    assert status == "failed" and len(stored(db, tenant, run_id)) == 2 * len(STRATEGIES)
    resumed = runner.run(db, dataset, None, tenant=tenant, context=ctx, resume_run_id=run_id)
    assert resumed.run_id == run_id and resumed.status == "done" and resumed.strategies == STRATEGIES
    assert len(stored(db, tenant, run_id)) == 5 * len(STRATEGIES)
    fresh = runner.run(db, dataset, STRATEGIES, tenant=tenant, context=ctx)
    assert answers(resumed) == answers(fresh)


def test_limited_run_resumed_completes_with_the_same_results(db: psycopg.Connection, dataset: Dataset) -> None:
    tenant, ctx = prepared(db, dataset)
    first = runner.run(db, dataset, ["bm25", "hybrid"], tenant=tenant, context=ctx, limit=2)
    assert len(stored(db, tenant, first.run_id)) == 4
    before = stored(db, tenant, first.run_id)
    resumed = runner.run(db, dataset, None, tenant=tenant, context=ctx, resume_run_id=first.run_id)
    rows = stored(db, tenant, first.run_id)
    assert len(rows) == 10 and len({(q, s) for q, s, _, _ in rows}) == 10
    assert [r for r in rows if r[0] in ("q1", "q2")] == before
    fresh = runner.run(db, dataset, ["bm25", "hybrid"], tenant=tenant, context=ctx)
    assert answers(resumed) == answers(fresh)
    assert runner.summarize(resumed)["counts"]["questions"] == 5
    with pytest.raises(InvalidInput, match="started with k 10"):
        runner.run(db, dataset, None, tenant=tenant, context=ctx, k=5, resume_run_id=first.run_id)


def test_unknown_strategy_lists_the_available_ones(db: psycopg.Connection, dataset: Dataset) -> None:
    tenant, ctx = prepared(db, dataset)
    message = (
        "unknown strategy 'psychic'; available: bm25, bounded_agentic, community_summary, external, graph_local, "
        "hybrid, layout_euclidean, layout_random, layout_torus, ppr, tortus, vector"
    )
    with pytest.raises(InvalidInput, match=message):
        runner.run(db, dataset, ["bm25", "psychic"], tenant=tenant, context=ctx)
    with tenant_scope(db, tenant):
        assert db.execute("select count(*) from tortus.eval_run").fetchone() == (0,)


def test_external_strategy_is_skipped_when_unset_and_scored_when_set(db: psycopg.Connection, dataset: Dataset) -> None:
    tenant, ctx = prepared(db, dataset)
    evaluation = runner.run(db, dataset, ["bm25", "external"], tenant=tenant, context=ctx)
    summary = runner.summarize(evaluation)["strategies"]
    assert summary["external"] == {"status": "skipped", "reason": "TORTUS_EVAL_EXTERNAL_CMD is not set"}
    assert {s for _, s, _, _ in stored(db, tenant, evaluation.run_id)} == {"bm25"}

    script = "import json, sys; q = sys.stdin.read(); print(json.dumps(['p00', 'p00', 'p05'] * ('Zorblax' in q)))"
    _, ctx = prepared(db, dataset, external=f"{shlex.quote(sys.executable)} -c {shlex.quote(script)}")
    got = answers(runner.run(db, dataset, ["external"], tenant=tenant, context=ctx))
    assert got[("q1", "external")] == (got[("q1", "external")][0], ["p00", "p05"])
    assert got[("q1", "external")][0]["mrr"] == 1.0 and got[("q4", "external")][0]["recall@10"] == 0.0


def test_report_renders_markdown_and_png_plots(db: psycopg.Connection, dataset: Dataset, tmp_path: Path) -> None:
    tenant, ctx = prepared(db, dataset)
    evaluation = runner.run(db, dataset, [*STRATEGIES, "external"], tenant=tenant, context=ctx)
    path = report.render(runner.document(evaluation), tmp_path / "out")
    text = path.read_text(encoding="utf-8")
    assert path.name == "report.md" and "## Strategies" in text and "bounded_agentic" in text
    assert "By question type" in text and "compositional" in text and "seed miss" in text
    assert "Abstention is not scored" in text and "`external` skipped" in text
    for name in ("recall_at_k.png", "latency_recall.png", "ci_bars.png"):
        assert f"]({name})" in text
        assert (tmp_path / "out" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_lists_the_replies_that_missed(db: psycopg.Connection, dataset: Dataset, tmp_path: Path) -> None:
    tenant, ctx = prepared(db, dataset)
    doc = runner.document(runner.run(db, dataset, ["bm25", "tortus"], tenant=tenant, context=ctx))
    text = report.render(doc, tmp_path / "out").read_text(encoding="utf-8")
    assert "missed" in text and "## Replies of `bm25`" not in text  # bm25 does not answer
    single = doc["strategies"]["tortus"]["by_type"]["single-hop"]  # q1 and q4
    figures = " / ".join(f"{single[m]:.3f}" for m in ("answer_match", "answer_em", "answer_f1"))
    assert f"| single-hop | 2 | {figures} |" in text  # answers by question type, tortus alone
    section = text[text.index("## Replies of `tortus` that missed"):]
    listed = re.findall(r"^\| (q\d): .*? \| (.*?) \| (answered .*?|withheld.*?) \|", section, flags=re.M)
    by_id = {q["id"]: q for q in doc["questions"]}
    # q2 asks for "x", which no passage says: whatever the engine replies, it misses.
    assert "q2" in {i for i, _, _ in listed} and "q1" not in {i for i, _, _ in listed}  # q1 is answered
    for question_id, expected, miss in listed:
        q = by_id[question_id]
        assert expected == (q["answer"] or "(none)")
        assert miss == report.miss_of(q["negative"], q["results"]["tortus"]["metrics"]).value


def test_a_miss_is_told_from_the_metrics_of_the_reply() -> None:
    miss = report.miss_of
    assert miss(True, {"withheld": 1.0}) is None and miss(True, {"withheld": 0.0}) is report.Miss.NEGATIVE_ANSWERED
    assert miss(False, {"withheld": 0.0, "answer_match": 1.0}) is None
    assert miss(False, {"withheld": 0.0, "answer_match": 0.0}) is report.Miss.ANSWERED_WRONG
    assert miss(False, {"withheld": 1.0, "reply_match": 1.0}) is report.Miss.DRAFT_WITHHELD
    assert miss(False, {"withheld": 1.0, "reply_match": 0.0}) is report.Miss.WITHHELD


def test_analyst_view_averages_metrics_per_run_within_the_tenant(db: psycopg.Connection, dataset: Dataset) -> None:
    tenant, ctx = prepared(db, dataset)
    evaluation = runner.run(db, dataset, ["bm25", "hybrid"], tenant=tenant, context=ctx)
    summary = runner.summarize(evaluation)["strategies"]
    with tenant_scope(db, tenant, role="analyst"):
        rows = db.execute(
            "select strategy, metric, mean, n from tortus.eval_metric_by_run where run_id = %s",
            [evaluation.run_id],
        ).fetchall()
    means = {(s, m): (mean, n) for s, m, mean, n in rows}
    assert means[("bm25", "recall@5")] == (pytest.approx(summary["bm25"]["recall@5"]), 4)
    assert means[("hybrid", "ndcg@10")][0] == pytest.approx(summary["hybrid"]["ndcg@10"])
    with connect(db.info.dsn) as other:  # another tenant sees no rows through the view
        other.execute("insert into tortus.tenant (tenant_id, name) values ('other', 'other')")
        with tenant_scope(other, "other", role="analyst"):
            assert other.execute("select count(*) from tortus.eval_metric_by_run").fetchone() == (0,)
        other.rollback()


def test_cli_eval_and_report(url: str, tmp_path: Path) -> None:
    root = write_dataset(tmp_path / "cli-hop")
    env = {"TORTUS_DATABASE_URL": url, "TORTUS_EMBEDDER": "hash"}
    cli = CliRunner()
    out = tmp_path / "eval.json"
    result = cli.invoke(app, ["--workspace", str(tmp_path), "eval", str(root), "--strategies", "bm25,tortus",
                              "--limit", "3", "--json-out", str(out)], env=env)
    assert result.exit_code == 0, result.output
    assert "bm25" in result.output and "tortus" in result.output and "3 questions" in result.output
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert list(doc["strategies"]) == ["bm25", "tortus"] and len(doc["questions"]) == 3
    from_json = cli.invoke(app, ["--workspace", str(tmp_path), "report", "--eval-json", str(out),
                                 "--out", str(tmp_path / "a")], env=env)
    assert from_json.exit_code == 0, from_json.output
    from_db = cli.invoke(app, ["--workspace", str(tmp_path), "report", "--run", str(doc["run_id"]),
                               "--out", str(tmp_path / "b")], env=env)
    assert from_db.exit_code == 0, from_db.output
    # The report from the database reads the replies back from the run's rows: the same report,
    # the replies that missed included (q2 asks for what no passage says).
    assert (tmp_path / "a" / "report.md").read_text() == (tmp_path / "b" / "report.md").read_text()
    assert re.search(r"^\| q2: ", (tmp_path / "b" / "report.md").read_text(), flags=re.M)
    bad = cli.invoke(app, ["--workspace", str(tmp_path), "eval", str(root), "--strategies", "bm25,nope"], env=env)
    assert bad.exit_code != 0 and "unknown strategy 'nope'" in str(bad.exception)


def test_twins_are_asked_over_the_corpus_without_their_gold_passages(
    db: psycopg.Connection, dataset: Dataset
) -> None:
    twin_set = twins(dataset, limit=3)
    assert twin_set.name == "tiny-hop-twins" and twin_set.excluded == {"p00", "p01", "p08", "p12"}
    assert all(q.is_negative and q.type == TWIN for q in twin_set.questions) and len(twin_set.questions) == 3
    tenant, _ = prepared(db, twin_set)
    with tenant_scope(db, tenant):
        uris = {r[0] for r in db.execute("select uri from tortus.source").fetchall()}
    assert len(uris) == len(PASSAGES) - 4 and not {"tiny-hop/p00", "tiny-hop/p01", "tiny-hop/p08"} & uris
    with pytest.raises(InvalidInput, match="need a multi-hop dataset"):
        twins(Dataset("g", "golden", None, dataset.questions))


def test_answer_twins_leave_out_only_the_gold_passages_stating_the_answer(
    db: psycopg.Connection, dataset: Dataset
) -> None:
    # q1's answer is in p00; q3's ("Velmora") in p01 and not in p00, which names the tower q3
    # asks about; q2's answer is in neither gold passage, so its last one (p12) goes.
    twin_set = twins(dataset, limit=3, gap=TwinGap.ANSWER)
    assert twin_set.name == "tiny-hop-answer-twins" and twin_set.excluded == {"p00", "p01", "p12"}
    assert all(q.is_negative and q.type == TWIN for q in twin_set.questions)
    only_q3 = twins(Dataset("three", "multihop", dataset.corpus_path, dataset.questions[2:3]), gap=TwinGap.ANSWER)
    assert only_q3.excluded == {"p01"}
    tenant, _ = prepared(db, only_q3)
    with tenant_scope(db, tenant):
        uris = {r[0] for r in db.execute("select uri from tortus.source").fetchall()}
    assert "three-answer-twins/p00" in uris and "three-answer-twins/p01" not in uris
    assert len(uris) == len(PASSAGES) - 1


def test_cli_eval_with_twins_prints_and_writes_the_abstention_curve(url: str, tmp_path: Path) -> None:
    root = write_dataset(tmp_path / "twin-hop")
    out = tmp_path / "eval.json"
    result = CliRunner().invoke(app, ["--workspace", str(tmp_path), "eval", str(root), "--strategies", "bm25,tortus",
                                      "--twins", "--json-out", str(out)],
                                env={"TORTUS_DATABASE_URL": url, "TORTUS_EMBEDDER": "hash", "COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    assert "unanswerable twins" in result.output and "withheld when unanswerable" in result.output
    # Its negative (q5) gives the set an abstention curve of its own too.
    assert "tortus: answerable questions (4) and the set's negatives (1)" in result.output
    doc = json.loads(out.read_text(encoding="utf-8"))
    curve = doc["twins"]["abstention_curve"]
    assert list(curve) == ["tortus"]  # bm25 does not answer
    assert [p["threshold"] for p in curve["tortus"]][:3] == [0.0, 0.05, 0.1]
    withheld = [p["withheld_when_unanswerable"] for p in curve["tortus"]]
    answered = [p["answered_when_answerable"] for p in curve["tortus"]]
    assert withheld == sorted(withheld) and answered == sorted(answered, reverse=True)
    assert {t["id"] for t in doc["twins"]["questions"]} == {q["id"] for q in QUESTIONS}
    for twin in doc["twins"]["questions"]:  # what was said over the snapshot without the gold, for tortus only
        assert ("reply" in twin) == (twin["strategy"] == "tortus")
        assert "reply" not in twin or twin["reply"]["withheld"] == bool(twin["metrics"]["withheld"])
    shown = CliRunner().invoke(app, ["--workspace", str(tmp_path), "report", "--eval-json", str(out), "--out",
                                     str(tmp_path / "report")], env={"TORTUS_DATABASE_URL": url})
    assert shown.exit_code == 0, shown.output
    assert "## Abstention curve of `tortus`" in (tmp_path / "report" / "report.md").read_text(encoding="utf-8")
    assert (tmp_path / "report" / "abstention-tortus.png").read_bytes()[:4] == b"\x89PNG"
    # The run stored in the database knows its twins' run: its report has the same curve.
    stored = CliRunner().invoke(app, ["--workspace", str(tmp_path), "report", "--run", str(doc["run_id"]), "--out",
                                      str(tmp_path / "stored")], env={"TORTUS_DATABASE_URL": url})
    assert stored.exit_code == 0, stored.output
    assert (tmp_path / "stored" / "report.md").read_text() == (tmp_path / "report" / "report.md").read_text()


def test_the_engine_reports_how_many_of_its_path_hops_stay_inside_a_torus_shard(
    db: psycopg.Connection, dataset: Dataset,
) -> None:
    tenant, ctx = prepared(db, dataset)
    doc = runner.document(runner.run(db, dataset, ["tortus", "layout_random"], tenant=tenant, context=ctx))
    for name in ("tortus", "layout_random"):
        rows = [q["results"][name]["metrics"] for q in doc["questions"]]
        hops, crossings = sum(m["path_hops"] for m in rows), sum(m["shard_crossings"] for m in rows)
        assert hops > 0 and 0 <= crossings <= hops
        assert doc["strategies"][name]["shard_affinity"] == pytest.approx(1 - crossings / hops, abs=1e-4)


def test_a_run_keeps_what_the_engine_replied_for_sql_and_json(db: psycopg.Connection, dataset: Dataset) -> None:
    tenant, ctx = prepared(db, dataset)
    with pytest.raises(KeyboardInterrupt):
        runner.run(db, dataset, ["bm25", "tortus"], tenant=tenant, context=ctx, on_progress=stop_after(3))
    with tenant_scope(db, tenant):
        (run_id,) = db.execute("select run_id from tortus.eval_run").fetchone() or (0,)
    evaluation = runner.run(db, dataset, None, tenant=tenant, context=ctx, resume_run_id=run_id)
    doc = runner.document(evaluation)  # three replies read back from the rows, two asked on resuming
    replies = {q["id"]: q["results"]["tortus"]["reply"] for q in doc["questions"]}
    assert all("reply" not in q["results"]["bm25"] for q in doc["questions"])  # bm25 only retrieves
    assert list(replies) == ["q1", "q2", "q3", "q4", "q5"]
    for q in doc["questions"]:
        reply, metrics = replies[q["id"]], q["results"]["tortus"]["metrics"]
        assert reply["withheld"] == bool(metrics["withheld"])
        assert (reply["answer"] is None) == reply["withheld"] and (reply["refusal"] is None) != reply["withheld"]
        assert reply["short_answer"] is None or reply["short_answer"] in reply["answer"]
    assert "Quintella Marsh" in replies["q1"]["answer"]  # the one-hop question is answered
    with tenant_scope(db, tenant, role="analyst"):
        rows = db.execute("select question_id, question, strategy, withheld, refusal, answer, answer_match "
                          "from tortus.eval_reply where run_id = %s order by question_id", [run_id]).fetchall()
    asked = {q["id"]: q["question"] for q in QUESTIONS}
    assert [(r[0], r[1], r[2]) for r in rows] == [(i, asked[i], "tortus") for i in asked]
    for question_id, _, _, withheld, refusal, answer, match in rows:
        reply = replies[question_id]
        assert (withheld, refusal, answer) == (reply["withheld"], reply["refusal"], reply["answer"])
        assert match == doc["questions"][int(question_id[1:]) - 1]["results"]["tortus"]["metrics"].get("answer_match")
    with connect(db.info.dsn) as other:  # another tenant reads none of them
        other.execute("insert into tortus.tenant (tenant_id, name) values ('other', 'other')")
        with tenant_scope(other, "other", role="analyst"):
            assert other.execute("select count(*) from tortus.eval_reply").fetchone() == (0,)
        other.rollback()


def test_trec_files_score_as_the_report_does_in_ir_measures(url: str, tmp_path: Path) -> None:
    import ir_measures  # a dev dependency: the TREC files are read by a library users bring
    root = write_dataset(tmp_path / "trec-hop")
    out, trec_dir = tmp_path / "eval.json", tmp_path / "trec"
    result = CliRunner().invoke(app, ["--workspace", str(tmp_path), "eval", str(root), "--strategies", "bm25,hybrid",
                                      "--json-out", str(out), "--trec-run", str(trec_dir)],
                                env={"TORTUS_DATABASE_URL": url, "TORTUS_EMBEDDER": "hash", "COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert sorted(p.name for p in trec_dir.iterdir()) == ["trec-hop.bm25.run", "trec-hop.hybrid.run", "trec-hop.qrels"]
    qrels = list(ir_measures.read_trec_qrels(str(trec_dir / "trec-hop.qrels")))
    assert {q.query_id for q in qrels} == {q["id"] for q in QUESTIONS if q["gold_ids"]}  # the negative is left out
    for strategy in ("bm25", "hybrid"):
        run = list(ir_measures.read_trec_run(str(trec_dir / f"trec-hop.{strategy}.run")))
        scores = ir_measures.calc_aggregate([ir_measures.nDCG @ 10, ir_measures.R @ 5], qrels, run)
        assert scores[ir_measures.nDCG @ 10] == pytest.approx(doc["strategies"][strategy]["ndcg@10"], abs=1e-9)
        assert scores[ir_measures.R @ 5] == pytest.approx(doc["strategies"][strategy]["recall@5"], abs=1e-9)


def test_two_sets_in_folders_of_one_name_keep_snapshots_of_their_own(db: psycopg.Connection, tmp_path: Path) -> None:
    """Both sets are named `normalized` by their folders; evaluating one never replaces the
    other's snapshot, and a second round ingests nothing."""
    first = load_dataset(write_dataset(tmp_path / "hotpot" / "normalized"))
    second = load_dataset(write_dataset(tmp_path / "musique" / "normalized"))
    assert first.name == second.name == "normalized"
    tenants = [runner.tenant_for(first), runner.tenant_for(second)]
    assert tenants[0] != tenants[1] and all(t.startswith("eval-normalized-") for t in tenants)
    assert runner.tenant_for(twins(first)) not in tenants

    def snapshot(ds: Dataset, tenant: str) -> list[tuple[str, int]]:
        runner.prepare(db, ds, EMBEDDER, tenant)
        with tenant_scope(db, tenant):
            return [(str(u), int(i)) for u, i in db.execute("select uri, source_id from tortus.source order by uri")]

    made = [snapshot(first, tenants[0]), snapshot(second, tenants[1])]
    assert [snapshot(first, tenants[0]), snapshot(second, tenants[1])] == made  # nothing ingested again

