"""Access tokens: issued for a merchant and a product, verified without a database read.

A token is `base64url(payload) "." base64url(HMAC-SHA256(key, payload))` with the payload
`<product>.<merchant_id>.<expires_unix>.<nonce>`: any process holding KASIR_SECRET_KEY can
verify it, so tokens work across processes and machines without shared state.
"""

from __future__ import annotations

import base64
import binascii
import math
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from functools import lru_cache
from typing import Any

from kasir.config import get_settings
from kasir.db import Database
from kasir.errors import InvalidFieldFormat, InvalidMandatoryField, InvalidToken, Unauthorized
from kasir.kit.clock import clock
from kasir.kit.crypto import HmacKey, b64decode_strict, constant_time_equals, derive_key
from kasir.merchants.service import merchant_service
from kasir.snap.signatures import token_string_to_sign, verify_asymmetric

ACCESS_TOKEN_TTL_SECONDS = 900  # interface.md: a token is valid 900 seconds
GRANT_TYPE = "client_credentials"


class Product(StrEnum):
    """Which token path issued a token; a token is accepted only by its own product."""

    PAYMENT = "payment"
    DISBURSEMENT = "disbursement"


_PRODUCT_CODES = {Product.PAYMENT: "p", Product.DISBURSEMENT: "d"}
_PRODUCTS_BY_CODE = {code: product for product, code in _PRODUCT_CODES.items()}


@dataclass(frozen=True, slots=True)
class AccessToken:
    value: str
    merchant_id: str
    product: Product
    expires_at: datetime


@lru_cache(maxsize=8)
def _signing_key(secret_key: str) -> HmacKey:
    return HmacKey(derive_key(secret_key, "kasir/access-token"))


def _sign(payload: bytes, secret_key: str | None = None) -> str:
    key = _signing_key(secret_key or get_settings().resolved_secret_key())
    return _b64url(key.digest(payload))


def _signed_before_rotation(payload: bytes, signature: str) -> bool:
    """Minted under a key now in KASIR_SECRET_KEY_PREVIOUS: still valid until it expires."""
    previous = get_settings().previous_secret_keys()
    return any(constant_time_equals(_sign(payload, key), signature) for key in previous)


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def mint_access_token(merchant_id: str, product: Product) -> AccessToken:
    # Whole seconds, rounded up: a token answered with `expiresIn` 900 is good for at least 900 seconds
    # (truncating left a token minted late in a second 899 and a fraction).
    expires = math.ceil(clock.now().timestamp()) + ACCESS_TOKEN_TTL_SECONDS
    nonce = _b64url(os.urandom(12))  # what secrets.token_urlsafe(12) gives, one call nearer
    payload = f"{_PRODUCT_CODES[product]}.{merchant_id}.{expires}.{nonce}".encode()
    value = f"{_b64url(payload)}.{_sign(payload)}"
    return AccessToken(value, merchant_id, product, datetime.fromtimestamp(expires, UTC))


def read_access_token(value: str, product: Product) -> AccessToken:
    """The token's claims, or InvalidToken when it is forged, expired, or of another product."""
    encoded, dot, signature = value.partition(".")
    if not dot or not encoded or not signature or len(value) > 2048:
        raise InvalidToken()
    try:
        payload = _unb64url(encoded)
    except (binascii.Error, ValueError) as exc:
        raise InvalidToken() from exc
    if not constant_time_equals(_sign(payload), signature) and not _signed_before_rotation(payload, signature):
        raise InvalidToken()
    try:
        product_code, merchant_id, expires_text, _nonce = payload.decode().split(".", 3)
        expires = int(expires_text)
    except ValueError as exc:
        raise InvalidToken() from exc
    if _PRODUCTS_BY_CODE.get(product_code) is not product:
        raise InvalidToken()
    if clock.now().timestamp() >= expires:
        raise InvalidToken()
    return AccessToken(value, merchant_id, product, datetime.fromtimestamp(expires, UTC))


class AccessTokenService:
    async def issue(
        self,
        database: Database,
        *,
        product: Product,
        client_key: str,
        timestamp: str,
        signature: str,
    ) -> AccessToken:
        """interface.md Authentication 1: verify SHA256withRSA over `client_id|X-TIMESTAMP`, then mint."""
        try:
            signature_bytes = b64decode_strict(signature)
        except ValueError as exc:
            raise InvalidFieldFormat("X-SIGNATURE", "must be Base64") from exc
        # A database read only when the process has not seen this client lately.
        signer = await merchant_service.token_signer(database, client_key)
        if signer is None:
            raise Unauthorized("Unknown X-CLIENT-KEY")
        string_to_sign = token_string_to_sign(client_key, timestamp)
        if not verify_asymmetric(signer.public_key_pem, string_to_sign, signature_bytes):
            # A rotated key verifies until its grace period ends (kasir.merchants.service.rotate).
            previous = signer.previous_public_keys()
            if not any([verify_asymmetric(pem, string_to_sign, signature_bytes) for pem in previous]):
                raise Unauthorized("X-SIGNATURE does not verify with the registered public key")
        return mint_access_token(signer.merchant_id, product)


def parse_grant(body: Any) -> dict[str, Any] | None:
    """Check the decoded body of a token request; answer its additionalInfo."""
    if not isinstance(body, dict):
        raise InvalidFieldFormat("body", "must be a JSON object")
    grant_type = body.get("grantType")
    if grant_type is None or grant_type == "":
        raise InvalidMandatoryField("grantType")
    if grant_type != GRANT_TYPE:
        raise InvalidFieldFormat("grantType", f"must be {GRANT_TYPE}")
    additional_info = body.get("additionalInfo")
    if additional_info is not None and not isinstance(additional_info, dict):
        raise InvalidFieldFormat("additionalInfo", "must be an object")
    return additional_info


access_token_service = AccessTokenService()
