"""callbacks: each attempt keeps the request as it was sent (URL with its query, headers)

The console shows a callback's attempts "as sent"; headers carry signatures computed at the
attempt (a BNPL notification's X-SIGNATURE covers its X-TIMESTAMP), so they are recorded then,
not rebuilt afterwards. Attempts made before this revision have none.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-24
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("callback_attempt") as batch:
        batch.add_column(sa.Column("request_url", sa.String(2048), nullable=True))
        batch.add_column(sa.Column("request_headers", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("callback_attempt") as batch:
        batch.drop_column("request_headers")
        batch.drop_column("request_url")
