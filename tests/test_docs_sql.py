"""Every SQL example in docs/sql.md runs, as the analyst role, against the demo corpus and returns rows."""

import re
from pathlib import Path

import psycopg
import pytest
from tortus_pg.cli.main import app
from typer.testing import CliRunner

DOC = Path(__file__).resolve().parents[1] / "docs" / "sql.md"
BLOCKS = re.findall(r"```sql\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)


def test_the_reference_has_examples() -> None:
    assert len(BLOCKS) >= 8


def test_every_example_runs_and_returns_rows(demo: tuple[Path, dict[str, str]]) -> None:
    ws, env = demo
    # The trace views need an answered question.
    asked = CliRunner().invoke(app, ["--workspace", str(ws), "query", "What does clause 7.3.2 say?"], env=env)
    assert asked.exit_code == 0, asked.output
    with psycopg.connect(env["TORTUS_DATABASE_URL"], autocommit=True) as conn:
        for block in BLOCKS:
            for statement in [s for s in block.split(";\n") if s.strip()]:
                try:
                    cur = conn.execute(statement)
                except psycopg.Error as exc:
                    pytest.fail(f"docs/sql.md example failed: {exc}\n{statement}")
                if cur.description is not None:  # a query, not a SET
                    assert cur.fetchall(), f"docs/sql.md example returned no rows:\n{statement}"
        assert conn.execute("select current_user").fetchone() == ("tortus_analyst",)
