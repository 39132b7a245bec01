"""va: virtual accounts and the payments into them (docs/decisions.md §9)

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-28
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from kasir.db import UTCDateTime

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "virtual_account",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("merchant_id", sa.String(32), sa.ForeignKey("merchant.id"), nullable=False),
        sa.Column("sub_merchant_id", sa.String(64), nullable=True),
        sa.Column("external_id", sa.String(64), nullable=False),
        sa.Column("order_id", sa.String(25), nullable=False),
        sa.Column("payment_channel", sa.String(16), nullable=False),
        sa.Column("bank", sa.String(16), nullable=False),
        sa.Column("va_number", sa.String(32), nullable=False),
        sa.Column("open_number", sa.String(32), nullable=True),
        sa.Column("payment_system", sa.String(8), nullable=False),
        sa.Column("is_multi_use", sa.Boolean(), nullable=False),
        sa.Column("amount", sa.BigInteger(), nullable=False),
        sa.Column("total_paid_amount", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("billing_name", sa.String(100), nullable=False),
        sa.Column("description", sa.String(100), nullable=False),
        sa.Column("is_customer_paying_fee", sa.Boolean(), nullable=False),
        sa.Column("callback_url", sa.String(2048), nullable=False),
        sa.Column("details", sa.Text(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("expires_at", UTCDateTime(), nullable=False),
        sa.Column("open_until", UTCDateTime(), nullable=True),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.UniqueConstraint("merchant_id", "external_id"),
        sa.UniqueConstraint("bank", "open_number"),
    )
    op.create_index("ix_virtual_account_due", "virtual_account", ["open_until"])
    op.create_index("ix_virtual_account_created", "virtual_account", ["created_at", "id"])
    op.create_index("ix_virtual_account_merchant_created", "virtual_account", ["merchant_id", "created_at", "id"])
    op.create_index("ix_virtual_account_va_number", "virtual_account", ["va_number"])
    op.create_table(
        "va_payment",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("va_id", sa.String(32), sa.ForeignKey("virtual_account.id"), nullable=False),
        sa.Column("reference_id", sa.String(32), nullable=False),
        sa.Column("bank_reference", sa.String(64), nullable=True),
        sa.Column("amount", sa.BigInteger(), nullable=False),
        sa.Column("paid_at", UTCDateTime(), nullable=False),
        sa.UniqueConstraint("va_id", "bank_reference"),
    )
    op.create_index("ix_va_payment_va", "va_payment", ["va_id", "id"])


def downgrade() -> None:
    op.drop_table("va_payment")
    op.drop_table("virtual_account")
