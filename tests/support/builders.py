"""Builders: make what a test needs, explicitly (`await make_merchant(app)`)."""

from __future__ import annotations

import itertools
import uuid
from dataclasses import dataclass
from functools import lru_cache

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from fastapi import FastAPI

from kasir.merchants.service import MerchantCredentials, merchant_service

_counter = itertools.count()


@lru_cache(maxsize=8)
def rsa_key(slot: int = 0) -> rsa.RSAPrivateKey:
    """A few RSA keys per test session (generating one costs ~100 ms)."""
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def public_pem(key: rsa.RSAPrivateKey) -> str:
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


@dataclass
class TestMerchant:
    credentials: MerchantCredentials
    private_key: rsa.RSAPrivateKey

    @property
    def id(self) -> str:
        return self.credentials.merchant_id

    @property
    def client_id(self) -> str:
        return self.credentials.client_id


def unique_name(prefix: str = "merchant") -> str:
    return f"{prefix}-{next(_counter)}-{uuid.uuid4().hex[:8]}"


async def make_merchant(app: FastAPI, *, callback_url: str | None = None, key_slot: int = 0) -> TestMerchant:
    key = rsa_key(key_slot)
    async with app.state.database.unit_of_work() as session:
        _merchant, credentials = await merchant_service.create(
            session, name=unique_name(), public_key=public_pem(key), callback_url=callback_url
        )
    return TestMerchant(credentials, key)
