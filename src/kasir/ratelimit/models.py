"""Rate-limit counters kept in the database (PostgreSQL: `Database.keeps_counters`).

One row per counter and fixed window: `key` names what is counted (`token:ip:203.0.113.7`),
`window_start` the window (Unix seconds, a multiple of its length), `hits` how many so far.
Rows are purged once their window has ended (`expires_at`, the worker's expiry jobs).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from kasir.db import Base, UTCDateTime


class RateLimitCounter(Base):
    __tablename__ = "rate_limit_counter"
    __table_args__ = (Index("ix_rate_limit_counter_expires_at", "expires_at"),)

    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    window_start: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    hits: Mapped[int] = mapped_column(Integer)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())
