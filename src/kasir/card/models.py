"""Card tables: orders (the charge) and their attempts.

No column ever holds a full card number or a CVN (docs/decisions.md §7): an attempt keeps the
masked number (first 6, last 4), the brand and the expiry.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Boolean, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from kasir.db import Base, UTCDateTime


class CardOrder(Base):
    """One card charge (`data.transactionId` is its id)."""

    __tablename__ = "card_order"
    __table_args__ = (
        UniqueConstraint("merchant_id", "order_id"),
        UniqueConstraint("merchant_id", "external_id"),
        Index("ix_card_order_due", "status", "expires_at"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    merchant_id: Mapped[str] = mapped_column(String(32), ForeignKey("merchant.id"))
    external_id: Mapped[str] = mapped_column(String(64))
    order_id: Mapped[str] = mapped_column(String(64))
    currency: Mapped[str] = mapped_column(String(3))
    amount: Mapped[int] = mapped_column(BigInteger)  # whole rupiah (docs/decisions.md §7)
    payment_method: Mapped[str] = mapped_column(String(16))
    payment_channel: Mapped[str] = mapped_column(String(16))
    payment_mode: Mapped[str] = mapped_column(String(8))
    status: Mapped[str] = mapped_column(String(16))
    tenor: Mapped[str | None] = mapped_column(String(2))
    attempts_made: Mapped[int] = mapped_column(Integer, default=0)
    attempts_failed: Mapped[int] = mapped_column(Integer, default=0)
    details: Mapped[str] = mapped_column(Text)  # items, customer, addresses, options as sent (JSON, no card data)
    return_url: Mapped[str] = mapped_column(String(2048))
    callback_url: Mapped[str | None] = mapped_column(String(2048))  # request's, else the merchant's default
    acq: Mapped[str | None] = mapped_column(String(16))  # acquirer of the last attempt
    response_message: Mapped[str | None] = mapped_column(String(200))  # of the last attempt
    save_card: Mapped[bool] = mapped_column(Boolean, default=False)
    card_token: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
    paid_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # The provider SDK's snake_case dialect (kasir.card.dialect): its x-version ("v3") when the charge
    # came in that dialect (its callbacks then also show payment_mode, tenor and sub_merchant_id),
    # else NULL; and the sub-merchant the request named (`sub-merchant-id`), signed into its callbacks.
    dialect: Mapped[str | None] = mapped_column(String(8))
    sub_merchant_id: Mapped[str | None] = mapped_column(String(64))
    # The payment link this payment belongs to (kasir.links, docs/decisions.md §10.3), else NULL: a link's
    # payment is not found through this room's routes and sends no callback of its own.
    link_id: Mapped[str | None] = mapped_column(String(32), index=True)


class CardAttempt(Base):
    """One try to pay an order with a card (from the API in CLOSE mode or from the page)."""

    __tablename__ = "card_attempt"
    __table_args__ = (UniqueConstraint("card_order_id", "number"),)

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True)
    card_order_id: Mapped[str] = mapped_column(String(32), ForeignKey("card_order.id"), index=True)
    number: Mapped[int] = mapped_column(Integer)  # 1, 2, 3 within the order
    status: Mapped[str] = mapped_column(String(16))
    masked_card: Mapped[str] = mapped_column(String(19))  # first 6, last 4
    card_brand: Mapped[str] = mapped_column(String(16))
    card_exp_month: Mapped[str] = mapped_column(String(2))
    card_exp_year: Mapped[str] = mapped_column(String(4))
    tenor: Mapped[str] = mapped_column(String(2))
    acq: Mapped[str] = mapped_column(String(16))
    response_message: Mapped[str] = mapped_column(String(200))
    # Where the acquirer's challenge waits for the customer (a CHALLENGE attempt): the page sends them back there.
    challenge_url: Mapped[str | None] = mapped_column(String(2048))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    completed_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # What the card inquiry (docs/decisions.md §12.1) tells of the attempt: the holder's name as entered
    # ("" for a stored card's charge, NULL before it was kept), and why the acquirer declined it
    # (kasir.processors DeclineReason), NULL when it did not say or did not decline.
    card_holder_name: Mapped[str | None] = mapped_column(String(64))
    decline_reason: Mapped[str | None] = mapped_column(String(32))


class StoredCard(Base):
    """A card a merchant may charge again by its token (the dialect's `store_token`, the page's saveCard).

    Never the number or the CVN: the masked number, brand and expiry, as on an attempt.
    A token belongs to one merchant; another merchant's charge with it is refused.
    """

    __tablename__ = "card_stored"

    token: Mapped[str] = mapped_column(String(64), primary_key=True)
    merchant_id: Mapped[str] = mapped_column(String(32), ForeignKey("merchant.id"), index=True)
    card_order_id: Mapped[str] = mapped_column(String(32))  # the payment that stored it
    masked_card: Mapped[str] = mapped_column(String(19))
    card_brand: Mapped[str] = mapped_column(String(16))
    card_exp_month: Mapped[str] = mapped_column(String(2))
    card_exp_year: Mapped[str] = mapped_column(String(4))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
