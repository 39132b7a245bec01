"""`Authorization: Basic` of the wallet and card endpoints (decisions.md §3.4).

    Basic base64(merchant_id:secret)            two-part form
    Basic base64(merchant_id:secret:hash_key)   three-part form: the hash key must match too

Every failure is the same `Unauthorized` (wallet `04`, card `401 UNAUTHORIZED` with field
`authorization`) with a reason that never repeats what was sent. Secrets are compared in
constant time, and an unknown merchant costs the same comparison as a known one.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from kasir.errors import Unauthorized
from kasir.kit.crypto import b64decode_strict, constant_time_equals
from kasir.merchants.models import Merchant
from kasir.merchants.repository import merchant_repository
from kasir.merchants.service import MerchantSecrets, merchant_service

# Compared against when the merchant is unknown, so timing does not say whether it exists.
_UNKNOWN_SECRET = "x" * 32


@dataclass(frozen=True, slots=True)
class BasicCaller:
    """The merchant a Basic `Authorization` header proved, with its decrypted secrets."""

    merchant: Merchant
    secrets: MerchantSecrets


def parse_basic(header: str | None) -> tuple[str, str, str | None]:
    """(merchant_id, secret, hash_key or None), or Unauthorized saying what is wrong with the header's form."""
    if header is None or not header.strip():
        raise Unauthorized("Authorization header is required (Basic)")
    scheme, _, encoded = header.strip().partition(" ")
    if scheme.lower() != "basic" or not encoded.strip():
        raise Unauthorized("Authorization must be Basic base64(merchant_id:secret[:hash_key])")
    try:
        decoded = b64decode_strict(encoded.strip()).decode("utf-8")
    except (ValueError, UnicodeDecodeError) as exc:
        raise Unauthorized("Authorization Basic credentials are not valid Base64") from exc
    parts = decoded.split(":")
    if len(parts) not in (2, 3) or not all(parts):
        raise Unauthorized("Authorization Basic credentials must be merchant_id:secret or merchant_id:secret:hash_key")
    return parts[0], parts[1], parts[2] if len(parts) == 3 else None


async def authenticate_basic(session: AsyncSession, header: str | None) -> BasicCaller:
    merchant_id, secret, hash_key = parse_basic(header)
    merchant = await merchant_repository.get(session, merchant_id)
    if merchant is None:
        constant_time_equals(secret, _UNKNOWN_SECRET)
        raise Unauthorized("invalid merchant credentials")
    secrets = merchant_service.secrets(merchant)
    secret_ok = constant_time_equals(secret, secrets.secret)
    hash_ok = hash_key is None or constant_time_equals(hash_key, secrets.hash_key)
    if not (secret_ok and hash_ok):
        raise Unauthorized("invalid merchant credentials")
    return BasicCaller(merchant=merchant, secrets=secrets)
