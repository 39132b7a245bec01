"""card attempt: what the card inquiry tells of an attempt, the holder's name and why it failed

The provider SDK's card inquiry (docs/decisions.md §12.1) answers the card's holder name and the
last attempt's transaction code (`05`, `51`, `54`, `91`, `14`): an attempt keeps the name as the
customer or the charge gave it, and the acquirer's decline reason (kasir.processors DeclineReason),
NULL where none was given. Attempts made before this revision have neither: the inquiry answers
`""` for the name and `05` for a decline without a reason.

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-28
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("card_attempt") as batch:
        batch.add_column(sa.Column("card_holder_name", sa.String(64), nullable=True))
        batch.add_column(sa.Column("decline_reason", sa.String(32), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("card_attempt") as batch:
        batch.drop_column("decline_reason")
        batch.drop_column("card_holder_name")
