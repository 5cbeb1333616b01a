"""Schema tortus: tables, keys, constraints and indexes.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

NODE_KINDS = ("concept", "entity", "claim", "chunk", "section", "api", "decision", "event")
EDGE_TYPES = (
    "supports",
    "contradicts",
    "depends_on",
    "caused_by",
    "implements",
    "related_to",
    "mentions",
    "part_of",
    "next",
    "defines",
    "same_as",
    "cites",
    "owned_by",
    "affects",
    "supersedes",
)
SUBGRAPH_KINDS = ("domain", "team", "product", "source", "tenant")


def _in(values: tuple[str, ...]) -> str:
    return ", ".join(f"'{v}'" for v in values)


DDL = f"""
create schema if not exists tortus;

create table tortus.tenant (
    tenant_id text primary key check (tenant_id ~ '^[a-z0-9][a-z0-9_-]{{0,62}}$'),
    name text not null,
    settings jsonb not null default '{{}}',
    created_at timestamptz not null default now()
);

create table tortus.api_key (
    tenant_id text not null references tortus.tenant on delete cascade,
    key_id bigint generated always as identity,
    label text not null default '',
    key_hash text not null check (key_hash ~ '^[0-9a-f]{{64}}$'),
    scopes text[] not null default '{{query}}',
    created_at timestamptz not null default now(),
    revoked_at timestamptz,
    primary key (tenant_id, key_id),
    unique (tenant_id, key_hash)
);
create index api_key_hash on tortus.api_key (key_hash);

create table tortus.source (
    tenant_id text not null references tortus.tenant on delete cascade,
    source_id bigint generated always as identity,
    uri text not null,
    kind text not null check (kind in ('markdown', 'text', 'html', 'pdf', 'url')),
    sha256 text not null check (sha256 ~ '^[0-9a-f]{{64}}$'),
    content_type text,
    etag text,
    last_modified text,
    retrieved_at timestamptz not null default now(),
    raw bytea,
    text text not null,
    warnings text[] not null default '{{}}',
    metadata jsonb not null default '{{}}',
    subgraphs text[] not null default '{{}}',
    updated_at timestamptz not null default now(),
    primary key (tenant_id, source_id),
    unique (tenant_id, uri)
);

create table tortus.node (
    tenant_id text not null references tortus.tenant on delete cascade,
    node_id bigint generated always as identity,
    kind text not null check (kind in ({_in(NODE_KINDS)})),
    key text not null,
    label text not null,
    text text not null default '',
    source_id bigint,
    embedding vector,
    embedding_model text,
    tsv tsvector,
    theta double precision check (theta >= 0 and theta < 2 * pi()),
    phi double precision check (phi >= 0 and phi < 2 * pi()),
    confidence real not null default 1 check (confidence between 0 and 1),
    freshness timestamptz not null default now(),
    props jsonb not null default '{{}}',
    primary key (tenant_id, node_id),
    unique (tenant_id, kind, key),
    foreign key (tenant_id, source_id) references tortus.source on delete cascade,
    check ((theta is null) = (phi is null)),
    check ((embedding is null) = (embedding_model is null))
);
create index node_tsv_gin on tortus.node using gin (tsv);
create index node_source on tortus.node (tenant_id, source_id);
create index node_embedding_384_hnsw on tortus.node
    using hnsw ((embedding::vector(384)) vector_cosine_ops)
    where vector_dims(embedding) = 384;

create table tortus.edge (
    tenant_id text not null,
    edge_id bigint generated always as identity,
    src bigint not null,
    dst bigint not null,
    type text not null check (type in ({_in(EDGE_TYPES)})),
    weight real not null default 1 check (weight > 0 and weight <= 1),
    confidence real not null default 1 check (confidence between 0 and 1),
    source_id bigint,
    provenance jsonb not null default '{{}}',
    primary key (tenant_id, edge_id),
    unique (tenant_id, src, dst, type),
    foreign key (tenant_id, src) references tortus.node on delete cascade,
    foreign key (tenant_id, dst) references tortus.node on delete cascade,
    foreign key (tenant_id, source_id) references tortus.source on delete cascade,
    check (src <> dst)
);
create index edge_src_type on tortus.edge (tenant_id, src, type);
create index edge_dst_type on tortus.edge (tenant_id, dst, type);
create index edge_source on tortus.edge (tenant_id, source_id);

create table tortus.subgraph (
    tenant_id text not null references tortus.tenant on delete cascade,
    name text not null check (length(name) between 1 and 200),
    kind text not null default 'domain' check (kind in ({_in(SUBGRAPH_KINDS)})),
    description text not null default '',
    primary key (tenant_id, name)
);

create table tortus.membership (
    tenant_id text not null,
    node_id bigint not null,
    subgraph text not null,
    weight real not null default 1 check (weight > 0 and weight <= 1),
    primary key (tenant_id, node_id, subgraph),
    foreign key (tenant_id, node_id) references tortus.node on delete cascade,
    foreign key (tenant_id, subgraph) references tortus.subgraph on delete cascade
);
create index membership_subgraph on tortus.membership (tenant_id, subgraph);

