"""`tortus-pg ingest` with an OpenAI-compatible embeddings endpoint and LLM extraction (served on 127.0.0.1)."""

import json
from pathlib import Path

import psycopg
from openai_server import openai_server
from tortus_pg.cli.main import app
from typer.testing import CliRunner

from tortus_pg import migrate
from tortus_pg.db import connect

DOC = "# Key Vault\n\nThe Token Service relies on Key Vault for signing keys, rotated every 90 days.\n"
LLM_ANSWER = json.dumps(
    {
        "entities": [{"name": "Token Service", "kind": "entity"}, {"name": "Key Vault", "kind": "entity"}],
        "relations": [
            {
                "source": "Token Service",
                "type": "depends_on",
                "target": "Key Vault",
                "evidence": "The Token Service relies on Key Vault for signing keys",
                "confidence": 0.9,
            }
        ],
    }
)


def test_ingest_with_openai_embeddings_and_llm_extraction(fresh_db, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    url = fresh_db()
    migrate.upgrade(url)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "vault.md").write_text(DOC)
    with openai_server(dim=32, contents=[LLM_ANSWER]) as server:
        env = {
            "TORTUS_DATABASE_URL": url,
            "TORTUS_EMBEDDER": "openai",
            "TORTUS_EMBEDDING_DIM": "32",
            "TORTUS_EMBED_BASE_URL": server.base_url,
            "TORTUS_EMBED_MODEL": "test-embed",
            "TORTUS_EMBED_API_KEY": "sk-test",
            "TORTUS_LLM_BASE_URL": server.base_url,
            "TORTUS_LLM_MODEL": "test-chat",
        }
        runner = CliRunner()
        assert runner.invoke(app, ["--workspace", str(tmp_path), "init"], env=env).exit_code == 0
        result = runner.invoke(app, ["--workspace", str(tmp_path), "ingest", str(tmp_path / "docs"), "--llm"], env=env)
        assert result.exit_code == 0, result.output
        assert "1 ingested" in result.output and "llm: 1 requests" in result.output
        assert "vector index node_embedding_32_hnsw" in result.output
        assert server.bodies("/v1/chat/completions")[0]["response_format"]["type"] == "json_schema"
        auth = [
            r.headers.get("authorization", r.headers.get("Authorization"))
            for r in server.requests
            if r.path == "/v1/embeddings"
        ]
        assert auth and set(auth) == {"Bearer sk-test"}
    with connect(url) as conn:
        rows = conn.execute(
            """select e.provenance->>'rule', tortus.span_text(s.tenant_id, s.source_id, s.start_char, s.end_char)
               from tortus.edge e join tortus.node a on a.node_id = e.src join tortus.node b on b.node_id = e.dst
               join tortus.evidence_span s on s.edge_id = e.edge_id
               where e.type = 'depends_on' and a.label = 'Token Service' and b.label = 'Key Vault'"""
        ).fetchall()
        dims = conn.execute(
            "select distinct vector_dims(embedding), embedding_model from tortus.node where kind = 'chunk'"
        ).fetchall()
    assert ("llm:test-chat", "The Token Service relies on Key Vault for signing keys") in rows
    assert dims == [(32, "openai:test-embed")]


def test_llm_flag_without_endpoint_is_a_clear_error(tmp_path: Path, db_url: str) -> None:
    (tmp_path / "a.md").write_text(DOC)
    result = CliRunner().invoke(
        app,
        ["--workspace", str(tmp_path), "--database-url", db_url, "ingest", str(tmp_path / "a.md"), "--llm"],
        env={"TORTUS_LLM_BASE_URL": ""},
    )
    assert result.exit_code != 0
    assert "TORTUS_LLM_BASE_URL" in str(result.exception)
    _ = psycopg  # the database is untouched: the error comes before any connection work


def test_size_limit_is_configurable_and_named(tmp_path: Path, db_url: str) -> None:
    (tmp_path / "big.md").write_text("# Big\n\n" + "word " * 60_000)
    result = CliRunner().invoke(
        app,
        ["--workspace", str(tmp_path), "--database-url", db_url, "ingest", str(tmp_path / "big.md"), "--max-mb", "0.1"],
        env={"TORTUS_EMBEDDER": "hash"},
    )
    assert result.exit_code == 1
    assert "exceeds the 0.1 MB limit (max_file_bytes)" in result.output and "0 ingested" in result.output
