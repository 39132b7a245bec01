"""The audit log: one row per action that changed something, from the console, the admin API or the CLI.

Append-only: the repository has no update or delete, and on PostgreSQL a trigger refuses both.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from kasir.db import Base, UTCDateTime


class AuditEvent(Base):
    __tablename__ = "audit_event"
    __table_args__ = (
        Index("ix_audit_event_at", "at", "id"),
        Index("ix_audit_event_merchant", "merchant_id", "at"),
    )

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime())
    actor: Mapped[str] = mapped_column(String(320))  # console:<email>, admin-api, cli:<os user>
    channel: Mapped[str] = mapped_column(String(16))  # console | admin-api | cli
    action: Mapped[str] = mapped_column(String(64))  # merchant.disable, user.create, callback.replay, ...
    target_type: Mapped[str] = mapped_column(String(32))
    target_id: Mapped[str] = mapped_column(String(128))
    merchant_id: Mapped[str | None] = mapped_column(String(32))
    ip: Mapped[str | None] = mapped_column(String(64))
    before: Mapped[str | None] = mapped_column(Text)  # JSON, secrets never (only fingerprints)
    after: Mapped[str | None] = mapped_column(Text)
