"""callbacks: the outbox and its attempts

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from kasir.db import UTCDateTime

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "callback",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("merchant_id", sa.String(32), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("transaction_ref", sa.String(64), nullable=False),
        sa.Column("event", sa.String(32), nullable=False),
        sa.Column("url", sa.String(2048), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("svc_signature", sa.String(128), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts_made", sa.Integer(), nullable=False),
        sa.Column("max_attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", UTCDateTime(), nullable=False),
        sa.Column("lease_owner", sa.String(64), nullable=True),
        sa.Column("lease_expires_at", UTCDateTime(), nullable=True),
        sa.Column("fence", sa.Integer(), nullable=False),
        sa.Column("replay_of", BigId, nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("delivered_at", UTCDateTime(), nullable=True),
        sa.Column("last_error", sa.String(500), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_callback")),
        sa.ForeignKeyConstraint(["merchant_id"], ["merchant.id"], name=op.f("fk_callback_merchant_id_merchant")),
    )
    op.create_index("ix_callback_due", "callback", ["status", "next_attempt_at"])
    op.create_index("ix_callback_transaction", "callback", ["merchant_id", "kind", "transaction_ref", "id"])
    op.create_table(
        "callback_attempt",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("callback_id", BigId, nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("fence", sa.Integer(), nullable=False),
        sa.Column("worker", sa.String(64), nullable=False),
        sa.Column("started_at", UTCDateTime(), nullable=False),
        sa.Column("latency_ms", sa.Integer(), nullable=False),
        sa.Column("http_status", sa.Integer(), nullable=True),
        sa.Column("error", sa.String(500), nullable=True),
        sa.Column("response_excerpt", sa.Text(), nullable=True),
        sa.Column("accepted", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_callback_attempt")),
        sa.ForeignKeyConstraint(
            ["callback_id"], ["callback.id"], name=op.f("fk_callback_attempt_callback_id_callback")
        ),
    )
    op.create_index("ix_callback_attempt_callback_id", "callback_attempt", ["callback_id"])


def downgrade() -> None:
    op.drop_table("callback_attempt")
    op.drop_table("callback")
