"""Disbursement tables (docs/decisions.md §11.3): each merchant's balance and the operator's top-ups. Whole rupiah."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, ForeignKey, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from kasir.db import Base, UTCDateTime


class DisbursementBalance(Base):
    """A merchant's disbursement balance: `available` = `ledger` − `hold`, never below 0."""

    __tablename__ = "disbursement_balance"

    merchant_id: Mapped[str] = mapped_column(String(32), ForeignKey("merchant.id"), primary_key=True)
    ledger: Mapped[int] = mapped_column(BigInteger)
    hold: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())


class DisbursementTopUp(Base):
    """One credit by the operator (the admin API, the CLI, the console); the history shows it as TOP_UP."""

    __tablename__ = "disbursement_top_up"
    __table_args__ = (Index("ix_disbursement_top_up_merchant_created", "merchant_id", "created_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    merchant_id: Mapped[str] = mapped_column(String(32), ForeignKey("merchant.id"))
    amount: Mapped[int] = mapped_column(BigInteger)
    note: Mapped[str] = mapped_column(String(255))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
