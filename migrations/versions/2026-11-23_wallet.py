"""wallet: transactions, refunds

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from kasir.db import UTCDateTime

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "wallet_transaction",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("merchant_id", sa.String(32), nullable=False),
        sa.Column("external_id", sa.String(64), nullable=False),
        sa.Column("order_id", sa.String(100), nullable=False),
        sa.Column("reference_id", sa.String(64), nullable=False),
        sa.Column("payment_channel", sa.String(16), nullable=False),
        sa.Column("currency", sa.String(3), nullable=False),
        sa.Column("amount", sa.BigInteger(), nullable=False),
        sa.Column("refunded_amount", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("description", sa.String(255), nullable=False),
        sa.Column("callback_url", sa.String(2048), nullable=False),
        sa.Column("return_url", sa.String(2048), nullable=True),
        sa.Column("details", sa.Text(), nullable=False),
        sa.Column("qr_string", sa.Text(), nullable=True),
        sa.Column("terminal_id", sa.String(32), nullable=True),
        sa.Column("failure_reason", sa.String(255), nullable=True),
        sa.Column("issuer", sa.String(32), nullable=True),
        sa.Column("retrieval_reference_no", sa.String(32), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("expires_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.Column("paid_at", UTCDateTime(), nullable=True),
        sa.Column("voided_at", UTCDateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_wallet_transaction")),
        sa.ForeignKeyConstraint(
            ["merchant_id"], ["merchant.id"], name=op.f("fk_wallet_transaction_merchant_id_merchant")
        ),
        sa.UniqueConstraint("merchant_id", "external_id", name=op.f("uq_wallet_transaction_merchant_id_external_id")),
    )
    op.create_index("ix_wallet_transaction_due", "wallet_transaction", ["status", "expires_at"])
    op.create_table(
        "wallet_refund",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("transaction_id", sa.String(64), nullable=False),
        sa.Column("amount", sa.BigInteger(), nullable=False),
        sa.Column("reason", sa.String(255), nullable=True),
        sa.Column("refunded_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_wallet_refund")),
        sa.ForeignKeyConstraint(
            ["transaction_id"],
            ["wallet_transaction.id"],
            name=op.f("fk_wallet_refund_transaction_id_wallet_transaction"),
        ),
    )
    op.create_index("ix_wallet_refund_transaction_id", "wallet_refund", ["transaction_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_wallet_refund_transaction_id", table_name="wallet_refund")
    op.drop_table("wallet_refund")
    op.drop_index("ix_wallet_transaction_due", table_name="wallet_transaction")
    op.drop_table("wallet_transaction")
