"""Edges are indexed by their end and their strength (weight × confidence), strongest first.

The walk reads each expanded node's strongest edges (`tortus.traverse`, 2 × fan_out of them
per direction). Through the index of edges by end and type it read every edge ending at the
node and sorted them: at 100k nodes a hub entity's few hundred mention edges, for each of the
beam's nodes at every hop. Read in strength order, it stops at the cap.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-05
"""

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("create index edge_in_strength on tortus.edge "
               "(tenant_id, dst, ((weight::float8 * confidence::float8)) desc, src)")


def downgrade() -> None:
    op.execute("drop index tortus.edge_in_strength")
