"""`tortus-pg ingest --demo` then `tortus-pg query` end to end (hash embedder for speed)."""

import json
from pathlib import Path

from typer.testing import CliRunner

from tortus_pg.cli.main import app

runner = CliRunner()


def query(ws: Path, env: dict[str, str], *args: str) -> list[dict[str, object]]:
    result = runner.invoke(app, ["--workspace", str(ws), "query", *args, "--json"], env=env)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)  # type: ignore[no-any-return]


def test_keyword_ranks_the_defining_clause_first(demo: tuple[Path, dict[str, str]]) -> None:
    # The clause's own chunk never says "clause 7.3.2"; its heading path does, and headings are
    # indexed with the chunk, so it outranks the chunks that merely cite the clause.
    top = query(*demo, "What does clause 7.3.2 say?", "--mode", "keyword", "--k", "5")[0]
    assert "information-security-policy.pdf" in str(top["uri"]) and top["page"] == 2
    assert str(top["text"]).startswith("7.3.2 Signing keys") and "90 days" in str(top["text"])


def test_hybrid_ranks_the_defining_clause_first(demo: tuple[Path, dict[str, str]]) -> None:
    # The version-history chunk cites "clause 7.3.2" in its text and can win on similarity; the
    # chunk headed 7.3.2 defines it and goes first whatever the vector leg says.
    hits = query(*demo, "What does clause 7.3.2 say?", "--mode", "hybrid", "--k", "5")
    assert str(hits[0]["text"]).startswith("7.3.2 Signing keys") and hits[0]["heading_match"] is True
    citing = [h for h in hits if "Version history" in str(h["text"])]
    assert citing and citing[0]["heading_match"] is False


def test_questions_without_identifiers_are_plain_rrf(demo: tuple[Path, dict[str, str]]) -> None:
    hits = query(*demo, "How often are signing keys rotated?", "--mode", "hybrid", "--k", "10")
    assert hits and not any(h["heading_match"] for h in hits)
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)


def test_error_code_and_modes(demo: tuple[Path, dict[str, str]]) -> None:
    keyword = query(*demo, "E-1042", "--mode", "keyword", "--k", "3")
    assert keyword and "E-1042" in str(keyword[0]["text"]) and keyword[0]["vector_rank"] is None
    vector = query(*demo, "E-1042", "--mode", "vector", "--k", "3")
    assert len(vector) == 3 and all(h["bm25_rank"] is None for h in vector)


def test_bad_mode_and_k_are_clear_errors(demo: tuple[Path, dict[str, str]]) -> None:
    ws, env = demo
    bad = runner.invoke(app, ["--workspace", str(ws), "query", "x", "--mode", "psychic"], env=env)
    assert bad.exit_code != 0 and "unknown mode 'psychic'" in str(bad.exception)
    big = runner.invoke(app, ["--workspace", str(ws), "query", "x", "--k", "100000"], env=env)
    assert big.exit_code != 0 and "k must be between 1 and 1000" in str(big.exception)
