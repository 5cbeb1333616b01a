"""`tortus-pg bench`: the engine's time per stage, over a real database (hash embedder)."""

from pathlib import Path

from tortus_pg.cli.main import app
from typer.testing import CliRunner

from tortus_pg.errors import InvalidInput

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
