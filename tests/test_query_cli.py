"""`tortus-pg ingest --demo` then `tortus-pg query` end to end (hash embedder for speed)."""

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
from tortus_pg.cli.main import app
from typer.testing import CliRunner

from tortus_pg.db import connect
from tortus_pg.query.refusal import Refusal

runner = CliRunner()


def query(ws: Path, env: dict[str, str], *args: str) -> Any:
    result = runner.invoke(app, ["--workspace", str(ws), "query", *args, "--json"], env=env)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


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
    assert bad.exit_code != 0 and "unknown mode 'psychic'" in bad.output
    big = runner.invoke(app, ["--workspace", str(ws), "query", "x", "--mode", "hybrid", "--k", "100000"], env=env)
    assert big.exit_code != 0 and "k must be between 1 and 1000" in str(big.exception)
    many = runner.invoke(app, ["--workspace", str(ws), "query", "x", "--k", "51"], env=env)
    assert many.exit_code != 0 and "k must be between 1 and 50" in str(many.exception)
    policy = runner.invoke(app, ["--workspace", str(ws), "query", "x", "--portal-preference", "always"], env=env)
    assert policy.exit_code != 0 and "portal_preference must be one of auto, prefer, avoid" in str(policy.exception)


def test_answer_cites_the_clause_and_reports_its_budget(demo: tuple[Path, dict[str, str]]) -> None:
    out = query(*demo, "What does clause 7.3.2 say?")
    assert set(out) >= {"answer", "withheld", "confidence", "path", "evidence", "claims", "warnings", "budget",
                        "diagnostics"}
    assert not out["withheld"] and "90 days" in out["answer"]
    cited = [(c["uri"].rsplit("/", 1)[-1], c["page"]) for c in out["claims"]]
    assert ("information-security-policy.pdf", 2) in cited, cited  # the clause itself, on its page
    assert set(out["budget"]) == {"ms", "hops", "tokens", "portal_hops"}
    assert out["budget"]["tokens"]["used"] <= out["budget"]["tokens"]["limit"]
    for hop in out["path"]:
        assert {"from", "to", "edge_type", "weight", "reason", "evidence"} <= set(hop)
        assert hop["evidence"] and all(e["span"][0] < e["span"][1] and e["text"] for e in hop["evidence"])


def test_weather_question_is_withheld(demo: tuple[Path, dict[str, str]]) -> None:
    out = query(*demo, "What will the weather be like in Lisbon tomorrow?")
    assert out["withheld"] and out["answer"] is None and out["claims"] == [] and out["short_answer"] is None
    assert any(w.startswith("answer withheld:") for w in out["warnings"])
    assert out["refusal"] in {r.name for r in Refusal}
    ws, env = demo
    shown = runner.invoke(app, ["--workspace", str(ws), "query", "What will the weather be like in Lisbon tomorrow?"],
                          env=env)
    assert shown.exit_code == 0 and "Not enough source-backed evidence to answer (support 0." in shown.output
    # What the reader drafted is shown as a lead to check, never as the answer.
    draft = out["diagnostics"]["draft"]
    assert out["refusal"] == Refusal.LOW_SUPPORT.name and draft
    assert "Closest statements found, too weakly supported to answer:" in shown.output
    assert " ".join(draft.split()[:4]) in " ".join(shown.output.split())


def test_a_draft_withheld_by_a_check_of_form_is_not_called_weakly_supported(
        demo: tuple[Path, dict[str, str]]) -> None:
    question = "How much does it cost per month to run the Feature Store?"
    out = query(*demo, question)
    assert out["withheld"] and out["refusal"] == Refusal.NO_VALUE_OF_TYPE.name and out["diagnostics"]["draft"]
    ws, env = demo
    shown = runner.invoke(app, ["--workspace", str(ws), "query", question], env=env)
    assert "Closest statements found, withheld for the reason below:" in shown.output
    assert "the question asks for a sum of money" in " ".join(shown.output.split())


def test_no_draft_is_offered_when_what_the_question_names_is_in_no_evidence(demo: tuple[Path, dict[str, str]]) -> None:
    out = query(*demo, "What does error code E-9931 mean?")
    assert out["withheld"] and out["refusal"] == Refusal.MISSING_IDENTIFIER.name
    assert out["diagnostics"]["draft"] is None


def test_explain_renders_the_path_with_quotes(demo: tuple[Path, dict[str, str]]) -> None:
    ws, env = demo
    result = runner.invoke(app, ["--workspace", str(ws), "query", "What does clause 7.3.2 say?", "--explain"], env=env)
    assert result.exit_code == 0, result.output
    assert "search →" in result.output and "“" in result.output and "budget: ms" in result.output


def test_explain_says_what_kind_of_answer_the_question_asks_for(demo: tuple[Path, dict[str, str]]) -> None:
    ws, env = demo
    asked = "How long does the Event Bus retain messages on the payments topics?"
    result = runner.invoke(app, ["--workspace", str(ws), "query", asked, "--explain"], env=env)
    assert result.exit_code == 0, result.output
    assert "the question asks for a duration or length" in result.output
    assert query(*demo, asked)["diagnostics"]["answer_type"] == "a duration or length"
    assert query(*demo, "Which team owns the Checkout Gateway?")["diagnostics"]["answer_type"] == "a name"
    assert query(*demo, "What does clause 7.3.2 say?")["diagnostics"]["answer_type"] is None


