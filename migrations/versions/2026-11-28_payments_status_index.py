"""payments: indexes for the console's list by status and for the overview

The console's list filtered by status ("wallet + paid") read every row of that status through
`ix_*_due` (status, expires_at) and sorted them all to show the newest 50: slower with every
payment (156 ms p95 on 100,000 payments, bench/console.py). With (status, created_at, id) the
page walks the status's newest rows in order and stops after one page.

The overview sums a period's payments by status, and its trend a day at a time: `ix_*_overview`
holds every column it reads (created_at, status, the amounts, the merchant), so a day's rows are
read from the index alone instead of one table row each.

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-28
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TABLES = ("wallet_transaction", "bnpl_transaction", "card_order")


_OVERVIEW = {
    "wallet_transaction": ["created_at", "status", "amount", "refunded_amount", "merchant_id"],
    "bnpl_transaction": ["created_at", "status", "amount_cents", "merchant_id"],
    "card_order": ["created_at", "status", "amount", "merchant_id"],
}


def upgrade() -> None:
    for table in _TABLES:
        op.create_index(f"ix_{table}_status_created", table, ["status", "created_at", "id"])
        op.create_index(f"ix_{table}_overview", table, _OVERVIEW[table])


def downgrade() -> None:
    for table in _TABLES:
        op.drop_index(f"ix_{table}_overview", table_name=table)
        op.drop_index(f"ix_{table}_status_created", table_name=table)
