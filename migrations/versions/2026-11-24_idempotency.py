"""idempotency: one key table for every money-moving POST; the card charge's keys move into it

The card charge's answered keys keep their answers (and their fingerprints: the same keyed
hash), under the scope `POST /card-v2/v1/charge`. Keys of requests still in progress are
not moved: no request survives the upgrade, and their clients' retries find the key free.
The JSON of the stored headers is the content type every card answer has.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-24
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from kasir.db import UTCDateTime

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
CARD_SCOPE = "POST /card-v2/v1/charge"
CARD_HEADERS = '{"content-type": "application/json"}'


def upgrade() -> None:
    op.create_table(
        "idempotency_key",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("merchant_id", sa.String(32), nullable=False),
        sa.Column("scope", sa.String(64), nullable=False),
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("request_hash", sa.String(64), nullable=False),
        sa.Column("response_status", sa.Integer(), nullable=True),
        sa.Column("response_headers", sa.Text(), nullable=True),
        sa.Column("response_body", sa.Text(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("expires_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_idempotency_key")),
        sa.ForeignKeyConstraint(["merchant_id"], ["merchant.id"], name=op.f("fk_idempotency_key_merchant_id_merchant")),
        sa.UniqueConstraint("merchant_id", "scope", "key", name=op.f("uq_idempotency_key_merchant_id_scope_key")),
    )
    op.create_index("ix_idempotency_key_expires_at", "idempotency_key", ["expires_at"])
    op.execute(
        sa.text(
            "INSERT INTO idempotency_key (merchant_id, scope, key, request_hash, response_status, response_headers,"
            " response_body, created_at, expires_at)"
            " SELECT merchant_id, :scope, key, request_hash, response_status, :headers, response_body, created_at,"
            " expires_at FROM card_idempotency_key"
            " WHERE status = 'complete' AND response_status IS NOT NULL AND response_body IS NOT NULL"
        ).bindparams(scope=CARD_SCOPE, headers=CARD_HEADERS)
    )
    op.drop_index("ix_card_idempotency_key_expires", table_name="card_idempotency_key")
    op.drop_table("card_idempotency_key")


def downgrade() -> None:
    op.create_table(
        "card_idempotency_key",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("merchant_id", sa.String(32), nullable=False),
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("request_hash", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("response_status", sa.Integer(), nullable=True),
        sa.Column("response_body", sa.Text(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("expires_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_card_idempotency_key")),
        sa.ForeignKeyConstraint(
            ["merchant_id"], ["merchant.id"], name=op.f("fk_card_idempotency_key_merchant_id_merchant")
        ),
        sa.UniqueConstraint("merchant_id", "key", name=op.f("uq_card_idempotency_key_merchant_id_key")),
    )
    op.create_index("ix_card_idempotency_key_expires", "card_idempotency_key", ["expires_at"])
    op.execute(
        sa.text(
            "INSERT INTO card_idempotency_key (merchant_id, key, request_hash, status, response_status,"
            " response_body, created_at, expires_at)"
            " SELECT merchant_id, key, request_hash, 'complete', response_status, response_body, created_at,"
            " expires_at FROM idempotency_key WHERE scope = :scope AND response_status IS NOT NULL"
        ).bindparams(scope=CARD_SCOPE)
    )
    op.drop_index("ix_idempotency_key_expires_at", table_name="idempotency_key")
    op.drop_table("idempotency_key")
