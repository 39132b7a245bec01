"""SNAP transaction security (docs/decisions.md §3.2): the BNPL routes' schemes, and the disbursement routes' one
(§11.2: `snap_disbursement`, symmetric only, over a disbursement token).

`snap_signature` reads the raw body (it is signed byte for byte) and checks, in order, each
failure with its own SNAP case (the route adds its service code), before any unit of work opens:

    Content-Type missing / not JSON            400xx02 / 400xx00
    X-TIMESTAMP, X-SIGNATURE, X-PARTNER-ID,
    X-EXTERNAL-ID, CHANNEL-ID missing          400xx02 Invalid Mandatory Field {header}
    X-TIMESTAMP not ISO 8601 with offset       400xx01
    X-TIMESTAMP outside the allowed skew       401xx00
    X-EXTERNAL-ID not numeric / over 36        400xx01
    CHANNEL-ID over 5                          400xx01
    Authorization not a valid payment token    401xx01 Invalid Token (B2B)
      (disbursement routes: disbursement token)
    X-PARTNER-ID not the token's merchant      401xx00
    X-PARTNER-ID unknown (or disabled)         401xx00
    X-SIGNATURE does not verify                401xx00
    X-EXTERNAL-ID already used today           409xx00 (claim_external_id, in the route's unit)

Every 401 but the X-TIMESTAMP's is a failed authentication (kasir.ratelimit): counted per source
address and per X-PARTNER-ID from that address, and refused with 429xx00 while locked.

Symmetric (`snap_symmetric`) when `Authorization: Bearer` is present (HMAC-SHA512 with the client
secret), asymmetric (`snap_asymmetric`: SHA256withRSA with the merchant's public key) when it is
absent. What they read of the merchant is read in read-only units of their own.
"""

from __future__ import annotations

import re
from abc import abstractmethod
from dataclasses import dataclass
from functools import lru_cache

from fastapi import Request

from kasir.auth.access_token import bearer_token
from kasir.auth.scheme import Authenticator, FailedAuthentications, OneOf, source
from kasir.config import get_settings
from kasir.db import Database, Session
from kasir.errors import Conflict, InvalidFieldFormat, InvalidToken, Unauthorized
from kasir.kit.clock import clock
from kasir.kit.crypto import SecretBox, b64decode_strict
from kasir.kit.ttl_cache import TtlCache
from kasir.merchants.repository import SnapMerchant, merchant_repository
from kasir.merchants.service import CredentialKind, credential_cache_seconds, merchant_id_caches, secret_box
from kasir.snap.headers import StaleTimestamp, check_timestamp, require_headers, require_json_content_type
from kasir.snap.repository import snap_repository
from kasir.snap.signatures import (
    asymmetric_string_to_sign,
    symmetric_string_to_sign,
    verify_asymmetric,
    verify_symmetric,
)
from kasir.tokens.service import Product, read_access_token

SNAP_HEADERS = ("X-TIMESTAMP", "X-SIGNATURE", "X-PARTNER-ID", "X-EXTERNAL-ID", "CHANNEL-ID")
_EXTERNAL_ID = re.compile(r"^[0-9]{1,36}$")
CHANNEL_ID_MAX = 5
# The merchant a symmetric signature verified for, by its id (the request scope's key).
_MERCHANT = "kasir.snap_merchant"


class ExternalIdReused(Conflict):
    def __init__(self) -> None:
        super().__init__("Conflict", field="X-EXTERNAL-ID")


@dataclass(frozen=True, slots=True)
class SnapCaller:
    """A verified SNAP request: who sent it, and the exact bytes it signed."""

    merchant_id: str
    external_id: str
    channel_id: str
    body: bytes
    symmetric: bool


def signed_path(request: Request) -> str:
    """PATH as docs/decisions.md §3.2 defines it: relative to the host, with its query string."""
    raw = request.scope.get("raw_path")
    path = raw.decode("latin-1") if isinstance(raw, bytes | bytearray) and raw else request.url.path
    query = request.scope.get("query_string", b"")
    return f"{path}?{query.decode('latin-1')}" if query else path


