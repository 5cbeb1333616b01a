"""Each BM25 posting carries its document's length, and the postings' key covers what scoring reads.

`bm25_search` scores a posting with its term frequency and its document's length. Both now sit
in the postings' primary-key index (`include (tf, doc_len)`), so scoring reads that index
alone: before, every posting read also meant a probe of `bm25_doc` for the length (at 100k
nodes, about half of a query's time). A chunk's length is fixed when its text is, so the copy
cannot drift: the trigger that writes a chunk's postings writes its length with them.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03
"""

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("alter table tortus.bm25_posting add column doc_len integer")
    op.execute("""
        update tortus.bm25_posting p set doc_len = d.doc_len
        from tortus.bm25_doc d where d.tenant_id = p.tenant_id and d.node_id = p.node_id
    """)
    op.execute("""
        alter table tortus.bm25_posting
            alter column doc_len set not null,
            add constraint bm25_posting_doc_len_check check (doc_len >= tf),
            drop constraint bm25_posting_pkey,
            add constraint bm25_posting_pkey primary key (tenant_id, lexeme, node_id) include (tf, doc_len)
    """)


def downgrade() -> None:
    op.execute("""
        alter table tortus.bm25_posting
            drop constraint bm25_posting_pkey,
            add constraint bm25_posting_pkey primary key (tenant_id, lexeme, node_id),
            drop column doc_len
    """)
