"""BNPL tables: transactions, the X-EXTERNAL-ID ledger, per-merchant pricing."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from sqlalchemy import BigInteger, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from kasir.db import Base, UTCDateTime


class BnplTransaction(Base):
    """One QR checkout (docs/decisions.md §6); `id` is the referenceNo handed to the merchant."""

    __tablename__ = "bnpl_transaction"
    __table_args__ = (
        UniqueConstraint("merchant_id", "partner_reference_no"),
        Index("ix_bnpl_transaction_due", "status", "expires_at"),
    )

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    merchant_id: Mapped[str] = mapped_column(String(32), ForeignKey("merchant.id"))
    partner_reference_no: Mapped[str] = mapped_column(String(64))
    # Integer cents: exact on SQLite (no native decimal) and PostgreSQL alike.
    amount_cents: Mapped[int] = mapped_column(BigInteger)
    currency: Mapped[str] = mapped_column(String(3))
    status: Mapped[str] = mapped_column(String(2))
    status_desc: Mapped[str] = mapped_column(String(50))
    callback_url: Mapped[str] = mapped_column(String(2048))
    channel_id: Mapped[str] = mapped_column(String(5))
    details: Mapped[str] = mapped_column(Text)  # items, customer, sellers as sent (JSON)
    tenure: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())  # validityPeriod
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
    paid_at: Mapped[datetime | None] = mapped_column(UTCDateTime())

    @property
    def amount(self) -> Decimal:
        return amount_of(self.amount_cents)

    @amount.setter
    def amount(self, value: Decimal) -> None:
        self.amount_cents = cents_of(value)


def cents_of(amount: Decimal) -> int:
    """`amount_cents` of an amount (the column holds integer cents)."""
    return int((amount * 100).to_integral_exact())


def amount_of(cents: int) -> Decimal:
    """The amount of `amount_cents`, with two decimals."""
    return (Decimal(cents) / 100).quantize(Decimal("0.01"))


class BnplPricing(Base):
    """A merchant's own pricing table (JSON list of plans); without a row the shipped default applies."""

    __tablename__ = "bnpl_pricing"

    merchant_id: Mapped[str] = mapped_column(String(32), ForeignKey("merchant.id"), primary_key=True)
    plans: Mapped[str | None] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
