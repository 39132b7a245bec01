"""payments: the list's, the search's and the overview's indexes on virtual_account

VAs show in the payments list, its search and the overview as wallet, BNPL and card payments
do (kasir.payments.models): the search by external_id across merchants (the unique
(merchant_id, external_id) serves one merchant only) and by order_id, the list filtered by
status newest first, and the overview's numbers read from the index alone. Migration 0021
made the others the list needs (created, merchant_created, va_number).

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-28
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_INDEXES = {
    "ix_virtual_account_external": ["external_id"],
    "ix_virtual_account_order": ["order_id"],
    "ix_virtual_account_status_created": ["status", "created_at", "id"],
    "ix_virtual_account_overview": ["created_at", "status", "total_paid_amount", "merchant_id"],
}


def upgrade() -> None:
    for name, columns in _INDEXES.items():
        op.create_index(name, "virtual_account", columns)


def downgrade() -> None:
    for name in reversed(_INDEXES):
        op.drop_index(name, table_name="virtual_account")