create table tortus.portal (
    tenant_id text not null,
    portal_id bigint generated always as identity,
    src bigint not null,
    dst bigint not null,
    src_subgraph text not null,
    dst_subgraph text not null,
    kind text not null,
    weight real not null default 1 check (weight > 0 and weight <= 1),
    reason text not null,
    primary key (tenant_id, portal_id),
    unique (tenant_id, src, dst),
    foreign key (tenant_id, src) references tortus.node on delete cascade,
    foreign key (tenant_id, dst) references tortus.node on delete cascade,
    foreign key (tenant_id, src_subgraph) references tortus.subgraph on delete cascade,
    foreign key (tenant_id, dst_subgraph) references tortus.subgraph on delete cascade,
    check (src_subgraph <> dst_subgraph)
);
create index portal_src on tortus.portal (tenant_id, src);

create table tortus.evidence_span (
    tenant_id text not null,
    span_id bigint generated always as identity,
    source_id bigint not null,
    start_char integer not null check (start_char >= 0),
    end_char integer not null,
    page integer check (page >= 1),
    node_id bigint,
    edge_id bigint,
    primary key (tenant_id, span_id),
    foreign key (tenant_id, source_id) references tortus.source on delete cascade,
    foreign key (tenant_id, node_id) references tortus.node on delete cascade,
    foreign key (tenant_id, edge_id) references tortus.edge on delete cascade,
    check (end_char > start_char),
    check (num_nonnulls(node_id, edge_id) = 1)
);
create index span_node on tortus.evidence_span (tenant_id, node_id);
create index span_edge on tortus.evidence_span (tenant_id, edge_id);
create index span_source on tortus.evidence_span (tenant_id, source_id);

-- Exact BM25 statistics: postings are queried with lexeme = any(...), which is leakproof
-- and therefore stays indexable under row-level security (tsvector @@ is not).
create table tortus.bm25_posting (
    tenant_id text not null,
    lexeme text not null,
    node_id bigint not null,
    tf integer not null check (tf > 0),
    primary key (tenant_id, lexeme, node_id),
    foreign key (tenant_id, node_id) references tortus.node on delete cascade
);
create index bm25_posting_node on tortus.bm25_posting (tenant_id, node_id);

create table tortus.bm25_doc (
    tenant_id text not null,
    node_id bigint not null,
    doc_len integer not null check (doc_len >= 0),
    primary key (tenant_id, node_id),
    foreign key (tenant_id, node_id) references tortus.node on delete cascade
);

create table tortus.bm25_term (
    tenant_id text not null references tortus.tenant on delete cascade,
    lexeme text not null,
    df integer not null check (df >= 0),
    primary key (tenant_id, lexeme)
);

create table tortus.bm25_corpus (
    tenant_id text primary key references tortus.tenant on delete cascade,
    n_docs bigint not null default 0 check (n_docs >= 0),
    total_len bigint not null default 0 check (total_len >= 0)
);

create table tortus.embedding_cache (
    tenant_id text not null references tortus.tenant on delete cascade,
    model text not null,
    text_sha256 text not null check (text_sha256 ~ '^[0-9a-f]{{64}}$'),
    embedding vector not null,
    created_at timestamptz not null default now(),
    primary key (tenant_id, model, text_sha256)
);

create table tortus.query_trace (
    tenant_id text not null references tortus.tenant on delete cascade,
    trace_id bigint generated always as identity,
    created_at timestamptz not null default now(),
    query text not null,
    mode text not null,
    policy jsonb not null default '{{}}',
    seeds jsonb not null default '[]',
    hops jsonb not null default '[]',
    pruned jsonb not null default '[]',
    portals jsonb not null default '[]',
    evidence jsonb not null default '[]',
    claims jsonb not null default '[]',
    answer text,
    withheld boolean not null default false,
    confidence real check (confidence between 0 and 1),
    warnings text[] not null default '{{}}',
    timings jsonb not null default '{{}}',
    primary key (tenant_id, trace_id)
);
create index query_trace_created on tortus.query_trace (tenant_id, created_at desc);

create table tortus.eval_run (
    tenant_id text not null references tortus.tenant on delete cascade,
    run_id bigint generated always as identity,
    dataset text not null,
    config jsonb not null default '{{}}',
    status text not null default 'running' check (status in ('running', 'done', 'failed')),
    started_at timestamptz not null default now(),
    finished_at timestamptz,
    summary jsonb not null default '{{}}',
    primary key (tenant_id, run_id)
);

create table tortus.eval_result (
    tenant_id text not null,
    run_id bigint not null,
    question_id text not null,
    strategy text not null,
    metrics jsonb not null default '{{}}',
    retrieved jsonb not null default '[]',
    latency_ms double precision check (latency_ms >= 0),
    primary key (tenant_id, run_id, question_id, strategy),
    foreign key (tenant_id, run_id) references tortus.eval_run on delete cascade
);
"""


def upgrade() -> None:
    op.execute(DDL)


def downgrade() -> None:
    op.execute("drop schema tortus cascade")