class SnapAuthenticator(Authenticator[SnapCaller]):
    """The checks both SNAP schemes share (headers, timestamp, the lockout); `verify` is the signature's."""

    symmetric: bool

    def __init__(self) -> None:
        self.rate_limit = FailedAuthentications()

    async def __call__(self, request: Request) -> SnapCaller:
        database, address = source(request)
        partner_id = (request.headers.get("x-partner-id") or "").strip() or None
        await self.rate_limit.before(database, address, partner_id)
        try:
            return await self._verified(request, database)
        except StaleTimestamp:
            raise  # a clock to fix, not a failed proof of identity
        except Unauthorized:
            await self.rate_limit.failed(database, address, partner_id)
            raise

    async def _verified(self, request: Request, database: Database) -> SnapCaller:
        headers = request.headers
        require_json_content_type(headers)
        timestamp, signature, partner_id, external_id, channel_id = require_headers(headers, *SNAP_HEADERS)
        check_timestamp(timestamp, get_settings().clock_skew_seconds)
        if not _EXTERNAL_ID.match(external_id):
            raise InvalidFieldFormat("X-EXTERNAL-ID", "must be numeric, at most 36 digits")
        if len(channel_id) > CHANNEL_ID_MAX:
            raise InvalidFieldFormat("CHANNEL-ID", f"must be at most {CHANNEL_ID_MAX} characters")
        body = await request.body()
        signed = SignedRequest(request.method, signed_path(request), body, timestamp, signature, partner_id)
        if not await self.verify(request, database, signed):
            raise Unauthorized("Invalid signature")
        merchant_id = request.scope.get(_MERCHANT, partner_id)
        return SnapCaller(merchant_id, external_id, channel_id, body, symmetric=self.symmetric)

    @abstractmethod
    async def verify(self, request: Request, database: Database, signed: SignedRequest) -> bool:
        """Whether the request's signature verifies (Unauthorized for what is wrong before it)."""


@dataclass(frozen=True, slots=True)
class SignedRequest:
    method: str
    path: str
    body: bytes
    timestamp: str
    signature: str
    partner_id: str


class SnapSymmetricAuthenticator(SnapAuthenticator):
    """HMAC-SHA512 with the client secret, over the access token (of the payment product) too."""

    scheme = "snap symmetric"
    symmetric = True
    product = Product.PAYMENT

    async def verify(self, request: Request, database: Database, signed: SignedRequest) -> bool:
        token_value = bearer_token(request)  # InvalidToken when Authorization is not `Bearer <value>`
        if token_value is None:
            raise InvalidToken()
        token = read_access_token(token_value, self.product)
        merchant = await self.merchant_of(database, token.merchant_id, signed.partner_id)
        request.scope[_MERCHANT] = merchant.id  # X-PARTNER-ID may be the client_id: the caller is the merchant
        string_to_sign = symmetric_string_to_sign(
            signed.method, signed.path, token_value, signed.body, signed.timestamp
        )
        client_secret = _client_secret(secret_box(), merchant.client_secret_encrypted)
        if verify_symmetric(client_secret, string_to_sign, signed.signature):
            return True
        # A client secret replaced within its grace period (the console's rotation).
        secrets = await _in_grace(database, merchant.id, CredentialKind.CLIENT_SECRET)
        return any(verify_symmetric(secret, string_to_sign, signed.signature) for secret in secrets)

    async def merchant_of(self, database: Database, token_merchant_id: str, partner_id: str) -> SnapMerchant:
        """The token's merchant, which X-PARTNER-ID must name (401xx00 otherwise)."""
        if token_merchant_id != partner_id:
            raise Unauthorized("X-PARTNER-ID is not the merchant of the access token")
        return await _cached_merchant(database, partner_id)  # a disabled merchant's tokens stop here


class SnapDisbursementAuthenticator(SnapSymmetricAuthenticator):
    """The disbursement routes' scheme (docs/decisions.md §11.2): §3.2's symmetric signature only, over a
    disbursement token (a payment token, a missing or an expired one: 401xx01); X-PARTNER-ID names the token's
    merchant by its merchant_id or its client_id (the provider's pages say Client ID)."""

    scheme = "snap disbursement"
    product = Product.DISBURSEMENT

    async def merchant_of(self, database: Database, token_merchant_id: str, partner_id: str) -> SnapMerchant:
        merchant = await _cached_merchant(database, token_merchant_id)
        if partner_id not in (merchant.id, merchant.client_id):
            raise Unauthorized("X-PARTNER-ID is not the merchant of the access token")
        return merchant


