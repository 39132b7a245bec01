"""rate limits: counters shared by the server processes (PostgreSQL; SQLite counts in memory)

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-24
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from kasir.db import UTCDateTime

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "rate_limit_counter",
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("window_start", sa.BigInteger(), nullable=False),
        sa.Column("hits", sa.Integer(), nullable=False),
        sa.Column("expires_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("key", "window_start", name=op.f("pk_rate_limit_counter")),
    )
    op.create_index("ix_rate_limit_counter_expires_at", "rate_limit_counter", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_rate_limit_counter_expires_at", table_name="rate_limit_counter")
    op.drop_table("rate_limit_counter")
