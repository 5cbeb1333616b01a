"""`tortus-pg bench`: the engine's time per stage and where its answers are lost, over a real
database (hash embedder)."""

from pathlib import Path

from tortus_pg.cli.main import app
from typer.testing import CliRunner

from tortus_pg.bench import answer_losses
from tortus_pg.db import connect, tenant_scope
from tortus_pg.embed import make_embedder
from tortus_pg.errors import InvalidInput
from tortus_pg.eval.datasets import Question
from tortus_pg.query.refusal import Refusal

runner = CliRunner()


def test_bench_times_every_stage_on_the_workspace_tenant(demo: tuple[Path, dict[str, str]]) -> None:
    ws, env = demo
    result = runner.invoke(app, ["--workspace", str(ws), "bench", "demo", "--on-tenant", "--limit", "3"],
                           env={**env, "COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    rows = {cells[0]: cells[1:] for line in result.output.splitlines()
            if len(cells := [c.strip() for c in line.strip("│ ").split("│")]) == 4}
    assert {"walk", "seed", "density", "synthesis", "stages", "embed + stages"} <= rows.keys(), result.output
    assert rows["walk"][0] == "3" and float(rows["walk"][1]) > 0
    # Each question's whole time is at least its slowest stage; p95 is at least the mean.
    assert float(rows["embed + stages"][1]) >= float(rows["walk"][1])
    assert all(float(p95) >= float(mean) for _, mean, p95 in rows.values() if _ == "3")


def test_bench_without_a_snapshot_says_how_to_make_one(demo: tuple[Path, dict[str, str]]) -> None:
    ws, env = demo
    result = runner.invoke(app, ["--workspace", str(ws), "bench", "demo", "--limit", "1"], env=env)
    assert isinstance(result.exception, InvalidInput)
    assert "run `tortus-pg eval demo` first, or pass --on-tenant" in str(result.exception)


def test_bench_answers_counts_where_answers_are_lost(demo: tuple[Path, dict[str, str]]) -> None:
    clause = "What does clause 7.3.2 of the Information Security Policy require?"
    priced = "How much does it cost to rotate signing keys under clause 7.3.2 of the Information Security Policy?"
    questions = [Question("a", clause, {}, "rotated at least every 90 days", (), "clause"),
                 Question("b", priced, {}, "90 days", (), "clause"),  # the clause is evidence, but no sum
                 Question("c", "What will the weather be like in Lisbon tomorrow?", {}, None, (), "negative")]
    with connect(demo[1]["TORTUS_DATABASE_URL"]) as conn, tenant_scope(conn, "default"):
        losses = answer_losses(conn, questions, make_embedder("hash"))
    assert (losses.answerable, losses.answered, losses.matched, losses.in_evidence) == (2, 1, 1, 2)
    assert losses.wrong_with_evidence == 0
    assert losses.withheld_with_evidence == {Refusal.NO_VALUE_OF_TYPE: 1}
    assert (losses.negatives, losses.negatives_withheld) == (1, 1)


def test_bench_answers_prints_the_losses(demo: tuple[Path, dict[str, str]]) -> None:
    ws, env = demo
    result = runner.invoke(app, ["--workspace", str(ws), "bench", "demo", "--on-tenant", "--answers", "--limit", "3"],
                           env={**env, "COLUMNS": "140"})
    assert result.exit_code == 0, result.output
    assert "evidence contains the expected text" in result.output and " of 3 " in result.output
