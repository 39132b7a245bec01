"""processor calls in flight (asked outside any unit of work, finished by the worker after a crash);
a card attempt keeps its challenge's URL

Revision ID: 0016
Revises: 0011
Create Date: 2026-11-24
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from kasir.db import UTCDateTime

revision: str = "0016"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "processor_call",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False),
        sa.Column("product", sa.String(8), nullable=False),
        sa.Column("reference", sa.String(64), nullable=False),
        sa.Column("action", sa.String(32), nullable=False),
        sa.Column("details", sa.Text(), nullable=False),
        sa.Column("key_merchant_id", sa.String(32), nullable=True),
        sa.Column("key_scope", sa.String(64), nullable=True),
        sa.Column("key", sa.String(255), nullable=True),
        sa.Column("started_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_processor_call")),
        sa.UniqueConstraint("product", "reference", name=op.f("uq_processor_call_product_reference")),
    )
    op.create_index("ix_processor_call_started_at", "processor_call", ["started_at"])
    with op.batch_alter_table("card_attempt") as table:
        table.add_column(sa.Column("challenge_url", sa.String(2048), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("card_attempt") as table:
        table.drop_column("challenge_url")
    op.drop_index("ix_processor_call_started_at", table_name="processor_call")
    op.drop_table("processor_call")
