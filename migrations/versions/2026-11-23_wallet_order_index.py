"""wallet: index (merchant_id, order_id)

A card charge refuses an orderId the merchant already used on a wallet transaction
(decisions.md §7). Without this index that look-up read every wallet transaction of the
merchant: a card charge grew slower with each wallet payment.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_wallet_transaction_merchant_order", "wallet_transaction", ["merchant_id", "order_id"])


def downgrade() -> None:
    op.drop_index("ix_wallet_transaction_merchant_order", table_name="wallet_transaction")
