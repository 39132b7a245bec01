from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field


class MerchantCreate(BaseModel):
    name: str = Field(min_length=1, max_length=100)
    public_key: str = Field(description="PEM `BEGIN PUBLIC KEY`, RSA 2048-bit")
    callback_url: str | None = None


class MerchantKey(BaseModel):
    public_key: str = Field(description="PEM `BEGIN PUBLIC KEY`, RSA 2048-bit")


class MerchantView(BaseModel):
    merchant_id: str
    name: str
    client_id: str
    callback_url: str | None
    public_key_sha256: str
    created_at: datetime
    updated_at: datetime


class MerchantCreated(MerchantView):
    """Shown once: the secrets are not readable again through the API."""

    client_secret: str
    secret: str
    hash_key: str


class MerchantList(BaseModel):
    merchants: list[MerchantView]
