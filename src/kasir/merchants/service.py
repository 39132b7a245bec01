"""Merchants: creation, their lifecycle, and reading their secrets back for signatures.

The lifecycle (one service for the console, the admin API and the CLI, every action audited):

    change_callback_url   the default callback URL, under the same SSRF rules as everywhere
    rotate                one credential (client_secret | secret | hash_key | public_key) at a time;
                          the new value is answered once; with a grace period the old one is
                          still accepted until it ends (merchant_credential_grace, sealed)
    confirm_switch        the merchant verifies callbacks with the new hash_key or client_secret:
                          until then, and while the grace lasts, callbacks are signed with the
                          replaced one (docs/decisions.md §8; `callback_signing`)
    disable / enable      a disabled merchant's credentials and tokens are refused with the
                          documented 401s; its pending callbacks still go out

Changes reach this process's credential caches at once and other processes within
KASIR_CREDENTIAL_CACHE_SECONDS.

Errors: MerchantError (400), MerchantNotFound (404), MerchantNameTaken (409), NothingToConfirm (409).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from functools import lru_cache
from typing import Any

from kasir.audit.service import Actor, audit
from kasir.callbacks.ssrf import check_callback_url
from kasir.config import get_settings
from kasir.db import Database, Session
from kasir.errors import BadRequest, Conflict, InvalidFieldFormat, NotFound
from kasir.kit.clock import JAKARTA, clock
from kasir.kit.crypto import (
    KeyError_,
    SecretBox,
    constant_time_equals,
    load_merchant_public_key,
    public_key_fingerprint,
    public_key_pem,
)
from kasir.kit.ids import new_id, new_secret, random_token
from kasir.kit.ttl_cache import TtlCache
from kasir.merchants.repository import GraceRow, MerchantRow, SubMerchantRow, merchant_repository


def new_account_no() -> str:
    """A disbursement account number (decisions §11.2): 16 digits, the first not 0. Unique by the column's
    constraint; 9 x 10^15 numbers make a collision between merchants a matter of chance only."""
    return random_token(1, "123456789") + random_token(15, "0123456789")


class MerchantError(BadRequest):
    """Invalid merchant input (CLI and admin API say the message on one line)."""


class MerchantNameTaken(Conflict):
    pass


class MerchantNotFound(NotFound):
    pass


class NothingToConfirm(Conflict):
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


class CredentialKind(StrEnum):
    """What `rotate` replaces: each credential of docs/decisions.md §2 on its own."""

    CLIENT_SECRET = "client_secret"  # noqa: S105 (the name of a credential, not its value)
    SECRET = "secret"  # noqa: S105
    HASH_KEY = "hash_key"
    PUBLIC_KEY = "public_key"


MAX_GRACE_SECONDS = 7 * 24 * 3600  # a week: long enough to redeploy a shop, short enough to matter


@dataclass(frozen=True, slots=True)
class GraceCredential:
    """A replaced credential still accepted until `expires_at` (opened secret, or PEM)."""

    kind: str
    value: str
    expires_at: datetime

    def __repr__(self) -> str:
        return f"GraceCredential({self.kind}, <hidden>, until {self.expires_at.isoformat()})"


@dataclass(frozen=True, slots=True)
class MerchantSecrets:
    """A merchant's decrypted secrets, for computing and checking signatures."""

    client_secret: str
    secret: str
    hash_key: str
    # Replaced values still in their grace period (empty unless loaded with `secrets_with_grace`).
    grace: tuple[GraceCredential, ...] = field(default=(), compare=False)

    def __repr__(self) -> str:  # never print secrets by accident
        return "MerchantSecrets(<hidden>)"

    def previous(self, kind: CredentialKind) -> list[str]:
        """The replaced values of `kind` still accepted now."""
        now = clock.now()
        return [g.value for g in self.grace if g.kind == kind.value and g.expires_at > now]

    def matching(self, kind: CredentialKind, given: str) -> str | None:
        """The accepted value (current, else one in grace) equal to `given`, compared in constant time."""
        current: str = getattr(self, kind.value)
        found = current if constant_time_equals(given, current) else None
        for value in self.previous(kind):
            if constant_time_equals(given, value) and found is None:
                found = value
        return found


@dataclass(frozen=True, slots=True)
class SigningValue:
    """What signs a merchant's callbacks: the replaced value while its grace lasts and the merchant has not
    confirmed the switch, else the current one; asked at each attempt (`now()`), so the grace's end counts."""

    current: str
    previous: str | None = None
    previous_until: datetime | None = None

    def __repr__(self) -> str:
        return "SigningValue(<hidden>)"

    def now(self) -> str:
        if self.previous is not None and self.previous_until is not None and clock.now() < self.previous_until:
            return self.previous
        return self.current


