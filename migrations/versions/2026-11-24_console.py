"""console: users and sessions, the audit log, merchant lifecycle, the payments query's indexes

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-24
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from kasir.db import UTCDateTime

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BIGINT_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

PAYMENT_INDEXES = [
    ("ix_wallet_transaction_created", "wallet_transaction", ["created_at", "id"]),
    ("ix_wallet_transaction_merchant_created", "wallet_transaction", ["merchant_id", "created_at", "id"]),
    ("ix_wallet_transaction_external", "wallet_transaction", ["external_id"]),
    ("ix_wallet_transaction_order", "wallet_transaction", ["order_id"]),
    ("ix_wallet_transaction_reference", "wallet_transaction", ["reference_id"]),
    ("ix_bnpl_transaction_created", "bnpl_transaction", ["created_at", "id"]),
    ("ix_bnpl_transaction_merchant_created", "bnpl_transaction", ["merchant_id", "created_at", "id"]),
    ("ix_bnpl_transaction_partner_reference", "bnpl_transaction", ["partner_reference_no"]),
    ("ix_card_order_created", "card_order", ["created_at", "id"]),
    ("ix_card_order_merchant_created", "card_order", ["merchant_id", "created_at", "id"]),
    ("ix_card_order_external", "card_order", ["external_id"]),
    ("ix_card_order_order", "card_order", ["order_id"]),
    ("ix_callback_created", "callback", ["created_at"]),
]


def upgrade() -> None:
    with op.batch_alter_table("merchant") as batch:
        batch.add_column(sa.Column("disabled_at", UTCDateTime(), nullable=True))
    op.create_table(
        "merchant_credential_grace",
        sa.Column("id", BIGINT_ID, autoincrement=True, nullable=False),
        sa.Column("merchant_id", sa.String(32), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("expires_at", UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["merchant_id"], ["merchant.id"], name=op.f("fk_merchant_credential_grace_merchant_id_merchant")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_merchant_credential_grace")),
    )
    op.create_index("ix_merchant_credential_grace_merchant", "merchant_credential_grace", ["merchant_id", "kind"])
    op.create_table(
        "console_user",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("email", sa.String(254), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("merchant_id", sa.String(32), nullable=True),
        sa.Column("password_hash", sa.String(255), nullable=False),
        sa.Column("failed_sign_ins", sa.Integer(), nullable=False),
        sa.Column("locked_until", UTCDateTime(), nullable=True),
        sa.Column("disabled_at", UTCDateTime(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.Column("last_sign_in_at", UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(["merchant_id"], ["merchant.id"], name=op.f("fk_console_user_merchant_id_merchant")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_console_user")),
        sa.UniqueConstraint("email", name=op.f("uq_console_user_email")),
    )
    op.create_table(
        "console_session",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("csrf_token", sa.String(64), nullable=False),
        sa.Column("ip", sa.String(64), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("last_seen_at", UTCDateTime(), nullable=False),
        sa.Column("expires_at", UTCDateTime(), nullable=False),
        sa.Column("revoked_at", UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(["user_id"], ["console_user.id"], name=op.f("fk_console_session_user_id_console_user")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_console_session")),
    )
    op.create_index("ix_console_session_user", "console_session", ["user_id"])
    op.create_table(
        "audit_event",
        sa.Column("id", BIGINT_ID, autoincrement=True, nullable=False),
        sa.Column("at", UTCDateTime(), nullable=False),
        sa.Column("actor", sa.String(320), nullable=False),
        sa.Column("channel", sa.String(16), nullable=False),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("target_type", sa.String(32), nullable=False),
        sa.Column("target_id", sa.String(128), nullable=False),
        sa.Column("merchant_id", sa.String(32), nullable=True),
        sa.Column("ip", sa.String(64), nullable=True),
        sa.Column("before", sa.Text(), nullable=True),
        sa.Column("after", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_event")),
    )
    op.create_index("ix_audit_event_at", "audit_event", ["at", "id"])
    op.create_index("ix_audit_event_merchant", "audit_event", ["merchant_id", "at"])
    # Append-only: the application never updates or deletes an audit row; on PostgreSQL the
    # database refuses it too (SQLite's file is the operator's own, a trigger there guards little).
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "CREATE FUNCTION audit_event_append_only() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'audit_event is append-only'; END $$"
        )
        op.execute(
            "CREATE TRIGGER audit_event_append_only BEFORE UPDATE OR DELETE ON audit_event "
            "FOR EACH ROW EXECUTE FUNCTION audit_event_append_only()"
        )
    for name, table, columns in PAYMENT_INDEXES:
        op.create_index(name, table, columns)


def downgrade() -> None:
    for name, table, _columns in reversed(PAYMENT_INDEXES):
        op.drop_index(name, table_name=table)
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS audit_event_append_only ON audit_event")
        op.execute("DROP FUNCTION IF EXISTS audit_event_append_only()")
    op.drop_table("audit_event")
    op.drop_table("console_session")
    op.drop_table("console_user")
    op.drop_table("merchant_credential_grace")
    with op.batch_alter_table("merchant") as batch:
        batch.drop_column("disabled_at")
