"""Processor calls in flight: what Kasir asked a processor and has not recorded the answer of yet.

A row is written in the unit of work that decides to ask (kasir.processors.calls), and deleted
in the unit that records the answer. One survives only when the process stopped in between:
the worker asks again and finishes it. At most one per payment: a refund asked while a void of
the same payment is at the issuer is refused, never sent.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from kasir.db import Base, UTCDateTime


class ProcessorCall(Base):
    __tablename__ = "processor_call"
    __table_args__ = (
        UniqueConstraint("product", "reference"),
        Index("ix_processor_call_started_at", "started_at"),
    )

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True)
    product: Mapped[str] = mapped_column(String(8))
    reference: Mapped[str] = mapped_column(String(64))  # Kasir's transaction id
    action: Mapped[str] = mapped_column(String(32))  # "card.charge", "wallet.refund", "wallet.void"
    details: Mapped[str] = mapped_column(Text)  # JSON: what asking again needs (never card data)
    # The request's X-Idempotency-Key, answered when the call is finished (by the request or the worker).
    key_merchant_id: Mapped[str | None] = mapped_column(String(32))
    key_scope: Mapped[str | None] = mapped_column(String(64))
    key: Mapped[str | None] = mapped_column(String(255))
    started_at: Mapped[datetime] = mapped_column(UTCDateTime())