@dataclass(frozen=True, slots=True)
class CallbackSigning:
    """The values a merchant's callbacks are signed with (§3.5 svc-signature, §3.6 BNPL X-SIGNATURE)."""

    hash_key: SigningValue
    client_secret: SigningValue


# Credentials whose replaced value signs callbacks until the merchant confirms the switch (docs/decisions.md §8).
SIGNS_CALLBACKS = (CredentialKind.HASH_KEY, CredentialKind.CLIENT_SECRET)


def mask(value: str) -> str:
    return value[:4] + "…" + "*" * 8 if len(value) > 8 else "*" * 8


@lru_cache(maxsize=4)
def _secret_box(secret_key: str, previous: tuple[str, ...]) -> SecretBox:
    return SecretBox(secret_key, previous)


@lru_cache(maxsize=4)
def _sealed_for_no_one(secret_key: str, previous: tuple[str, ...]) -> tuple[str, str, str]:
    """Three values sealed once per key, opened in place of a merchant's three secrets."""
    box = _secret_box(secret_key, previous)
    return box.seal("no one"), box.seal("no one"), box.seal("no one")


def secret_box() -> SecretBox:
    """Seals with KASIR_SECRET_KEY; opens with it or a key in KASIR_SECRET_KEY_PREVIOUS."""
    settings = get_settings()
    return _secret_box(settings.resolved_secret_key(), settings.previous_secret_keys())


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
        raise MerchantError(f"callback_url {exc.reason}", field="callback_url") from exc
    return url


@dataclass(frozen=True, slots=True)
class TokenSigner:
    """What verifying a token request needs: whose key, and the key (and replaced keys in their grace period)."""

    merchant_id: str
    public_key_pem: str
    grace_keys: tuple[tuple[str, datetime], ...] = ()

    def previous_public_keys(self) -> list[str]:
        now = clock.now()
        return [pem for pem, expires_at in self.grace_keys if expires_at > now]


@dataclass(frozen=True, slots=True)
class Rotated:
    """A rotation's outcome: the new value, shown once (a public key's fingerprint), and the old one's end."""

    merchant_id: str
    kind: CredentialKind
    new_value: str
    old_accepted_until: datetime | None


def merchant_state(merchant: MerchantRow) -> dict[str, Any]:
    """What the audit log keeps of a merchant: no secret, the public key's fingerprint."""
    return {
        "name": merchant.name,
        "callback_url": merchant.callback_url,
        "public_key_sha256": public_key_fingerprint(merchant.public_key_pem),
        "disabled": merchant.disabled_at is not None,
    }


# The authenticators' caches of a merchant's credentials, keyed by merchant id (kasir.auth adds them).
merchant_id_caches: list[TtlCache[str, Any]] = []


def forget_cached(merchant: MerchantRow) -> None:
    """This process's hot paths read the merchant again on their next request."""
    token_signer_cache.forget(merchant.client_id)
    for cache in merchant_id_caches:
        cache.forget(merchant.id)


def credential_cache_seconds() -> float:
    """How long what the hot paths know of a merchant is kept (KASIR_CREDENTIAL_CACHE_SECONDS)."""
    return get_settings().credential_cache_seconds


# client_id -> TokenSigner for a few seconds: the token endpoint's hot path skips the database.
token_signer_cache: TtlCache[str, TokenSigner] = TtlCache(credential_cache_seconds)
# merchant id -> CallbackSigning for a few seconds: the delivery workers' claims skip the database.
callback_signing_cache: TtlCache[str, CallbackSigning] = TtlCache(credential_cache_seconds)
merchant_id_caches.append(callback_signing_cache)


