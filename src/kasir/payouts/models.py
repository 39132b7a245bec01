"""Disbursement tables (docs/decisions.md §11.3, §11.6): each merchant's balance, the operator's top-ups and the
transfers. Whole rupiah."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, ForeignKey, Index, Integer, String, Text, UniqueConstraint
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


class PayoutTransfer(Base):
    """One transfer (docs/decisions.md §11.6): `id` is its `referenceNo` (`DSB` + 20). Whole rupiah.

    `held` is what the transfer holds of the balance now: its amount from acceptance (`01`) until it ends
    (`00` debits the ledger, `05`/`06` drop it), 0 after. `next_check_at` is when the worker next asks the rail
    (`status`) about a transfer not final yet; NULL once it is final.
    """

    __tablename__ = "payout_transfer"
    __table_args__ = (
        # §11.6: partnerReferenceNo unique per merchant among accepted transfers, forever.
        UniqueConstraint("merchant_id", "partner_reference_no"),
        Index("ix_payout_transfer_merchant_created", "merchant_id", "created_at", "id"),
        Index("ix_payout_transfer_next_check", "next_check_at"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    merchant_id: Mapped[str] = mapped_column(String(32), ForeignKey("merchant.id"))
    partner_reference_no: Mapped[str] = mapped_column(String(64))
    external_id: Mapped[str] = mapped_column(String(36))  # the accepting request's X-EXTERNAL-ID
    amount: Mapped[int] = mapped_column(BigInteger)
    currency: Mapped[str] = mapped_column(String(3))
    held: Mapped[int] = mapped_column(BigInteger)
    beneficiary_account_no: Mapped[str] = mapped_column(String(34))
    beneficiary_account_name: Mapped[str] = mapped_column(String(100))
    beneficiary_bank_code: Mapped[str] = mapped_column(String(7))  # as sent (3 or 7 digits, or an e-wallet)
    bank: Mapped[str] = mapped_column(String(16))  # the bank's 3-digit code or the e-wallet: the rail's channel
    beneficiary_bank_name: Mapped[str] = mapped_column(String(50))
    source_account_no: Mapped[str] = mapped_column(String(16))
    fee_type: Mapped[str] = mapped_column(String(3))
    status: Mapped[str] = mapped_column(String(2))
    reason: Mapped[str | None] = mapped_column(String(255))
    rail: Mapped[str] = mapped_column(String(64))  # the processor's name
    rail_reference: Mapped[str | None] = mapped_column(String(64))
    callback_url: Mapped[str | None] = mapped_column(String(2048))
    transaction_date: Mapped[str | None] = mapped_column(String(40))  # the request's, as sent
    remark: Mapped[str | None] = mapped_column(String(255))  # additionalInfo.remark
    # The optional fields as sent (JSON): beneficiaryAddress, beneficiaryEmail, customerReference,
    # originatorInfos, additionalInfo.
    details: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())  # into 00, 05 or 06
    refunded_at: Mapped[datetime | None] = mapped_column(UTCDateTime())  # into 04
    next_check_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # The accepting request's X-Idempotency-Key (scope and key), or NULL: whoever records the rail's first answer
    # (the request, or the worker after a crash) stores the key's answer too.
    key_scope: Mapped[str | None] = mapped_column(String(64))
    idempotency_key: Mapped[str | None] = mapped_column(String(255))
