from __future__ import annotations

from datetime import datetime

from sqlalchemy import String, Text
from sqlalchemy.orm import Mapped, mapped_column

from kasir.db import Base, UTCDateTime


class Merchant(Base):
    """A merchant and its credentials (decisions.md §2). Secrets are stored encrypted."""

    __tablename__ = "merchant"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)  # merchant_id: Basic user, X-PARTNER-ID
    name: Mapped[str] = mapped_column(String(100), unique=True)
    client_id: Mapped[str] = mapped_column(String(64), unique=True)  # X-CLIENT-KEY
    client_secret_encrypted: Mapped[str] = mapped_column(Text)
    secret_encrypted: Mapped[str] = mapped_column(Text)
    hash_key_encrypted: Mapped[str] = mapped_column(Text)
    public_key_pem: Mapped[str] = mapped_column(Text)
    callback_url: Mapped[str | None] = mapped_column(String(2048))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
