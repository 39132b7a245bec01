"""links: the payment link, the methods chosen on it, and the owning link of inner payments (docs/decisions.md §10)

A link's card order, wallet transaction or VA is a row of its own room carrying `link_id`: those rooms'
routes do not find it and it sends no callback of its own (§10.3).

Revision ID: 0024
Revises: 0023
Create Date: 2026-11-28
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from kasir.db import UTCDateTime

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_OWNED = ("card_order", "wallet_transaction", "virtual_account")


def upgrade() -> None:
    op.create_table(
        "payment_link",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("merchant_id", sa.String(32), sa.ForeignKey("merchant.id"), nullable=False),
        sa.Column("sub_merchant_id", sa.String(64), nullable=True),
        sa.Column("external_id", sa.String(255), nullable=False),
        sa.Column("order_id", sa.String(25), nullable=False),
        sa.Column("amount", sa.BigInteger(), nullable=False),
        sa.Column("description", sa.String(255), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("is_customer_paying_fee", sa.Boolean(), nullable=False),
        sa.Column("save_card", sa.Boolean(), nullable=False),
        sa.Column("callback_url", sa.String(2048), nullable=False),
        sa.Column("success_redirect_url", sa.String(2048), nullable=True),
        sa.Column("failed_redirect_url", sa.String(2048), nullable=True),
        sa.Column("channels", sa.Text(), nullable=False),
        sa.Column("details", sa.Text(), nullable=False),
        sa.Column("attempts_failed", sa.Integer(), nullable=False),
        sa.Column("payment_method", sa.String(32), nullable=True),
        sa.Column("payment_channel", sa.String(16), nullable=True),
        sa.Column("acq", sa.String(16), nullable=True),
        sa.Column("response_message", sa.String(255), nullable=True),
        sa.Column("card_token", sa.String(64), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("expires_at", UTCDateTime(), nullable=False),
        sa.Column("open_until", UTCDateTime(), nullable=True),
        sa.Column("paid_at", UTCDateTime(), nullable=True),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.UniqueConstraint("merchant_id", "external_id"),
    )
    op.create_index("ix_payment_link_due", "payment_link", ["open_until"])
    op.create_index("ix_payment_link_created", "payment_link", ["created_at", "id"])
    op.create_index("ix_payment_link_merchant_created", "payment_link", ["merchant_id", "created_at", "id"])
    op.create_index("ix_payment_link_external", "payment_link", ["external_id"])
    op.create_index("ix_payment_link_order", "payment_link", ["order_id"])
    op.create_table(
        "link_attempt",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=True),
        sa.Column("link_id", sa.String(32), sa.ForeignKey("payment_link.id"), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("method", sa.String(16), nullable=False),
        sa.Column("channel", sa.String(16), nullable=False),
        sa.Column("acq", sa.String(16), nullable=False),
        sa.Column("inner_id", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("reason", sa.String(255), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.UniqueConstraint("link_id", "number"),
    )
    op.create_index("ix_link_attempt_inner", "link_attempt", ["inner_id"])
    for table in _OWNED:
        op.add_column(table, sa.Column("link_id", sa.String(32), nullable=True))
        op.create_index(f"ix_{table}_link_id", table, ["link_id"])


def downgrade() -> None:
    for table in reversed(_OWNED):
        op.drop_index(f"ix_{table}_link_id", table_name=table)
        with op.batch_alter_table(table) as batch:
            batch.drop_column("link_id")
    op.drop_table("link_attempt")
    op.drop_table("payment_link")
