"""Console users and their sessions. Separate from merchants' API credentials (docs/decisions.md §2)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from sqlalchemy import ForeignKey, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from kasir.db import Base, UTCDateTime


class Role(StrEnum):
    OPERATOR = "operator"  # sees and acts on every merchant
    MERCHANT = "merchant"  # sees and acts on its own merchant only
    # A merchant user who also manages its own merchant's console users (issue 41: merchants add their own staff).
    MERCHANT_ADMIN = "merchant_admin"

    @property
    def of_a_merchant(self) -> bool:
        return self is not Role.OPERATOR


class ConsoleUser(Base):
    __tablename__ = "console_user"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    email: Mapped[str] = mapped_column(String(254), unique=True)  # stored lower-cased
    role: Mapped[str] = mapped_column(String(16))
    merchant_id: Mapped[str | None] = mapped_column(String(32), ForeignKey("merchant.id"))
    password_hash: Mapped[str] = mapped_column(String(255))  # Argon2id, argon2-cffi's encoded form
    failed_sign_ins: Mapped[int] = mapped_column(Integer, default=0)  # in a row; a good sign-in resets it
    locked_until: Mapped[datetime | None] = mapped_column(UTCDateTime())
    disabled_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
    last_sign_in_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class ConsoleSession(Base):
    """A signed-in browser. Stored, so any server process accepts it and sign-out ends it everywhere.

    `id` is the SHA-256 of the cookie's random value: the table alone cannot sign anyone in.
    """

    __tablename__ = "console_session"
    __table_args__ = (Index("ix_console_session_user", "user_id"),)

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("console_user.id"))
    csrf_token: Mapped[str] = mapped_column(String(64))
    ip: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    last_seen_at: Mapped[datetime] = mapped_column(UTCDateTime())
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
