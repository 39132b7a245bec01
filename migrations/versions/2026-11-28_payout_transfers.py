"""payouts: the transfers (decisions §11.6, §11.7)

Revision ID: 0025
Revises: 0023
Create Date: 2026-11-28
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from kasir.db import UTCDateTime

revision: str = "0025"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "payout_transfer",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("merchant_id", sa.String(32), sa.ForeignKey("merchant.id"), nullable=False),
        sa.Column("partner_reference_no", sa.String(64), nullable=False),
        sa.Column("external_id", sa.String(36), nullable=False),
        sa.Column("amount", sa.BigInteger(), nullable=False),
        sa.Column("currency", sa.String(3), nullable=False),
        sa.Column("held", sa.BigInteger(), nullable=False),
        sa.Column("beneficiary_account_no", sa.String(34), nullable=False),
        sa.Column("beneficiary_account_name", sa.String(100), nullable=False),
        sa.Column("beneficiary_bank_code", sa.String(7), nullable=False),
        sa.Column("bank", sa.String(16), nullable=False),
        sa.Column("beneficiary_bank_name", sa.String(50), nullable=False),
        sa.Column("source_account_no", sa.String(16), nullable=False),
        sa.Column("fee_type", sa.String(3), nullable=False),
        sa.Column("status", sa.String(2), nullable=False),
        sa.Column("reason", sa.String(255), nullable=True),
        sa.Column("rail", sa.String(64), nullable=False),
        sa.Column("rail_reference", sa.String(64), nullable=True),
        sa.Column("callback_url", sa.String(2048), nullable=True),
        sa.Column("transaction_date", sa.String(40), nullable=True),
        sa.Column("remark", sa.String(255), nullable=True),
        sa.Column("details", sa.Text(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.Column("finished_at", UTCDateTime(), nullable=True),
        sa.Column("refunded_at", UTCDateTime(), nullable=True),
        sa.Column("next_check_at", UTCDateTime(), nullable=True),
        sa.Column("key_scope", sa.String(64), nullable=True),
        sa.Column("idempotency_key", sa.String(255), nullable=True),
        sa.UniqueConstraint("merchant_id", "partner_reference_no"),
    )
    op.create_index("ix_payout_transfer_merchant_created", "payout_transfer", ["merchant_id", "created_at", "id"])
    op.create_index("ix_payout_transfer_next_check", "payout_transfer", ["next_check_at"])


def downgrade() -> None:
    op.drop_table("payout_transfer")