def test_bad_query_text_and_non_finite_weights_are_clear_errors(demo: tuple[Path, dict[str, str]]) -> None:
    ws, env = demo
    cases = [
        (["query", "clause\x007.3.2"], "contains a NUL character"),
        (["query", "clause\x007.3.2", "--mode", "keyword"], "contains a NUL character"),
        # What a terminal's undecodable bytes become in a Python argument.
        (["query", "clause \udcff 7.3.2"], "not valid UTF-8"),
        (["query", "clause 7.3.2", "--mode", "hybrid", "--bm25-weight", "nan"], "finite"),
        (["query", "clause 7.3.2", "--mode", "hybrid", "--vector-weight", "inf"], "finite"),
    ]
    for args, message in cases:
        result = runner.invoke(app, ["--workspace", str(ws), *args, "--json"], env=env)
        assert result.exit_code != 0 and message in str(result.exception), (args, result.output)
        assert "NaN" not in result.output and "Traceback" not in result.output


def test_a_lock_held_elsewhere_is_a_clear_error_after_the_lock_timeout(demo: tuple[Path, dict[str, str]]) -> None:
    ws, env = demo
    with psycopg.connect(env["TORTUS_DATABASE_URL"]) as holder:
        holder.execute("lock table tortus.source in access exclusive mode")
        began = time.monotonic()
        cli = str(Path(sys.executable).parent / "tortus-pg")
        done = subprocess.run([cli, "--workspace", str(ws), "sources", "list"],
                              env={**env, "PATH": "/usr/bin:/bin", "TORTUS_LOCK_TIMEOUT_MS": "300"},
                              capture_output=True, text=True, timeout=60)
        waited = time.monotonic() - began
        holder.rollback()
    assert done.returncode == 1 and "another session holds a lock" in done.stderr and "Traceback" not in done.stderr
    assert waited < 20  # the lock timeout, not the holder, ends the wait
    with connect(env["TORTUS_DATABASE_URL"]) as ours:  # what every connection of the project gets
        settings = ours.execute("select current_setting('lock_timeout'), "
                                "current_setting('idle_in_transaction_session_timeout'), "
                                "current_setting('client_connection_check_interval')").fetchone()
    assert settings == ("30s", "10min", "5s")


def test_the_support_an_answer_needs_is_the_callers(demo: tuple[Path, dict[str, str]]) -> None:
    ws, env = demo
    answered = query(ws, env, "What does clause 7.3.2 say?")
    strict = query(ws, env, "What does clause 7.3.2 say?", "--min-support", "1")
    assert not answered["withheld"] and strict["withheld"] and strict["refusal"] == Refusal.LOW_SUPPORT.name
    assert strict["confidence"] == answered["confidence"] < 1
    assert f"support {answered['confidence']:.2f}, 1.00 needed" in " ".join(strict["warnings"])
    # Its draft is what the default answered.
    assert strict["diagnostics"]["draft"] == answered["answer"]
    lenient = query(ws, env, "What will the weather be like in Lisbon tomorrow?", "--min-support", "0")
    assert not lenient["withheld"] and lenient["claims"] and lenient["confidence"] > 0
    bad = runner.invoke(app, ["--workspace", str(ws), "query", "x", "--min-support", "2"], env=env)
    assert bad.exit_code != 0 and "min_support must be a number from 0 to 1, got 2.0" in str(bad.exception)


def test_a_tenant_has_its_own_support_needed_unless_the_question_says(demo: tuple[Path, dict[str, str]]) -> None:
    ws, env = demo

    def tenant(*args: str) -> str:
        result = runner.invoke(app, ["--workspace", str(ws), "tenant", *args], env=env)
        assert result.exit_code == 0, result.output
        return result.output

    answered = query(ws, env, "What does clause 7.3.2 say?")
    assert "tenant default: answers need support 1.00" in tenant("min-support", "default", "1")
    try:
        strict = query(ws, env, "What does clause 7.3.2 say?")
        assert strict["withheld"] and f"support {answered['confidence']:.2f}, 1.00 needed" in " ".join(
            strict["warnings"])
        assert not query(ws, env, "What does clause 7.3.2 say?", "--min-support", "0.3")["withheld"]
        listed = [line.split("│") for line in tenant("list").splitlines() if line.startswith("│ default")]
        assert listed and listed[0][5].strip() == "1.00"
    finally:
        assert "answers need support 0.50 (the default)" in tenant("min-support", "default", "--default")
    assert not query(ws, env, "What does clause 7.3.2 say?")["withheld"]
    for bad in (["min-support", "default", "2"], ["min-support", "default"], ["min-support", "nobody", "0.4"]):
        refused = runner.invoke(app, ["--workspace", str(ws), "tenant", *bad], env=env)
        assert refused.exit_code != 0, bad
    assert "min_support must be a number from 0 to 1" in str(runner.invoke(
        app, ["--workspace", str(ws), "tenant", "min-support", "default", "2"], env=env).exception)
