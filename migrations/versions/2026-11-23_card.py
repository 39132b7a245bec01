"""card: orders, attempts, idempotency keys of the charge API

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from kasir.db import UTCDateTime

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "card_order",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("merchant_id", sa.String(32), nullable=False),
        sa.Column("external_id", sa.String(64), nullable=False),
        sa.Column("order_id", sa.String(64), nullable=False),
        sa.Column("currency", sa.String(3), nullable=False),
        sa.Column("amount", sa.BigInteger(), nullable=False),
        sa.Column("payment_method", sa.String(16), nullable=False),
        sa.Column("payment_channel", sa.String(16), nullable=False),
        sa.Column("payment_mode", sa.String(8), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("tenor", sa.String(2), nullable=True),
        sa.Column("attempts_made", sa.Integer(), nullable=False),
        sa.Column("attempts_failed", sa.Integer(), nullable=False),
        sa.Column("details", sa.Text(), nullable=False),
        sa.Column("return_url", sa.String(2048), nullable=False),
        sa.Column("callback_url", sa.String(2048), nullable=True),
        sa.Column("acq", sa.String(16), nullable=True),
        sa.Column("response_message", sa.String(200), nullable=True),
        sa.Column("save_card", sa.Boolean(), nullable=False),
        sa.Column("card_token", sa.String(64), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("expires_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.Column("paid_at", UTCDateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_card_order")),
        sa.ForeignKeyConstraint(["merchant_id"], ["merchant.id"], name=op.f("fk_card_order_merchant_id_merchant")),
        sa.UniqueConstraint("merchant_id", "order_id", name=op.f("uq_card_order_merchant_id_order_id")),
        sa.UniqueConstraint("merchant_id", "external_id", name=op.f("uq_card_order_merchant_id_external_id")),
    )
    op.create_index("ix_card_order_due", "card_order", ["status", "expires_at"])
    op.create_table(
        "card_attempt",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("card_order_id", sa.String(32), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("masked_card", sa.String(19), nullable=False),
        sa.Column("card_brand", sa.String(16), nullable=False),
        sa.Column("card_exp_month", sa.String(2), nullable=False),
        sa.Column("card_exp_year", sa.String(4), nullable=False),
        sa.Column("tenor", sa.String(2), nullable=False),
        sa.Column("acq", sa.String(16), nullable=False),
        sa.Column("response_message", sa.String(200), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("completed_at", UTCDateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_card_attempt")),
        sa.ForeignKeyConstraint(
            ["card_order_id"], ["card_order.id"], name=op.f("fk_card_attempt_card_order_id_card_order")
        ),
        sa.UniqueConstraint("card_order_id", "number", name=op.f("uq_card_attempt_card_order_id_number")),
    )
    op.create_index(op.f("ix_card_attempt_card_order_id"), "card_attempt", ["card_order_id"])
    op.create_table(
        "card_idempotency_key",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("merchant_id", sa.String(32), nullable=False),
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("request_hash", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("response_status", sa.Integer(), nullable=True),
        sa.Column("response_body", sa.Text(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("expires_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_card_idempotency_key")),
        sa.ForeignKeyConstraint(
            ["merchant_id"], ["merchant.id"], name=op.f("fk_card_idempotency_key_merchant_id_merchant")
        ),
        sa.UniqueConstraint("merchant_id", "key", name=op.f("uq_card_idempotency_key_merchant_id_key")),
    )
    op.create_index("ix_card_idempotency_key_expires", "card_idempotency_key", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_card_idempotency_key_expires", table_name="card_idempotency_key")
    op.drop_table("card_idempotency_key")
    op.drop_index(op.f("ix_card_attempt_card_order_id"), table_name="card_attempt")
    op.drop_table("card_attempt")
    op.drop_index("ix_card_order_due", table_name="card_order")
    op.drop_table("card_order")
