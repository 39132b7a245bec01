"""The idempotency keys of every route that takes `X-Idempotency-Key` (docs/decisions.md §7, for all of them).

A row is written by the first request with its key, in that request's own unit of work, and
committed with the request's answer: a committed row holds the answer to replay, except while
the request's processor is being asked (kasir.processors.calls), when its retries wait. The
request is remembered only as a keyed hash of its raw body (bodies hold card data).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from kasir.db import Base, UTCDateTime


class IdempotencyKey(Base):
    __tablename__ = "idempotency_key"
    __table_args__ = (
        UniqueConstraint("merchant_id", "scope", "key"),
        Index("ix_idempotency_key_expires_at", "expires_at"),
    )

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True)
    merchant_id: Mapped[str] = mapped_column(String(32), ForeignKey("merchant.id"))
    scope: Mapped[str] = mapped_column(String(64))  # method and route: "POST /card-v2/v1/charge"
    key: Mapped[str] = mapped_column(String(255))
    request_hash: Mapped[str] = mapped_column(String(64))
    # Empty inside the unit of work of the key's first request, and while its processor is asked.
    response_status: Mapped[int | None] = mapped_column(Integer)
    response_headers: Mapped[str | None] = mapped_column(Text)  # JSON object: the headers that belong to the answer
    response_body: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())
