"""Payment-link tables (docs/decisions.md §10): the link, and each method the customer chose on its page.

The inner card order, wallet transaction or VA a choice makes is a row of its own room that carries
the link's id (`link_id`, migration 0024): `link_attempt` says which row, by method, so the link's page,
its states and the console read the attempts without asking each room.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Boolean, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from kasir.db import Base, UTCDateTime
from kasir.payments.external_ids import declare


class PaymentLink(Base):
    """One link; `id` is the transaction_id handed to the merchant (`PPL` + 20 characters)."""

    __tablename__ = "payment_link"
    __table_args__ = (
        UniqueConstraint("merchant_id", "external_id"),
        Index("ix_payment_link_due", "open_until"),
        Index("ix_payment_link_created", "created_at", "id"),
        Index("ix_payment_link_merchant_created", "merchant_id", "created_at", "id"),
        Index("ix_payment_link_external", "external_id"),
        Index("ix_payment_link_order", "order_id"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    merchant_id: Mapped[str] = mapped_column(String(32), ForeignKey("merchant.id"))
    sub_merchant_id: Mapped[str | None] = mapped_column(String(64))
    external_id: Mapped[str] = mapped_column(String(255))
    order_id: Mapped[str] = mapped_column(String(25))
    amount: Mapped[int] = mapped_column(BigInteger)  # whole rupiah
    description: Mapped[str] = mapped_column(String(255))
    status: Mapped[str] = mapped_column(String(16))
    is_customer_paying_fee: Mapped[bool] = mapped_column(Boolean, default=False)
    save_card: Mapped[bool] = mapped_column(Boolean, default=False)
    callback_url: Mapped[str] = mapped_column(String(2048))
    success_redirect_url: Mapped[str | None] = mapped_column(String(2048))
    failed_redirect_url: Mapped[str | None] = mapped_column(String(2048))
    # selected_channels as `[{channel, acq}]` in upper case, acq defaulted (§10.5), in request order (JSON).
    channels: Mapped[str] = mapped_column(Text)
    # customer, items, addresses and additional_data as sent (JSON).
    details: Mapped[str] = mapped_column(Text)
    attempts_failed: Mapped[int] = mapped_column(Integer, default=0)
    # The attempt the last callback reported (§10.5: SUCCESS the paying one, FAILED the failed one,
    # EXPIRED the last one); NULL before any.
    payment_method: Mapped[str | None] = mapped_column(String(32))
    payment_channel: Mapped[str | None] = mapped_column(String(16))
    acq: Mapped[str | None] = mapped_column(String(16))
    response_message: Mapped[str | None] = mapped_column(String(255))
    card_token: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())
    # expires_at while PENDING, NULL once the link ends: the expiry job reads only the open ones.
    open_until: Mapped[datetime | None] = mapped_column(UTCDateTime())
    paid_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())


# The wallet, card and VA rooms refuse an external_id a link holds (they may not import this room).
declare(PaymentLink)


class LinkAttempt(Base):
    """One method the customer chose: the inner row it made (`inner_id`, in its room's table)."""

    __tablename__ = "link_attempt"
    __table_args__ = (
        UniqueConstraint("link_id", "number"),
        Index("ix_link_attempt_inner", "inner_id"),
    )

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True)
    link_id: Mapped[str] = mapped_column(String(32), ForeignKey("payment_link.id"))
    number: Mapped[int] = mapped_column(Integer)  # 1, 2, … within the link
    method: Mapped[str] = mapped_column(String(16))  # CARD, WALLET, QRIS, VA
    channel: Mapped[str] = mapped_column(String(16))  # the entry's channel (CARD, DANA, QRIS, VA)
    acq: Mapped[str] = mapped_column(String(16))  # the entry's acq, defaulted (BCACC, DANA, BCA-MCP)
    inner_id: Mapped[str] = mapped_column(String(64))  # the card order's, wallet transaction's or VA's id
    status: Mapped[str] = mapped_column(String(16))  # OPEN, PAID, FAILED, CLOSED
    reason: Mapped[str | None] = mapped_column(String(255))  # why it failed
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
