"""bnpl: transactions, X-EXTERNAL-ID ledger, per-merchant pricing

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from kasir.db import UTCDateTime

revision: str = "0004"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "bnpl_transaction",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("merchant_id", sa.String(32), nullable=False),
        sa.Column("partner_reference_no", sa.String(64), nullable=False),
        sa.Column("amount_cents", sa.BigInteger(), nullable=False),
        sa.Column("currency", sa.String(3), nullable=False),
        sa.Column("status", sa.String(2), nullable=False),
        sa.Column("status_desc", sa.String(50), nullable=False),
        sa.Column("callback_url", sa.String(2048), nullable=False),
        sa.Column("channel_id", sa.String(5), nullable=False),
        sa.Column("details", sa.Text(), nullable=False),
        sa.Column("tenure", sa.Integer(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("expires_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.Column("paid_at", UTCDateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_bnpl_transaction")),
        sa.ForeignKeyConstraint(
            ["merchant_id"], ["merchant.id"], name=op.f("fk_bnpl_transaction_merchant_id_merchant")
        ),
        sa.UniqueConstraint(
            "merchant_id", "partner_reference_no", name=op.f("uq_bnpl_transaction_merchant_id_partner_reference_no")
        ),
    )
    op.create_index("ix_bnpl_transaction_due", "bnpl_transaction", ["status", "expires_at"])
    op.create_table(
        "bnpl_external_id",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("merchant_id", sa.String(32), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("external_id", sa.String(36), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_bnpl_external_id")),
        sa.ForeignKeyConstraint(
            ["merchant_id"], ["merchant.id"], name=op.f("fk_bnpl_external_id_merchant_id_merchant")
        ),
        sa.UniqueConstraint(
            "merchant_id", "day", "external_id", name=op.f("uq_bnpl_external_id_merchant_id_day_external_id")
        ),
    )
    op.create_table(
        "bnpl_pricing",
        sa.Column("merchant_id", sa.String(32), nullable=False),
        sa.Column("plans", sa.Text(), nullable=True),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("merchant_id", name=op.f("pk_bnpl_pricing")),
        sa.ForeignKeyConstraint(["merchant_id"], ["merchant.id"], name=op.f("fk_bnpl_pricing_merchant_id_merchant")),
    )


def downgrade() -> None:
    op.drop_table("bnpl_pricing")
    op.drop_table("bnpl_external_id")
    op.drop_index("ix_bnpl_transaction_due", table_name="bnpl_transaction")
    op.drop_table("bnpl_transaction")
