"""payouts: the merchant's disbursement account number, balances and the operator's top-ups (decisions §11.2, §11.3)

Every merchant gets `account_no`, 16 digits (new merchants at creation); the balance row is made by the first
top-up.

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-28
"""

import secrets
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from kasir.db import UTCDateTime

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _account_no() -> str:
    return str(secrets.choice(range(1, 10))) + "".join(secrets.choice("0123456789") for _ in range(15))


def upgrade() -> None:
    with op.batch_alter_table("merchant") as batch:
        batch.add_column(sa.Column("account_no", sa.String(16), nullable=True))
        batch.create_unique_constraint("uq_merchant_account_no", ["account_no"])
    merchant = sa.table("merchant", sa.column("id", sa.String), sa.column("account_no", sa.String))
    connection = op.get_bind()
    for (merchant_id,) in connection.execute(sa.select(merchant.c.id)).all():
        connection.execute(merchant.update().where(merchant.c.id == merchant_id).values(account_no=_account_no()))
    op.create_table(
        "disbursement_balance",
        sa.Column("merchant_id", sa.String(32), sa.ForeignKey("merchant.id"), primary_key=True),
        sa.Column("ledger", sa.BigInteger(), nullable=False),
        sa.Column("hold", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
    )
    op.create_table(
        "disbursement_top_up",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("merchant_id", sa.String(32), sa.ForeignKey("merchant.id"), nullable=False),
        sa.Column("amount", sa.BigInteger(), nullable=False),
        sa.Column("note", sa.String(255), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
    )
    op.create_index("ix_disbursement_top_up_merchant_created", "disbursement_top_up", ["merchant_id", "created_at"])


def downgrade() -> None:
    op.drop_table("disbursement_top_up")
    op.drop_table("disbursement_balance")
    with op.batch_alter_table("merchant") as batch:
        batch.drop_constraint("uq_merchant_account_no", type_="unique")
        batch.drop_column("account_no")
