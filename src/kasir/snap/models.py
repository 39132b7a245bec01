"""The SNAP edge's own table: the X-EXTERNAL-ID each merchant used today."""

from __future__ import annotations

from datetime import date, datetime

from sqlalchemy import Date, ForeignKey, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from kasir.db import Base, UTCDateTime


class SnapExternalId(Base):
    """docs/decisions.md §3.2: X-EXTERNAL-ID is unique per merchant per calendar day (Asia/Jakarta), one namespace
    for every SNAP product of the merchant (§11.2). The table keeps the name it had when BNPL was the only one."""

    __tablename__ = "bnpl_external_id"
    __table_args__ = (UniqueConstraint("merchant_id", "day", "external_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    merchant_id: Mapped[str] = mapped_column(String(32), ForeignKey("merchant.id"))
    day: Mapped[date] = mapped_column(Date())
    external_id: Mapped[str] = mapped_column(String(36))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
