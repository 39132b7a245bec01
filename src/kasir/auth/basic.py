"""`Authorization: Basic` of the wallet and card endpoints (docs/decisions.md §3.4).

    Basic base64(merchant_id:secret)            two-part form
    Basic base64(merchant_id:secret:hash_key)   three-part form: the hash key must match too

Every failure is the same `Unauthorized` (wallet `04`, card `401 UNAUTHORIZED` with field
`authorization`) with a reason that never repeats what was sent. Secrets are compared in
constant time, and an unknown merchant costs the same comparison as a known one. A disabled
merchant is refused like an unknown one. A rotated secret or hash key is still accepted during
its grace period; the caller then carries the hash key it proved (the three-part form), so the
wallet's x-req-signature check uses the key the merchant still signs with.

Every failure is counted (kasir.ratelimit): per source address, and per merchant from that
address once the header names one; while either is locked the answer is 429 before any check.

`basic` is the card charge's scheme; the wallet's (kasir.auth.wallet) proves Basic first with
`basic.authenticate`, then its x-req-signature.
"""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request

from kasir.auth.scheme import Authenticator, FailedAuthentications, source
from kasir.db import Database
from kasir.errors import Unauthorized
from kasir.kit.crypto import b64decode_strict, constant_time_equals
from kasir.kit.ttl_cache import TtlCache
from kasir.merchants.repository import MerchantRow, merchant_repository
from kasir.merchants.service import (
    CredentialKind,
    MerchantSecrets,
    credential_cache_seconds,
    merchant_id_caches,
    merchant_service,
)

# Compared against when the merchant is unknown, so timing does not say whether it exists.
_UNKNOWN_SECRET = "x" * 32


@dataclass(frozen=True, slots=True)
class BasicCaller:
    """The merchant a Basic `Authorization` header proved, with its decrypted secrets."""

    merchant: MerchantRow
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
    if "\x00" in decoded:  # no credential holds one, and PostgreSQL's text cannot: refused before any look-up
        raise Unauthorized("Authorization Basic credentials must not contain NUL characters")
    parts = decoded.split(":")
    if len(parts) not in (2, 3) or not all(parts):
        raise Unauthorized("Authorization Basic credentials must be merchant_id:secret or merchant_id:secret:hash_key")
    return parts[0], parts[1], parts[2] if len(parts) == 3 else None


# merchant_id -> (merchant, decrypted secrets) for KASIR_CREDENTIAL_CACHE_SECONDS. Every wallet and
# card request authenticates: this skips a query and three decryptions on the hot path. Safe to
# hold briefly: the lifecycle (rotation, disabling, a new callback URL) forgets this process's
# entry at once, and other processes' entries end within the cache's seconds.
known_merchants: TtlCache[str, BasicCaller] = TtlCache(credential_cache_seconds)
merchant_id_caches.append(known_merchants)


class BasicAuthenticator(Authenticator[BasicCaller]):
    """`Authorization: Basic`: the merchant whose credentials these are."""

    scheme = "basic"

    def __init__(self) -> None:
        self.rate_limit = FailedAuthentications()

    async def __call__(self, request: Request) -> BasicCaller:
        database, address = source(request)
        return await self.authenticate(database, request.headers.get("authorization"), address=address)

    async def authenticate(self, database: Database, header: str | None, *, address: str) -> BasicCaller:
        """The merchant whose Basic credentials these are (docs/decisions.md §3.4), or Unauthorized; a
        request from `address` (the source address) while it is locked out: AuthenticationLocked (429).

        The database is read only if the merchant is not cached, once for all the requests that
        miss it together, in a read-only unit of work of its own. Called outside any unit of work.
        """
        try:
            merchant_id, secret, hash_key = parse_basic(header)
        except Unauthorized:
            await self.rate_limit.before(database, address)
            await self.rate_limit.failed(database, address)
            raise
        await self.rate_limit.before(database, address, merchant_id)
        try:
            return await _authenticate(database, merchant_id, secret, hash_key)
        except Unauthorized:
            await self.rate_limit.failed(database, address, merchant_id)
            raise


basic = BasicAuthenticator()


async def _authenticate(database: Database, merchant_id: str, secret: str, hash_key: str | None) -> BasicCaller:
    known = known_merchants.get(merchant_id)
    if known is None:
        loaded = await known_merchants.load_once(merchant_id, lambda: _load_caller(database, merchant_id))
        if loaded is None:
            constant_time_equals(secret, _UNKNOWN_SECRET)
            raise Unauthorized("invalid merchant credentials")
        proven = _proven(loaded, secret, hash_key)
        known_merchants.put(merchant_id, proven)  # only proven credentials are remembered
        return proven
    try:
        return _proven(known, secret, hash_key)
    except Unauthorized:
        # A failure against a merchant this process remembers takes as long as one against an unknown id
        # (a look-up): the time of a refusal never tells which ids exist. Only failures pay it.
        await _look_up_no_one(database)
        raise


async def _look_up_no_one(database: Database) -> None:
    async with database.unit_of_work(read_only=True) as session:
        await merchant_repository.get(session, "")
        await merchant_service.secrets_of_no_one(session)


async def _load_caller(database: Database, merchant_id: str) -> BasicCaller | None:
    async with database.unit_of_work(read_only=True) as session:
        merchant = await merchant_repository.get(session, merchant_id)
        if merchant is None or merchant.disabled_at is not None:
            await merchant_service.secrets_of_no_one(session)  # as long as a known merchant's look-up
            return None
        secrets = await merchant_service.secrets_with_grace(session, merchant)
        return BasicCaller(merchant=merchant, secrets=secrets)


def _proven(known: BasicCaller, secret: str, hash_key: str | None) -> BasicCaller:
    secrets = known.secrets
    if not secrets.grace:  # the common case: only the current values
        secret_ok = constant_time_equals(secret, secrets.secret)
        hash_ok = hash_key is None or constant_time_equals(hash_key, secrets.hash_key)
        if not (secret_ok and hash_ok):
            raise Unauthorized("invalid merchant credentials")
        return known
    secret_ok = secrets.matching(CredentialKind.SECRET, secret) is not None
    proven_hash = secrets.hash_key if hash_key is None else secrets.matching(CredentialKind.HASH_KEY, hash_key)
    if not (secret_ok and proven_hash is not None):
        raise Unauthorized("invalid merchant credentials")
    if proven_hash == secrets.hash_key:
        return known
    return BasicCaller(
        known.merchant, MerchantSecrets(secrets.client_secret, secrets.secret, proven_hash, secrets.grace)
    )
