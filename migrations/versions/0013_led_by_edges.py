"""Edges may be typed `led_by`: a team and the person who leads it ("Lead: Harriet Nkemelu",
"The team is headed by Rowan Achterberg"), or a thing and who runs it.

Ingest read those statements as `related_to`, so no chain of typed relations reached the person
a question like "Who leads the team that owns the system behind INC-2291?" asks for. The check
on `tortus.edge.type` lists the types; it is replaced on the partitioned table, whose tenant
partitions inherit it.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-06
"""

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

BEFORE = ("supports", "contradicts", "depends_on", "caused_by", "implements", "related_to", "mentions", "part_of",
          "next", "defines", "same_as", "cites", "owned_by", "affects", "supersedes")
AFTER = (*BEFORE, "led_by")

SWAP = "alter table tortus.edge drop constraint edge_type_check, add constraint edge_type_check check (type in (%s))"


def _swap(types: tuple[str, ...]) -> str:
    return SWAP % ", ".join(f"'{t}'" for t in types)


def upgrade() -> None:
    op.execute(_swap(AFTER))


def downgrade() -> None:
    # The earlier schema has no such type: its edges go (ingesting again at that revision reads
    # the statements as `related_to`).
    op.execute("delete from tortus.edge where type = 'led_by'")
    op.execute(_swap(BEFORE))
