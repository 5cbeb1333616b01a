"""Each concept keeps the number of chunk mentions it was placed among.

The walk weighs a concept down by ln(e + the chunks mentioning it), so a hub leads less far
than a rare concept. It counted them at every hop, up to 1,000 index entries per concept: at
100k nodes a second hop scores some 800 candidates, and counting the concepts' mentions took
about a fifth of it. `tortus.place_concepts` (run by `tortus-pg index`) now stores the count
with the concept's coordinates, and the walk reads it; a concept placed since is counted live,
and so is every concept for a caller who reads only some sources (the stored count includes
chunks hidden from it). The counts are filled in here for every tenant.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-04
"""

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("alter table tortus.node add column mentions integer check (mentions >= 0)")
    op.execute("""
        update tortus.node n set mentions = c.mentions
        from (select e.tenant_id, e.dst, count(*)::integer as mentions from tortus.edge e
              where e.type = 'mentions' group by e.tenant_id, e.dst) c
        where n.tenant_id = c.tenant_id and n.node_id = c.dst
    """)


def downgrade() -> None:
    # A function body bound to the column goes with it; sql/ is re-applied after the migration.
    op.execute("drop function if exists tortus.place_concepts()")
    op.execute("alter table tortus.node drop column mentions")
