"""Wallet tables: transactions and their refunds (docs/decisions.md §5). Money is integer rupiah (§7)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from kasir.db import Base, UTCDateTime


class WalletTransaction(Base):
    """One wallet payment; `id` is the transaction_id handed to the merchant."""

    __tablename__ = "wallet_transaction"
    __table_args__ = (
        UniqueConstraint("merchant_id", "external_id"),
        Index("ix_wallet_transaction_due", "status", "expires_at"),
        # A card charge looks up the merchant's orderId here (docs/decisions.md §7: unique across both).
        Index("ix_wallet_transaction_merchant_order", "merchant_id", "order_id"),
    )

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    merchant_id: Mapped[str] = mapped_column(String(32), ForeignKey("merchant.id"))
    external_id: Mapped[str] = mapped_column(String(64))
    order_id: Mapped[str] = mapped_column(String(100))
    reference_id: Mapped[str] = mapped_column(String(64))
    payment_channel: Mapped[str] = mapped_column(String(16))
    currency: Mapped[str] = mapped_column(String(3))
    amount: Mapped[int] = mapped_column(BigInteger)  # whole rupiah
    refunded_amount: Mapped[int] = mapped_column(BigInteger, default=0)
    status: Mapped[str] = mapped_column(String(16))
    description: Mapped[str] = mapped_column(String(255))  # payment_details.transaction_description
    callback_url: Mapped[str] = mapped_column(String(2048))
    return_url: Mapped[str | None] = mapped_column(String(2048))
    # customer, items, addresses, wallet details and additional_data as sent (JSON).
    details: Mapped[str] = mapped_column(Text)
    qr_string: Mapped[str | None] = mapped_column(Text)  # QRIS only
    terminal_id: Mapped[str | None] = mapped_column(String(32))  # QRIS only
    failure_reason: Mapped[str | None] = mapped_column(String(255))  # OVO `failed`
    issuer: Mapped[str | None] = mapped_column(String(32))
    retrieval_reference_no: Mapped[str | None] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
    paid_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    voided_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # The payment link this payment belongs to (kasir.links, docs/decisions.md §10.3), else NULL: a link's
    # payment is not found through this room's routes and sends no callback of its own.
    link_id: Mapped[str | None] = mapped_column(String(32), index=True)

    @property
    def refundable_amount(self) -> int:
        return self.amount - self.refunded_amount


class WalletRefund(Base):
    """One (partial) refund; together they are the callback's refund_history."""

    __tablename__ = "wallet_refund"
    __table_args__ = (Index("ix_wallet_refund_transaction_id", "transaction_id", "id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    transaction_id: Mapped[str] = mapped_column(String(64), ForeignKey("wallet_transaction.id"))
    amount: Mapped[int] = mapped_column(BigInteger)
    reason: Mapped[str | None] = mapped_column(String(255))
    refunded_at: Mapped[datetime] = mapped_column(UTCDateTime())
