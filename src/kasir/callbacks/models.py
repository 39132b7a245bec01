from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from sqlalchemy import BigInteger, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from kasir.db import Base, UTCDateTime


class CallbackKind(StrEnum):
    WALLET = "wallet"
    PAYMENT_PAGE = "payment_page"
    BNPL = "bnpl"
    VA = "va"  # the wallet callback's sibling (docs/decisions.md §9.7)
    PAYOUT = "payout"  # a transfer's notification, signed as BNPL's (docs/decisions.md §11.8)


# The event of a merchant's test callback (the console's My merchant): sent once, never retried or recovered,
# and no given-up payment callback of the merchant.
TEST_EVENT = "TEST"


class CallbackStatus(StrEnum):
    PENDING = "pending"  # waiting for its next attempt (or for an earlier callback of its transaction)
    DELIVERING = "delivering"  # claimed by a worker until lease_expires_at
    DELIVERED = "delivered"
    FAILED = "failed"  # every attempt of its policy was refused


class Callback(Base):
    """One notification to a merchant, recorded in the transaction of the change it reports."""

    __tablename__ = "callback"

    # The id orders a transaction's callbacks: they are delivered in id order.
    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True)
    merchant_id: Mapped[str] = mapped_column(String(32), ForeignKey("merchant.id"))
    kind: Mapped[str] = mapped_column(String(16))
    transaction_ref: Mapped[str] = mapped_column(String(64))  # the product's transaction id
    event: Mapped[str] = mapped_column(String(32))  # what happened: PAID, FAILED, 00, ... (TEST_EVENT: a test)
    url: Mapped[str] = mapped_column(String(2048))
    payload: Mapped[str] = mapped_column(Text)  # the exact JSON body sent
    # Rows recorded before signatures were made at send time keep the one computed then (§3.5; BNPL too,
    # issue 26); newer rows keep what it is made of (`signed_ids`) and are signed when each attempt is sent,
    # with the hash key the merchant verifies with then (docs/decisions.md §8).
    svc_signature: Mapped[str | None] = mapped_column(String(128))
    signed_ids: Mapped[str | None] = mapped_column(Text)  # JSON: transaction_id, external_id, order_id, ...
    status: Mapped[str] = mapped_column(String(16), default=CallbackStatus.PENDING)
    attempts_made: Mapped[int] = mapped_column(Integer, default=0)
    max_attempts: Mapped[int] = mapped_column(Integer)
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime())
    lease_owner: Mapped[str | None] = mapped_column(String(64))
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    fence: Mapped[int] = mapped_column(Integer, default=0)  # bumped at every claim; a stale worker's write is refused
    replay_of: Mapped[int | None] = mapped_column(BigInteger().with_variant(Integer, "sqlite"))
    # A replay is another delivery of the same event: the event is its first row (event_id NULL there),
    # and every delivery goes out with the event's id as X-Kasir-Callback-Id (docs/decisions.md §8).
    event_id: Mapped[int | None] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), index=True)
    # Attempts the event's earlier deliveries made: X-Kasir-Attempt counts across the event.
    attempt_offset: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    last_error: Mapped[str | None] = mapped_column(String(500))

    __table_args__ = (
        Index("ix_callback_due", "status", "next_attempt_at"),
        Index("ix_callback_transaction", "merchant_id", "kind", "transaction_ref", "id"),
    )


class CallbackAttempt(Base):
    """One HTTP attempt of a callback, as it went."""

    __tablename__ = "callback_attempt"

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True)
    callback_id: Mapped[int] = mapped_column(ForeignKey("callback.id"), index=True)
    number: Mapped[int] = mapped_column(Integer)  # X-Kasir-Attempt: 1 = the event's first try
    fence: Mapped[int] = mapped_column(Integer)
    worker: Mapped[str] = mapped_column(String(64))
    started_at: Mapped[datetime] = mapped_column(UTCDateTime())
    latency_ms: Mapped[int] = mapped_column(Integer)
    http_status: Mapped[int | None] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(String(500))
    response_excerpt: Mapped[str | None] = mapped_column(Text)  # first 2 KB of the answer
    accepted: Mapped[bool] = mapped_column(default=False)
    # The request as it was sent (the body is the callback's payload, byte for byte): the URL with
    # its query, and the headers as JSON, signatures included (what the merchant verified; no secret).
    request_url: Mapped[str | None] = mapped_column(String(2048))
    request_headers: Mapped[str | None] = mapped_column(Text)
