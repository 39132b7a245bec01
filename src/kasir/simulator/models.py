"""The simulator's one table: the wrong one-time passwords of a 3-D Secure challenge.

A real issuer's challenge page lets the customer type the code again a few times before it fails
the authentication; the staging issuer does too (kasir.simulator.cards.OTP_TRIES), so it counts the
wrong codes of each attempt, one row per code (an insert, no read-modify-write). Never the code.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from kasir.db import Base, UTCDateTime


class SimulatorWrongOtp(Base):
    __tablename__ = "simulator_wrong_otp"
    __table_args__ = (Index("ix_simulator_wrong_otp_attempt", "card_order_id", "attempt"),)

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True)
    card_order_id: Mapped[str] = mapped_column(String(32))
    attempt: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
