"""SQLAlchemy Core description of schema `tortus`, used by Alembic to detect drift.

Revisions in migrations/ hold the DDL; this module must describe the same tables
(`alembic check` in the test suite fails when the two disagree).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from pgvector.sqlalchemy import VECTOR
from sqlalchemy.dialects.postgresql import ARRAY, BYTEA, DOUBLE_PRECISION, JSONB, REAL, TSVECTOR

SCHEMA = "tortus"
VERSION_SCHEMA = "tortus_meta"
metadata = sa.MetaData(schema=SCHEMA)

Text = sa.Text
BigInt = sa.BigInteger
NOW = sa.text("now()")


def _tenant() -> sa.Column[str]:
    return sa.Column("tenant_id", Text, nullable=False)


def _identity(name: str) -> sa.Column[int]:
    return sa.Column(name, BigInt, sa.Identity(always=True), nullable=False)


def _fk(cols: list[str], table: str, ref: list[str]) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(cols, [f"{SCHEMA}.{table}.{c}" for c in ref], ondelete="CASCADE")


def _node_fk(col: str) -> sa.ForeignKeyConstraint:
    return _fk(["tenant_id", col], "node", ["tenant_id", "node_id"])


def _source_fk() -> sa.ForeignKeyConstraint:
    return _fk(["tenant_id", "source_id"], "source", ["tenant_id", "source_id"])


def _tenant_fk() -> sa.ForeignKeyConstraint:
    return _fk(["tenant_id"], "tenant", ["tenant_id"])


tenant = sa.Table(
    "tenant", metadata,
    sa.Column("tenant_id", Text, primary_key=True),
    sa.Column("name", Text, nullable=False),
    sa.Column("settings", JSONB, nullable=False),
    sa.Column("created_at", sa.TIMESTAMP(timezone=True), nullable=False),
)

api_key = sa.Table(
    "api_key", metadata,
    _tenant(), _identity("key_id"),
    sa.Column("label", Text, nullable=False),
    sa.Column("key_hash", Text, nullable=False),
    sa.Column("scopes", ARRAY(Text), nullable=False),
    sa.Column("created_at", sa.TIMESTAMP(timezone=True), nullable=False),
    sa.Column("revoked_at", sa.TIMESTAMP(timezone=True)),
    sa.Column("groups", ARRAY(Text)),  # the groups whose sources the key reads; NULL: all
    sa.PrimaryKeyConstraint("tenant_id", "key_id"),
    sa.UniqueConstraint("tenant_id", "key_hash"),
    _tenant_fk(),
    sa.Index("api_key_hash", "key_hash"),
)

# Which logins may enter which tenant, and the secret of the proof `tortus.enter_tenant` leaves:
# the owner's tables, outside row-level security, readable by no other role.
tenant_login = sa.Table(
    "tenant_login", metadata,
    sa.Column("login", Text, nullable=False),
    sa.Column("tenant_id", Text, nullable=False),
    sa.Column("granted_at", sa.TIMESTAMP(timezone=True), nullable=False),
    sa.Column("groups", ARRAY(Text)),
    sa.PrimaryKeyConstraint("login", "tenant_id"),
    _tenant_fk(),
)

tenant_secret = sa.Table(
    "tenant_secret", metadata,
    sa.Column("only_row", sa.Boolean, primary_key=True),
    sa.Column("secret", Text, nullable=False),
)
OWNER_TABLES = ("tenant_login", "tenant_secret")

source = sa.Table(
    "source", metadata,
    _tenant(), _identity("source_id"),
    sa.Column("uri", Text, nullable=False),
    sa.Column("kind", Text, nullable=False),
    sa.Column("sha256", Text, nullable=False),
    sa.Column("content_type", Text),
    sa.Column("etag", Text),
    sa.Column("last_modified", Text),
    sa.Column("retrieved_at", sa.TIMESTAMP(timezone=True), nullable=False),
    sa.Column("raw", BYTEA),
    sa.Column("text", Text, nullable=False),
    sa.Column("warnings", ARRAY(Text), nullable=False),
    sa.Column("metadata", JSONB, nullable=False),
    sa.Column("subgraphs", ARRAY(Text), nullable=False),
    sa.Column("updated_at", sa.TIMESTAMP(timezone=True), nullable=False),
    sa.Column("readers", ARRAY(Text)),  # the groups that may read it; NULL: everyone in the tenant
    sa.PrimaryKeyConstraint("tenant_id", "source_id"),
    sa.UniqueConstraint("tenant_id", "uri"),
    _tenant_fk(),
)

node = sa.Table(
    "node", metadata,
    _tenant(), _identity("node_id"),
    sa.Column("kind", Text, nullable=False),
    sa.Column("key", Text, nullable=False),
    sa.Column("label", Text, nullable=False),
    sa.Column("text", Text, nullable=False),
    sa.Column("source_id", BigInt),
    sa.Column("embedding", VECTOR()),
    sa.Column("embedding_model", Text),
    sa.Column("tsv", TSVECTOR),
    sa.Column("theta", DOUBLE_PRECISION),
    sa.Column("phi", DOUBLE_PRECISION),
    sa.Column("confidence", REAL, nullable=False),
    sa.Column("freshness", sa.TIMESTAMP(timezone=True), nullable=False),
    sa.Column("props", JSONB, nullable=False),
    sa.Column("mentions", sa.Integer),  # a concept's chunk mentions when tortus.place_concepts last counted them
    sa.PrimaryKeyConstraint("tenant_id", "node_id"),
    sa.UniqueConstraint("tenant_id", "kind", "key"),
    _tenant_fk(), _source_fk(),
    sa.Index("node_tsv_gin", "tsv", postgresql_using="gin"),
    sa.Index("node_source", "tenant_id", "source_id"),
)

edge = sa.Table(
    "edge", metadata,
    _tenant(), _identity("edge_id"),
    sa.Column("src", BigInt, nullable=False),
    sa.Column("dst", BigInt, nullable=False),
    sa.Column("type", Text, nullable=False),
    sa.Column("weight", REAL, nullable=False),
    sa.Column("confidence", REAL, nullable=False),
    sa.Column("source_id", BigInt),
    sa.Column("provenance", JSONB, nullable=False),
    sa.PrimaryKeyConstraint("tenant_id", "edge_id"),
    sa.UniqueConstraint("tenant_id", "src", "dst", "type"),
    _node_fk("src"), _node_fk("dst"), _source_fk(),
    sa.Index("edge_src_type", "tenant_id", "src", "type"),
    sa.Index("edge_dst_type", "tenant_id", "dst", "type"),
    # The walk reads a node's strongest incoming edges first (revision 0011).
    sa.Index("edge_in_strength", "tenant_id", "dst",
             sa.text("(weight::double precision * confidence::double precision) DESC"), "src"),
    sa.Index("edge_source", "tenant_id", "source_id"),
)

subgraph = sa.Table(
    "subgraph", metadata,
    _tenant(),
    sa.Column("name", Text, nullable=False),
    sa.Column("kind", Text, nullable=False),
    sa.Column("description", Text, nullable=False),
    sa.PrimaryKeyConstraint("tenant_id", "name"),
    _tenant_fk(),
)

membership = sa.Table(
    "membership", metadata,
    _tenant(),
    sa.Column("node_id", BigInt, nullable=False),
    sa.Column("subgraph", Text, nullable=False),
    sa.Column("weight", REAL, nullable=False),
    sa.PrimaryKeyConstraint("tenant_id", "node_id", "subgraph"),
    _node_fk("node_id"),
    _fk(["tenant_id", "subgraph"], "subgraph", ["tenant_id", "name"]),
    sa.Index("membership_subgraph", "tenant_id", "subgraph"),
)

portal = sa.Table(
    "portal", metadata,
    _tenant(), _identity("portal_id"),
    sa.Column("src", BigInt, nullable=False),
    sa.Column("dst", BigInt, nullable=False),
    sa.Column("src_subgraph", Text, nullable=False),
    sa.Column("dst_subgraph", Text, nullable=False),
    sa.Column("kind", Text, nullable=False),
    sa.Column("weight", REAL, nullable=False),
    sa.Column("reason", Text, nullable=False),
    sa.PrimaryKeyConstraint("tenant_id", "portal_id"),
    sa.UniqueConstraint("tenant_id", "src", "dst"),
    _node_fk("src"), _node_fk("dst"),
    _fk(["tenant_id", "src_subgraph"], "subgraph", ["tenant_id", "name"]),
    _fk(["tenant_id", "dst_subgraph"], "subgraph", ["tenant_id", "name"]),
    sa.Index("portal_src", "tenant_id", "src"),
)

evidence_span = sa.Table(
    "evidence_span", metadata,
    _tenant(), _identity("span_id"),
    sa.Column("source_id", BigInt, nullable=False),
    sa.Column("start_char", sa.Integer, nullable=False),
    sa.Column("end_char", sa.Integer, nullable=False),
    sa.Column("page", sa.Integer),
    sa.Column("node_id", BigInt),
    sa.Column("edge_id", BigInt),
    sa.PrimaryKeyConstraint("tenant_id", "span_id"),
    _source_fk(), _node_fk("node_id"),
    _fk(["tenant_id", "edge_id"], "edge", ["tenant_id", "edge_id"]),
    sa.Index("span_node", "tenant_id", "node_id"),
    sa.Index("span_edge", "tenant_id", "edge_id"),
    sa.Index("span_source", "tenant_id", "source_id"),
)

bm25_posting = sa.Table(
    "bm25_posting", metadata,
    _tenant(),
    sa.Column("lexeme", Text, nullable=False),
    sa.Column("node_id", BigInt, nullable=False),
    sa.Column("tf", sa.Integer, nullable=False),
    sa.Column("doc_len", sa.Integer, nullable=False),  # the document's length, read with tf by scoring
    sa.PrimaryKeyConstraint("tenant_id", "lexeme", "node_id", postgresql_include=["tf", "doc_len"]),
    _node_fk("node_id"),
    sa.Index("bm25_posting_node", "tenant_id", "node_id"),
)

bm25_doc = sa.Table(
    "bm25_doc", metadata,
    _tenant(),
    sa.Column("node_id", BigInt, nullable=False),
    sa.Column("doc_len", sa.Integer, nullable=False),
    sa.PrimaryKeyConstraint("tenant_id", "node_id"),
    _node_fk("node_id"),
)

bm25_term = sa.Table(
    "bm25_term", metadata,
    _tenant(),
    sa.Column("lexeme", Text, nullable=False),
    sa.Column("df", sa.Integer, nullable=False),
    sa.PrimaryKeyConstraint("tenant_id", "lexeme"),
    _tenant_fk(),
)

bm25_corpus = sa.Table(
    "bm25_corpus", metadata,
    sa.Column("tenant_id", Text, primary_key=True),
    sa.Column("n_docs", BigInt, nullable=False),
    sa.Column("total_len", BigInt, nullable=False),
    _tenant_fk(),
)

# Chunks per cell of a side x side grid over the torus, for one layout: sums[i][j + 1] counts
# row i's chunks in cells 0 .. j - 1, so a run of cells is two reads (tortus.local_density).
torus_grid = sa.Table(
    "torus_grid", metadata,
    _tenant(),
    sa.Column("layout", Text, nullable=False),  # '' for the live coordinates
    sa.Column("side", sa.Integer, nullable=False),
    sa.Column("chunks", sa.Integer, nullable=False),
    sa.Column("sums", ARRAY(sa.Integer, dimensions=2), nullable=False),  # running chunk counts along each row
    sa.Column("built_at", sa.TIMESTAMP(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint("tenant_id", "layout"),
    _tenant_fk(),
)

embedding_cache = sa.Table(
    "embedding_cache", metadata,
    _tenant(),
    sa.Column("model", Text, nullable=False),
    sa.Column("text_sha256", Text, nullable=False),
    sa.Column("embedding", VECTOR(), nullable=False),
    sa.Column("created_at", sa.TIMESTAMP(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint("tenant_id", "model", "text_sha256"),
    _tenant_fk(),
)

query_trace = sa.Table(
    "query_trace", metadata,
    _tenant(), _identity("trace_id"),
    sa.Column("created_at", sa.TIMESTAMP(timezone=True), nullable=False),
    sa.Column("query", Text, nullable=False),
    sa.Column("mode", Text, nullable=False),
    *(sa.Column(name, JSONB, nullable=False)
      for name in ("policy", "seeds", "hops", "pruned", "portals", "evidence", "claims")),
    sa.Column("answer", Text),
    sa.Column("withheld", sa.Boolean, nullable=False),
    sa.Column("confidence", REAL),
    sa.Column("warnings", ARRAY(Text), nullable=False),
    sa.Column("timings", JSONB, nullable=False),
    sa.Column("groups", ARRAY(Text)),  # the asker's groups: who else may read the trace
    sa.PrimaryKeyConstraint("tenant_id", "trace_id"),
    _tenant_fk(),
    sa.Index("query_trace_created", "tenant_id", sa.text("created_at DESC")),
)

eval_run = sa.Table(
    "eval_run", metadata,
    _tenant(), _identity("run_id"),
    sa.Column("dataset", Text, nullable=False),
    sa.Column("config", JSONB, nullable=False),
    sa.Column("status", Text, nullable=False),
    sa.Column("started_at", sa.TIMESTAMP(timezone=True), nullable=False),
    sa.Column("finished_at", sa.TIMESTAMP(timezone=True)),
    sa.Column("summary", JSONB, nullable=False),
    sa.PrimaryKeyConstraint("tenant_id", "run_id"),
    _tenant_fk(),
)

eval_result = sa.Table(
    "eval_result", metadata,
    _tenant(),
    sa.Column("run_id", BigInt, nullable=False),
    sa.Column("question_id", Text, nullable=False),
    sa.Column("strategy", Text, nullable=False),
    sa.Column("metrics", JSONB, nullable=False),
    sa.Column("retrieved", JSONB, nullable=False),
    sa.Column("latency_ms", DOUBLE_PRECISION),
    sa.Column("question", Text),
    sa.Column("reply", JSONB),
    sa.PrimaryKeyConstraint("tenant_id", "run_id", "question_id", "strategy"),
    _fk(["tenant_id", "run_id"], "eval_run", ["tenant_id", "run_id"]),
)

TENANT_TABLES = tuple(metadata.tables[k].name for k in sorted(metadata.tables)
                      if metadata.tables[k].name not in OWNER_TABLES)


def include_name(name: str | None, type_: str, parent_names: Any) -> bool:
    """Alembic filter: only schema tortus is ours."""
    return name == SCHEMA if type_ == "schema" else True


def include_object(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
    """Alembic filter: HNSW indexes are per embedding dimension and managed in SQL."""
    return not (type_ == "index" and name is not None and name.endswith("_hnsw"))
