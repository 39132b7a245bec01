"""Virtual-account tables: the VAs and the payments into them (docs/decisions.md §9). Money is whole rupiah."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Boolean, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from kasir.db import Base, UTCDateTime


class VirtualAccount(Base):
    """One VA; `id` is the transaction_id handed to the merchant."""

    __tablename__ = "virtual_account"
    __table_args__ = (
        UniqueConstraint("merchant_id", "external_id"),
        # A number is unique per bank among the open VAs of all merchants (§9.4): `open_number` holds the
        # number while the VA is open and NULL once it closes, and NULLs never collide.
        UniqueConstraint("bank", "open_number"),
        Index("ix_virtual_account_due", "open_until"),
        Index("ix_virtual_account_created", "created_at", "id"),
        Index("ix_virtual_account_merchant_created", "merchant_id", "created_at", "id"),
        Index("ix_virtual_account_va_number", "va_number"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    merchant_id: Mapped[str] = mapped_column(String(32), ForeignKey("merchant.id"))
    sub_merchant_id: Mapped[str | None] = mapped_column(String(64))
    external_id: Mapped[str] = mapped_column(String(64))
    order_id: Mapped[str] = mapped_column(String(25))
    payment_channel: Mapped[str] = mapped_column(String(16))  # as sent, in capitals (an alias stays an alias)
    bank: Mapped[str] = mapped_column(String(16))  # the channel's bank (BCA for BCA-MCP)
    va_number: Mapped[str] = mapped_column(String(32))
    open_number: Mapped[str | None] = mapped_column(String(32))
    payment_system: Mapped[str] = mapped_column(String(8))  # CLOSED, OPEN, PARTIAL
    is_multi_use: Mapped[bool] = mapped_column(Boolean)
    amount: Mapped[int] = mapped_column(BigInteger)  # whole rupiah; OPEN: as sent, never enforced
    total_paid_amount: Mapped[int] = mapped_column(BigInteger, default=0)
    status: Mapped[str] = mapped_column(String(16))
    billing_name: Mapped[str] = mapped_column(String(100))
    description: Mapped[str] = mapped_column(String(100))  # payment_details.transaction_description
    is_customer_paying_fee: Mapped[bool] = mapped_column(Boolean, default=False)
    callback_url: Mapped[str] = mapped_column(String(2048))
    # customer, items, addresses and additional_data as sent (JSON).
    details: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())
    # expires_at while the VA is open, NULL once it closes: the expiry job reads only the open ones.
    open_until: Mapped[datetime | None] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
    # The payment link this payment belongs to (kasir.links, docs/decisions.md §10.3), else NULL: a link's
    # payment is not found through this room's routes and sends no callback of its own.
    link_id: Mapped[str | None] = mapped_column(String(32), index=True)


class VaPayment(Base):
    """One payment into a VA: a dummy payment (staging) or the issuer's notification (production)."""

    __tablename__ = "va_payment"
    __table_args__ = (
        Index("ix_va_payment_va", "va_id", "id"),
        # The issuer's reference of a payment: a notification repeated changes nothing.
        UniqueConstraint("va_id", "bank_reference"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    va_id: Mapped[str] = mapped_column(String(32), ForeignKey("virtual_account.id"))
    reference_id: Mapped[str] = mapped_column(String(32))
    bank_reference: Mapped[str | None] = mapped_column(String(64))
    amount: Mapped[int] = mapped_column(BigInteger)
    paid_at: Mapped[datetime] = mapped_column(UTCDateTime())