class MerchantService:
    async def check_new(
        self, session: Session, *, name: str, callback_url: str | None = None
    ) -> tuple[str, str | None]:
        """(name, callback URL) as they would be stored, when a merchant could be created with them; else the error.

        `kasir merchant create --generate-key` asks this before it writes any file.
        """
        name = name.strip()
        if not name or len(name) > 100:
            raise MerchantError("merchant name must be 1 to 100 characters", field="name")
        checked_url = await validate_callback_url(callback_url)
        if await merchant_repository.get_by_name(session, name) is not None:
            raise MerchantNameTaken(f"a merchant named {name!r} already exists", field="name")
        return name, checked_url

    async def create(
        self,
        session: Session,
        *,
        name: str,
        public_key: str | bytes,
        callback_url: str | None = None,
        actor: Actor | None = None,
    ) -> tuple[MerchantRow, MerchantCredentials]:
        pem = validate_public_key(public_key)
        name, callback_url = await self.check_new(session, name=name, callback_url=callback_url)
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
        merchant = MerchantRow(
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
            disabled_at=None,
            account_no=new_account_no(),
        )
        await merchant_repository.add(session, merchant)
        if actor is not None:
            await audit.record(
                session,
                actor,
                "merchant.create",
                target_type="merchant",
                target_id=merchant.id,
                merchant_id=merchant.id,
                after=merchant_state(merchant),
            )
        return merchant, credentials

    async def get(self, session: Session, merchant_id: str) -> MerchantRow:
        merchant = await merchant_repository.get(session, merchant_id)
        if merchant is None:
            raise MerchantNotFound(f"no merchant with id {merchant_id!r}", field="merchant_id")
        return merchant

    async def get_by_name(self, session: Session, name: str) -> MerchantRow | None:
        return await merchant_repository.get_by_name(session, name)

    async def get_by_client_id(self, session: Session, client_id: str) -> MerchantRow | None:
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
            if merchant is None or merchant.disabled_at is not None:
                return None  # a disabled merchant is refused like an unknown client (4017300)
            grace = await merchant_repository.grace(session, merchant.id, clock.now())
        keys = tuple((g.value, g.expires_at) for g in grace if g.kind == CredentialKind.PUBLIC_KEY.value)
        return TokenSigner(merchant.id, merchant.public_key_pem, keys)

    async def list(self, session: Session) -> Sequence[MerchantRow]:
        return await merchant_repository.list(session)

    async def rotate_key(
        self,
        session: Session,
        merchant_id: str,
        public_key: str | bytes,
        *,
        grace_seconds: int = 0,
        actor: Actor | None = None,
    ) -> MerchantRow:
        """Replace the RSA public key (the old one verifies for `grace_seconds` more)."""
        await self.rotate(
            session,
            merchant_id,
            CredentialKind.PUBLIC_KEY,
            public_key=public_key,
            grace_seconds=grace_seconds,
            actor=actor,
        )
        return await self.get(session, merchant_id)

    # --- lifecycle: every action audited -------------------------------------------------

    async def rotate(
        self,
        session: Session,
        merchant_id: str,
        kind: CredentialKind,
        *,
        public_key: str | bytes | None = None,
        grace_seconds: int = 0,
        actor: Actor | None = None,
    ) -> Rotated:
        """A new value for one credential, answered once; the old one is accepted `grace_seconds` more."""
        if not 0 <= grace_seconds <= MAX_GRACE_SECONDS:
            raise MerchantError(f"grace period must be 0 to {MAX_GRACE_SECONDS} seconds", field="grace_seconds")
        merchant = await self.get(session, merchant_id)
        box = secret_box()
        now = clock.now()
        before = merchant_state(merchant)
        if kind is CredentialKind.PUBLIC_KEY:
            if public_key is None:
                raise MerchantError("a new public key (PEM) is required", field="public_key")
            new_pem = validate_public_key(public_key)
            column = "public_key_pem"
            old_value = merchant.public_key_pem
            merchant.public_key_pem = new_pem
            shown = public_key_fingerprint(new_pem)
        else:
            column = f"{kind.value}_encrypted"
            old_value = getattr(merchant, column)  # sealed; kept sealed in the grace table
            shown = new_secret(32 if kind is CredentialKind.CLIENT_SECRET else 24)
            setattr(merchant, column, box.seal(shown))
        merchant.updated_at = now
        until = None
        # Values replaced earlier are accepted no longer than the one replaced now: a rotation
        # without grace (a leak) ends every old value of this credential at once.
        await merchant_repository.cut_grace(session, merchant.id, kind.value, now + timedelta(seconds=grace_seconds))
        if grace_seconds > 0:
            until = now + timedelta(seconds=grace_seconds)
            await merchant_repository.add_grace(session, merchant.id, kind.value, old_value, now, until)
        await merchant_repository.save(session, merchant, (column, "updated_at"))
        forget_cached(merchant)
        if actor is not None:
            await audit.record(
                session,
                actor,
                f"merchant.rotate.{kind.value}",
                target_type="merchant",
                target_id=merchant.id,
                merchant_id=merchant.id,
                before=before,
                after={
                    **merchant_state(merchant),
                    "rotated": kind.value,
                    "old_accepted_until": until.astimezone(JAKARTA).isoformat(timespec="seconds") if until else None,
                },
            )
        return Rotated(merchant.id, kind, shown, until)

    async def confirm_switch(
        self, session: Session, merchant_id: str, kind: CredentialKind, *, actor: Actor | None = None
    ) -> datetime:
        """The merchant verifies callbacks with the new `kind` (hash_key or client_secret) now: from the next
        attempt they are signed with it, though the replaced value is still accepted on requests until its grace
        ends. Answers when the switch was confirmed (now, or earlier when it was already)."""
        if kind not in SIGNS_CALLBACKS:
            raise MerchantError("only a hash_key or client_secret rotation signs callbacks", field="kind")
        merchant = await self.get(session, merchant_id)
        now = clock.now()
        in_grace = [row for row in await merchant_repository.grace(session, merchant.id, now) if row.kind == kind.value]
        if not in_grace:
            raise NothingToConfirm(
                f"no replaced {kind.value} of {merchant.id} is in its grace period: callbacks are signed with the"
                " current one already"
            )
        if all(row.confirmed_at is not None for row in in_grace):
            return max(row.confirmed_at for row in in_grace if row.confirmed_at is not None)
        await merchant_repository.confirm_grace(session, merchant.id, kind.value, now)
        forget_cached(merchant)
        if actor is not None:
            await audit.record(
                session,
                actor,
                f"merchant.confirm.{kind.value}",
                target_type="merchant",
                target_id=merchant.id,
                merchant_id=merchant.id,
                before={"callbacks_signed_with": f"previous {kind.value}"},
                after={
                    "callbacks_signed_with": f"current {kind.value}",
                    "previous_accepted_until": max(row.expires_at for row in in_grace)
                    .astimezone(JAKARTA)
                    .isoformat(timespec="seconds"),
                },
            )
        return now

    async def callback_signing(self, session: Session, merchant_id: str) -> CallbackSigning:
        """What the merchant's callbacks are signed with (docs/decisions.md §8): each value with the one it
        replaced, while that one is in its grace and the switch is not confirmed (the last replaced, should
        there be several)."""
        cached = callback_signing_cache.get(merchant_id)
        if cached is not None:
            return cached
        merchant = await self.get(session, merchant_id)
        rows = await merchant_repository.grace(session, merchant.id, clock.now())
        box = secret_box()

        def signing_value(kind: CredentialKind) -> SigningValue:
            current = box.open(getattr(merchant, f"{kind.value}_encrypted"))
            unconfirmed = [row for row in rows if row.kind == kind.value and row.confirmed_at is None]
            if not unconfirmed:
                return SigningValue(current)
            replaced_last = max(unconfirmed, key=lambda row: row.id)
            return SigningValue(current, box.open(replaced_last.value), replaced_last.expires_at)

        signing = CallbackSigning(signing_value(CredentialKind.HASH_KEY), signing_value(CredentialKind.CLIENT_SECRET))
        callback_signing_cache.put(merchant_id, signing)
        return signing

    async def change_callback_url(
        self, session: Session, merchant_id: str, url: str | None, *, actor: Actor | None = None
    ) -> MerchantRow:
        checked = await validate_callback_url(url)
        merchant = await self.get(session, merchant_id)
        before = merchant_state(merchant)
        merchant.callback_url = checked
        merchant.updated_at = clock.now()
        await merchant_repository.save(session, merchant, ("callback_url", "updated_at"))
        forget_cached(merchant)
        if actor is not None:
            await audit.record(
                session,
                actor,
                "merchant.callback_url",
                target_type="merchant",
                target_id=merchant.id,
                merchant_id=merchant.id,
                before=before,
                after=merchant_state(merchant),
            )
        return merchant

    async def set_disabled(
        self, session: Session, merchant_id: str, disabled: bool, *, actor: Actor | None = None
    ) -> MerchantRow:
        merchant = await self.get(session, merchant_id)
        before = merchant_state(merchant)
        if disabled and merchant.disabled_at is None:
            merchant.disabled_at = clock.now()
        elif not disabled:
            merchant.disabled_at = None
        merchant.updated_at = clock.now()
        await merchant_repository.save(session, merchant, ("disabled_at", "updated_at"))
        forget_cached(merchant)
        if actor is not None:
            await audit.record(
                session,
                actor,
                "merchant.disable" if disabled else "merchant.enable",
                target_type="merchant",
                target_id=merchant.id,
                merchant_id=merchant.id,
                before=before,
                after=merchant_state(merchant),
            )
        return merchant

    async def grace(self, session: Session, merchant_id: str) -> Sequence[GraceRow]:
        """The replaced credentials still accepted now (what the console shows; values stay sealed)."""
        return await merchant_repository.grace(session, merchant_id, clock.now())

    async def secrets_with_grace(self, session: Session, merchant: MerchantRow) -> MerchantSecrets:
        """`secrets(merchant)` and the replaced secrets still in their grace period, opened."""
        secrets = self.secrets(merchant)
        rows = await merchant_repository.grace(session, merchant.id, clock.now())
        if not rows:
            return secrets
        box = secret_box()
        grace = tuple(
            GraceCredential(
                row.kind,
                row.value if row.kind == CredentialKind.PUBLIC_KEY.value else box.open(row.value),
                row.expires_at,
            )
            for row in rows
        )
        return MerchantSecrets(secrets.client_secret, secrets.secret, secrets.hash_key, grace)

    async def secrets_of_no_one(self, session: Session) -> None:
        """The work of `secrets_with_grace` for a merchant that does not exist: a failed authentication of an
        unknown id then takes as long as one of a known id, and ids cannot be told apart by the time."""
        await merchant_repository.grace(session, "", clock.now())
        settings = get_settings()
        key, previous = settings.resolved_secret_key(), settings.previous_secret_keys()
        box = _secret_box(key, previous)
        for sealed in _sealed_for_no_one(key, previous):
            box.open(sealed)

    def secrets(self, merchant: MerchantRow) -> MerchantSecrets:
        box = secret_box()
        return MerchantSecrets(
            client_secret=box.open(merchant.client_secret_encrypted),
            secret=box.open(merchant.secret_encrypted),
            hash_key=box.open(merchant.hash_key_encrypted),
        )

    # --- sub-merchants: the ids a merchant may name in the card dialect's `sub-merchant-id` --------

    async def sub_merchants(self, session: Session, merchant_id: str) -> Sequence[SubMerchantRow]:
        await self.get(session, merchant_id)
        return await merchant_repository.sub_merchants(session, merchant_id)

    async def add_sub_merchant(
        self,
        session: Session,
        merchant_id: str,
        sub_merchant_id: str,
        name: str | None = None,
        *,
        actor: Actor | None = None,
    ) -> SubMerchantRow:
        merchant = await self.get(session, merchant_id)
        if not SUB_MERCHANT_ID.fullmatch(sub_merchant_id):
            raise InvalidFieldFormat("sub_merchant_id", "must be 1 to 64 letters, digits, - _ .")
        if await merchant_repository.sub_merchant(session, merchant.id, sub_merchant_id) is not None:
            raise SubMerchantTaken(f"sub-merchant {sub_merchant_id} already exists for {merchant.id}")
        sub_merchant = await merchant_repository.add_sub_merchant(
            session, merchant.id, sub_merchant_id, name or None, clock.now()
        )
        if actor is not None:
            await audit.record(
                session,
                actor,
                "merchant.sub_merchant.add",
                target_type="merchant",
                target_id=merchant.id,
                merchant_id=merchant.id,
                before=None,
                after={"sub_merchant_id": sub_merchant_id, "name": name},
            )
        return sub_merchant

    async def remove_sub_merchant(
        self, session: Session, merchant_id: str, sub_merchant_id: str, *, actor: Actor | None = None
    ) -> None:
        merchant = await self.get(session, merchant_id)
        sub_merchant = await merchant_repository.sub_merchant(session, merchant.id, sub_merchant_id)
        if sub_merchant is None:
            raise MerchantNotFound(f"sub-merchant {sub_merchant_id} of {merchant.id} not found")
        await merchant_repository.remove_sub_merchant(session, sub_merchant)
        if actor is not None:
            await audit.record(
                session,
                actor,
                "merchant.sub_merchant.remove",
                target_type="merchant",
                target_id=merchant.id,
                merchant_id=merchant.id,
                before={"sub_merchant_id": sub_merchant_id},
                after=None,
            )

    async def has_sub_merchant(self, session: Session, merchant_id: str, sub_merchant_id: str) -> bool:
        return await merchant_repository.sub_merchant(session, merchant_id, sub_merchant_id) is not None


SUB_MERCHANT_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")


class SubMerchantTaken(Conflict):
    pass


merchant_service = MerchantService()
