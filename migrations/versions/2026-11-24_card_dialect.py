"""card dialect: stored card tokens, sub-merchants, and the dialect and sub-merchant of a card payment

The provider SDK's snake_case card dialect (kasir.card.dialect): a card stored by a charge
(`store_token`) is a token bound to its merchant with the masked number, brand and expiry
(never the number or the CVN); a merchant's sub-merchant ids; and on each card order
the dialect it came in (NULL for the camelCase charge) and the sub-merchant it named.

Revision ID: 0012
Revises: 0016
Create Date: 2026-11-24
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from kasir.db import UTCDateTime

revision: str = "0012"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.add_column("card_order", sa.Column("dialect", sa.String(8), nullable=True))
    op.add_column("card_order", sa.Column("sub_merchant_id", sa.String(64), nullable=True))
    op.create_table(
        "card_stored",
        sa.Column("token", sa.String(64), nullable=False),
        sa.Column("merchant_id", sa.String(32), nullable=False),
        sa.Column("card_order_id", sa.String(32), nullable=False),
        sa.Column("masked_card", sa.String(19), nullable=False),
        sa.Column("card_brand", sa.String(16), nullable=False),
        sa.Column("card_exp_month", sa.String(2), nullable=False),
        sa.Column("card_exp_year", sa.String(4), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("token", name=op.f("pk_card_stored")),
        sa.ForeignKeyConstraint(["merchant_id"], ["merchant.id"], name=op.f("fk_card_stored_merchant_id_merchant")),
    )
    op.create_index("ix_card_stored_merchant_id", "card_stored", ["merchant_id"])
    op.create_table(
        "sub_merchant",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("merchant_id", sa.String(32), nullable=False),
        sa.Column("sub_merchant_id", sa.String(64), nullable=False),
        sa.Column("name", sa.String(100), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sub_merchant")),
        sa.ForeignKeyConstraint(["merchant_id"], ["merchant.id"], name=op.f("fk_sub_merchant_merchant_id_merchant")),
        sa.UniqueConstraint("merchant_id", "sub_merchant_id", name=op.f("uq_sub_merchant_merchant_id_sub_merchant_id")),
    )


def downgrade() -> None:
    op.drop_table("sub_merchant")
    op.drop_index("ix_card_stored_merchant_id", table_name="card_stored")
    op.drop_table("card_stored")
    with op.batch_alter_table("card_order") as batch:
        batch.drop_column("sub_merchant_id")
        batch.drop_column("dialect")
