"""callbacks: one event, one id; signatures made at send time; a rotation's switch confirmed

A callback event is its first `callback` row; every replay of it is another row (a delivery) whose
`event_id` names that first row, whatever row was replayed, so every delivery of an event goes out
with the same X-Kasir-Callback-Id. `attempt_offset` is how many attempts the event's earlier
deliveries made: X-Kasir-Attempt counts across the event. Replays recorded before this revision
point through `replay_of`, sometimes at another replay: their `event_id` is the first row of the
chain. A replay not yet attempted starts after the attempts its event made already.

`signed_ids` keeps what a wallet, payment-page or BNPL svc-signature is made of, so that the
signature is computed when each attempt is sent, with the hash key the merchant verifies with
then (docs/decisions.md §12.4); rows recorded before keep their stored `svc_signature`.

`merchant_credential_grace.confirmed_at`: the merchant said it verifies callbacks with the new
value; until then, and while the grace lasts, callbacks are signed with the replaced one.

Revision ID: 0017
Revises: 0012
Create Date: 2026-11-28
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from kasir.db import UTCDateTime

revision: str = "0017"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    with op.batch_alter_table("callback") as batch:
        batch.add_column(sa.Column("event_id", _ID, nullable=True))
        batch.add_column(sa.Column("attempt_offset", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("signed_ids", sa.Text(), nullable=True))
    op.create_index("ix_callback_event_id", "callback", ["event_id"])
    with op.batch_alter_table("merchant_credential_grace") as batch:
        batch.add_column(sa.Column("confirmed_at", UTCDateTime(), nullable=True))

    callback = sa.table(
        "callback",
        sa.column("id", _ID),
        sa.column("replay_of", _ID),
        sa.column("event_id", _ID),
        sa.column("attempts_made", sa.Integer()),
        sa.column("attempt_offset", sa.Integer()),
    )
    bind = op.get_bind()
    bind.execute(callback.update().where(callback.c.replay_of.is_not(None)).values(event_id=callback.c.replay_of))
    # A replay of a replay: follow the chain to its first row, one link per pass.
    parent = callback.alias("parent")
    while True:
        grandparent = sa.select(parent.c.event_id).where(parent.c.id == callback.c.event_id).scalar_subquery()
        moved = bind.execute(
            callback.update()
            .where(callback.c.event_id.in_(sa.select(parent.c.id).where(parent.c.event_id.is_not(None))))
            .values(event_id=grandparent)
        )
        if moved.rowcount == 0:
            break
    # Earlier rows numbered their attempts from 1 each; one still to be sent starts after them all.
    sibling = callback.alias("sibling")
    made_before = (
        sa.select(sa.func.coalesce(sa.func.max(sibling.c.attempts_made), 0))
        .where(
            sa.or_(sibling.c.id == callback.c.event_id, sibling.c.event_id == callback.c.event_id),
            sibling.c.id < callback.c.id,
        )
        .scalar_subquery()
    )
    bind.execute(
        callback.update()
        .where(callback.c.event_id.is_not(None), callback.c.attempts_made == 0)
        .values(attempt_offset=made_before)
    )


def downgrade() -> None:
    with op.batch_alter_table("merchant_credential_grace") as batch:
        batch.drop_column("confirmed_at")
    op.drop_index("ix_callback_event_id", table_name="callback")
    with op.batch_alter_table("callback") as batch:
        batch.drop_column("signed_ids")
        batch.drop_column("attempt_offset")
        batch.drop_column("event_id")