class SnapAsymmetricAuthenticator(SnapAuthenticator):
    """SHA256withRSA with the merchant's public key (read at every request: no process keeps it)."""

    scheme = "snap asymmetric"
    symmetric = False

    async def verify(self, request: Request, database: Database, signed: SignedRequest) -> bool:
        async with database.unit_of_work(read_only=True) as session:
            merchant = await _merchant(session, signed.partner_id)
        string_to_sign = asymmetric_string_to_sign(signed.method, signed.path, signed.body, signed.timestamp)
        try:
            signature_bytes = b64decode_strict(signed.signature)
        except ValueError:  # not Base64: a signature that does not verify, like any other
            return False
        if verify_asymmetric(merchant.public_key_pem, string_to_sign, signature_bytes):
            return True
        # A public key replaced within its grace period.
        keys = await _in_grace(database, signed.partner_id, CredentialKind.PUBLIC_KEY)
        return any(verify_asymmetric(pem, string_to_sign, signature_bytes) for pem in keys)


async def _in_grace(database: Database, merchant_id: str, kind: CredentialKind) -> list[str]:
    """The replaced credentials of `kind` still accepted now, opened (a PEM stays as it is)."""
    async with database.unit_of_work(read_only=True) as session:
        rows = await merchant_repository.grace(session, merchant_id, clock.now())
    values = [row.value for row in rows if row.kind == kind.value]
    if kind is CredentialKind.PUBLIC_KEY:
        return values
    return [secret_box().open(value) for value in values]


async def claim_external_id(session: Session, caller: SnapCaller) -> None:
    """X-EXTERNAL-ID is unique per merchant per calendar day (docs/decisions.md §3.2), in the request's unit of work."""
    day = clock.local_now().date()
    # merchant_id is the X-PARTNER-ID: the merchant was found by it (or the token was minted for it).
    if not await snap_repository.claim_external_id(session, caller.merchant_id, day, caller.external_id, clock.now()):
        raise ExternalIdReused()


async def _merchant(session: Session, partner_id: str) -> SnapMerchant:
    merchant = await merchant_repository.snap_merchant(session, partner_id)
    if merchant is None or merchant.disabled_at is not None:
        raise Unauthorized("Unknown X-PARTNER-ID")  # a disabled merchant is refused like an unknown one
    return merchant


# X-PARTNER-ID -> what the symmetric (access-token) path needs of the merchant, kept for
# KASIR_CREDENTIAL_CACHE_SECONDS: that path skips the merchant query. A rotation or a disabling
# forgets this process's entry at once (kasir.merchants.service.forget_cached).
_snap_merchants: TtlCache[str, SnapMerchant] = TtlCache(credential_cache_seconds)
merchant_id_caches.append(_snap_merchants)


async def _cached_merchant(database: Database, partner_id: str) -> SnapMerchant:
    merchant = _snap_merchants.get(partner_id)
    if merchant is None:
        async with database.unit_of_work(read_only=True) as session:
            merchant = await _merchant(session, partner_id)
        _snap_merchants.put(partner_id, merchant)
    return merchant


@lru_cache(maxsize=1024)
def _client_secret(box: SecretBox, sealed: str) -> str:
    """The opened client secret: a pure function of the keys and the sealed text, so it is kept.

    Opening (Fernet: HMAC check + AES) on every request cost more than the rest of the check.
    New keys (a new box) or a new sealed secret are a new entry; nothing stale can be answered.
    """
    return box.open(sealed)


snap_symmetric = SnapSymmetricAuthenticator()
snap_asymmetric = SnapAsymmetricAuthenticator()
snap_disbursement = SnapDisbursementAuthenticator()


async def _snap_scheme(request: Request) -> Authenticator[SnapCaller]:
    """Symmetric when the request carries Authorization (a token), asymmetric when it does not."""
    return snap_symmetric if "authorization" in request.headers else snap_asymmetric


snap_signature = OneOf(_snap_scheme, (snap_symmetric, snap_asymmetric))
