"""payments: index (status, created_at, id) on the wallet, BNPL and card tables

The console's list filtered by status ("wallet + paid") read every row of that status through
`ix_*_due` (status, expires_at) and sorted them all to show the newest 50: slower with every
payment (156 ms p95 on 100,000 payments, bench/console.py). With this index the page walks the
status's newest rows in order and stops after one page.

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-28
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TABLES = ("wallet_transaction", "bnpl_transaction", "card_order")


def upgrade() -> None:
    for table in _TABLES:
        op.create_index(f"ix_{table}_status_created", table, ["status", "created_at", "id"])


def downgrade() -> None:
    for table in _TABLES:
        op.drop_index(f"ix_{table}_status_created", table_name=table)
