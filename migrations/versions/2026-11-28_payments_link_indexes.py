"""payments: payment links in the list and the overview; a link's inner payments out of their rooms' numbers

A payment link shows in the payments list, its search and the overview as one payment (kasir.payments): the
list filtered by status newest first and the overview's numbers read from the index alone. The card orders,
wallet transactions and VAs a link's page made belong to the link (`link_id`, migration 0024): the overview
leaves them out of their own product's numbers, so each overview index carries `link_id` to stay covering.

Revision ID: 0025
Revises: 0024
Create Date: 2026-11-28
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0025"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_LINK_INDEXES = {
    "ix_payment_link_status_created": ["status", "created_at", "id"],
    "ix_payment_link_overview": ["created_at", "status", "amount", "merchant_id"],
}
# Each overview index as migrations 0020 and 0023 made it; upgraded with `link_id` at the end.
_OVERVIEWS = {
    "ix_wallet_transaction_overview": (
        "wallet_transaction",
        ["created_at", "status", "amount", "refunded_amount", "merchant_id"],
    ),
    "ix_card_order_overview": ("card_order", ["created_at", "status", "amount", "merchant_id"]),
    "ix_virtual_account_overview": ("virtual_account", ["created_at", "status", "total_paid_amount", "merchant_id"]),
}


def upgrade() -> None:
    for name, columns in _LINK_INDEXES.items():
        op.create_index(name, "payment_link", columns)
    for name, (table, columns) in _OVERVIEWS.items():
        op.drop_index(name, table_name=table)
        op.create_index(name, table, [*columns, "link_id"])


def downgrade() -> None:
    for name, (table, columns) in _OVERVIEWS.items():
        op.drop_index(name, table_name=table)
        op.create_index(name, table, columns)
    for name in reversed(_LINK_INDEXES):
        op.drop_index(name, table_name="payment_link")
