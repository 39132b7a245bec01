from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from kasir.db import Base, UTCDateTime


class Merchant(Base):
    """A merchant and its credentials (docs/decisions.md §2). Secrets are stored encrypted."""

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
    # Set while the merchant is disabled: its credentials and tokens are refused (401);
    # its pending callbacks still go out.
    disabled_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # The merchant's disbursement account (docs/decisions.md §11.2): 16 digits, made at creation (migration 0022
    # gave the merchants made before one each).
    account_no: Mapped[str | None] = mapped_column(String(16), unique=True)


class MerchantCredentialGrace(Base):
    """A replaced credential that is still accepted until `expires_at` (a rotation's grace period).

    `value` is sealed like the merchant's own secrets (SecretBox) for the client secret, the Basic
    secret and the hash key; for the RSA public key it is the PEM (not a secret).
    """

    __tablename__ = "merchant_credential_grace"
    __table_args__ = (Index("ix_merchant_credential_grace_merchant", "merchant_id", "kind"),)

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True)
    merchant_id: Mapped[str] = mapped_column(String(32), ForeignKey("merchant.id"))
    kind: Mapped[str] = mapped_column(String(16))  # client_secret | secret | hash_key | public_key
    value: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())
    # The merchant verifies callbacks with the new value now: they are no longer signed with this one
    # (docs/decisions.md §8; a hash key or client secret only).
    confirmed_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class SubMerchant(Base):
    """A sub-merchant id a merchant may name in `sub-merchant-id` (the card dialect, kasir.card.dialect)."""

    __tablename__ = "sub_merchant"
    __table_args__ = (UniqueConstraint("merchant_id", "sub_merchant_id"),)

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True)
    merchant_id: Mapped[str] = mapped_column(String(32), ForeignKey("merchant.id"))
    sub_merchant_id: Mapped[str] = mapped_column(String(64))
    name: Mapped[str | None] = mapped_column(String(100))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
