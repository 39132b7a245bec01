from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field


class MerchantCreate(BaseModel):
    name: str = Field(min_length=1, max_length=100)
    public_key: str = Field(description="PEM `BEGIN PUBLIC KEY`, RSA 2048-bit")
    callback_url: str | None = None


class MerchantKey(BaseModel):
    public_key: str = Field(description="PEM `BEGIN PUBLIC KEY`, RSA 2048-bit")
    grace_seconds: int = Field(0, ge=0, description="The old key still verifies this long (at most a week)")


class MerchantCallbackUrl(BaseModel):
    callback_url: str | None = Field(description="The new default callback URL; null or empty removes it")


class MerchantRotate(BaseModel):
    kind: str = Field(description="client_secret | secret | hash_key | public_key")
    grace_seconds: int = Field(0, ge=0, description="The old value is still accepted this long (at most a week)")
    public_key: str | None = Field(None, description="The new PEM public key (kind public_key only)")


class MerchantRotated(BaseModel):
    """Shown once: the new secret (a public key's SHA-256 for kind public_key)."""

    merchant_id: str
    kind: str
    new_value: str
    old_accepted_until: datetime | None


class MerchantConfirmSwitch(BaseModel):
    kind: str = Field(
        description="hash_key | client_secret: the rotated credential the merchant verifies callbacks with now"
    )


class MerchantSwitchConfirmed(BaseModel):
    """From now on the merchant's callbacks are signed with its current value of `kind`."""

    merchant_id: str
    kind: str
    confirmed_at: datetime


class MerchantView(BaseModel):
    merchant_id: str
    name: str
    client_id: str
    callback_url: str | None
    public_key_sha256: str
    created_at: datetime
    updated_at: datetime
    disabled: bool = False
    account_no: str | None = Field(None, description="The disbursement account: 16 digits (decisions §11.2)")


class MerchantCreated(MerchantView):
    """Shown once: the secrets are not readable again through the API."""

    client_secret: str
    secret: str
    hash_key: str


class MerchantList(BaseModel):
    merchants: list[MerchantView]


class SubMerchantCreate(BaseModel):
    sub_merchant_id: str = Field(min_length=1, max_length=64, description="letters, digits, - _ .")
    name: str | None = Field(None, max_length=100)


class SubMerchantView(BaseModel):
    sub_merchant_id: str
    name: str | None
    created_at: datetime


class SubMerchantList(BaseModel):
    merchant_id: str
    sub_merchants: list[SubMerchantView]
