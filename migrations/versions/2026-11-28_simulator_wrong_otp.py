"""simulator: the wrong one-time passwords of a 3-D Secure challenge

The staging issuer lets the customer type the code again (kasir.simulator.cards.OTP_TRIES) before
the attempt fails: one row per wrong code of an attempt, counted (kasir.simulator.models). Never the code.

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-28
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from kasir.db import UTCDateTime

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "simulator_wrong_otp",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("card_order_id", sa.String(32), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_simulator_wrong_otp")),
    )
    op.create_index("ix_simulator_wrong_otp_attempt", "simulator_wrong_otp", ["card_order_id", "attempt"])


def downgrade() -> None:
    op.drop_index("ix_simulator_wrong_otp_attempt", table_name="simulator_wrong_otp")
    op.drop_table("simulator_wrong_otp")
