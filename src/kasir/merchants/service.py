"""Merchants: creation, key rotation, and reading their secrets back for signatures."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from sqlalchemy.ext.asyncio import AsyncSession

from kasir.callbacks.ssrf import check_callback_url
from kasir.config import get_settings
from kasir.db import Database
from kasir.errors import BadRequest, Conflict, InvalidFieldFormat, NotFound
from kasir.kit.clock import clock
from kasir.kit.crypto import KeyError_, SecretBox, load_merchant_public_key, public_key_pem
from kasir.kit.ids import new_id, new_secret
from kasir.kit.ttl_cache import TtlCache
from kasir.merchants.models import Merchant
from kasir.merchants.repository import merchant_repository


class MerchantError(BadRequest):
    """Invalid merchant input (CLI and admin API say the message on one line)."""


class MerchantNameTaken(Conflict):
    pass


class MerchantNotFound(NotFound):
    pass


@dataclass(frozen=True, slots=True)
class MerchantCredentials:
    """Everything a merchant needs, in clear: shown once at creation."""

    merchant_id: str
    name: str
    client_id: str
    client_secret: str
    secret: str
    hash_key: str
    callback_url: str | None

    def masked(self) -> dict[str, str | None]:
        return {
            "merchant_id": self.merchant_id,
            "name": self.name,
            "client_id": self.client_id,
            "client_secret": mask(self.client_secret),
            "secret": mask(self.secret),
            "hash_key": mask(self.hash_key),
            "callback_url": self.callback_url,
        }


@dataclass(frozen=True, slots=True)
class MerchantSecrets:
    """A merchant's decrypted secrets, for computing and checking signatures."""

    client_secret: str
    secret: str
    hash_key: str

    def __repr__(self) -> str:  # never print secrets by accident
        return "MerchantSecrets(<hidden>)"


def mask(value: str) -> str:
    return value[:4] + "…" + "*" * 8 if len(value) > 8 else "*" * 8


@lru_cache(maxsize=4)
def _secret_box(secret_key: str) -> SecretBox:
    return SecretBox(secret_key)


def secret_box() -> SecretBox:
    return _secret_box(get_settings().resolved_secret_key())


def validate_public_key(pem: str | bytes) -> str:
    try:
        key = load_merchant_public_key(pem)
    except KeyError_ as exc:
        raise MerchantError(str(exc), field="public_key") from exc
    return public_key_pem(key).decode()


async def validate_callback_url(url: str | None) -> str | None:
    """Staging: any absolute http(s) URL. Production: https to public addresses only (SSRF guard)."""
    if url is None or url == "":
        return None
    try:
        await check_callback_url(url, production=get_settings().is_production)
    except InvalidFieldFormat as exc:
        raise MerchantError(f"callback URL {exc.reason}", field="callback_url") from exc
    return url


@dataclass(frozen=True, slots=True)
class TokenSigner:
    """What verifying a token request needs: whose key, and the key."""

    merchant_id: str
    public_key_pem: str


def credential_cache_seconds() -> float:
    """How long what the hot paths know of a merchant is kept (KASIR_CREDENTIAL_CACHE_SECONDS)."""
    return get_settings().credential_cache_seconds


# client_id -> TokenSigner for a few seconds: the token endpoint's hot path skips the database.
token_signer_cache: TtlCache[str, TokenSigner] = TtlCache(credential_cache_seconds)


class MerchantService:
    async def create(
        self, session: AsyncSession, *, name: str, public_key: str | bytes, callback_url: str | None = None
    ) -> tuple[Merchant, MerchantCredentials]:
        name = name.strip()
        if not name or len(name) > 100:
            raise MerchantError("merchant name must be 1 to 100 characters", field="name")
        pem = validate_public_key(public_key)
        callback_url = await validate_callback_url(callback_url)
        if await merchant_repository.get_by_name(session, name) is not None:
            raise MerchantNameTaken(f"a merchant named {name!r} already exists", field="name")
        box = secret_box()
        credentials = MerchantCredentials(
            merchant_id=new_id("MCH", 13),
            name=name,
            client_id=new_id("CLI", 21),
            client_secret=new_secret(32),
            secret=new_secret(24),
            hash_key=new_secret(24),
            callback_url=callback_url,
        )
        now = clock.now()
        merchant = Merchant(
            id=credentials.merchant_id,
            name=name,
            client_id=credentials.client_id,
            client_secret_encrypted=box.seal(credentials.client_secret),
            secret_encrypted=box.seal(credentials.secret),
            hash_key_encrypted=box.seal(credentials.hash_key),
            public_key_pem=pem,
            callback_url=callback_url,
            created_at=now,
            updated_at=now,
        )
        await merchant_repository.add(session, merchant)
        return merchant, credentials

    async def get(self, session: AsyncSession, merchant_id: str) -> Merchant:
        merchant = await merchant_repository.get(session, merchant_id)
        if merchant is None:
            raise MerchantNotFound(f"no merchant with id {merchant_id!r}", field="merchant_id")
        return merchant

    async def get_by_name(self, session: AsyncSession, name: str) -> Merchant | None:
        return await merchant_repository.get_by_name(session, name)

    async def get_by_client_id(self, session: AsyncSession, client_id: str) -> Merchant | None:
        return await merchant_repository.get_by_client_id(session, client_id)

    async def token_signer(self, database: Database, client_id: str) -> TokenSigner | None:
        """Whose key verifies `client_id`'s token requests: from the cache, else from the database,
        read once for all the requests that miss it together."""
        signer = token_signer_cache.get(client_id)
        if signer is None:
            signer = await token_signer_cache.load_once(client_id, lambda: self._load_token_signer(database, client_id))
            if signer is not None:
                token_signer_cache.put(client_id, signer)
        return signer

    async def _load_token_signer(self, database: Database, client_id: str) -> TokenSigner | None:
        async with database.unit_of_work(read_only=True) as session:
            merchant = await merchant_repository.get_by_client_id(session, client_id)
        return None if merchant is None else TokenSigner(merchant.id, merchant.public_key_pem)

    async def list(self, session: AsyncSession) -> Sequence[Merchant]:
        return await merchant_repository.list(session)

    async def rotate_key(self, session: AsyncSession, merchant_id: str, public_key: str | bytes) -> Merchant:
        merchant = await self.get(session, merchant_id)
        merchant.public_key_pem = validate_public_key(public_key)
        merchant.updated_at = clock.now()
        token_signer_cache.forget(merchant.client_id)
        await session.flush()
        return merchant

    def secrets(self, merchant: Merchant) -> MerchantSecrets:
        box = secret_box()
        return MerchantSecrets(
            client_secret=box.open(merchant.client_secret_encrypted),
            secret=box.open(merchant.secret_encrypted),
            hash_key=box.open(merchant.hash_key_encrypted),
        )


merchant_service = MerchantService()
