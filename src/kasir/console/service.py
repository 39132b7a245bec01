"""Console users, sign-in and sessions.

    ConsoleError (KasirError)
     ├── UserInvalid (400)          an email, role, merchant or password that cannot be
     ├── UserNotFound (404)
     ├── UserEmailTaken (409)
     ├── SignInRefused (401)        wrong email or password, or a disabled user: one message
     ├── AccountLocked (429)        too many failed sign-ins in a row
     ├── SignInRequired (401)       no session, or it ended (expired, idle, revoked, user disabled)
     ├── CsrfRefused (403)          a state-changing request without its session's token
     └── NotYours (404)             a merchant user asking for another merchant's data

Passwords are Argon2id (argon2-cffi's defaults), hashed and verified on a thread and outside
any write unit of work. Sessions are rows (the cookie holds a random value, the table its
SHA-256), so every server process accepts them and sign-out or disabling a user ends them
everywhere at once. Lockout: KASIR_CONSOLE_LOCK_AFTER failures in a row lock the account for
KASIR_CONSOLE_LOCK_MINUTES (429 with Retry-After); each failure answers after
KASIR_CONSOLE_SIGN_IN_DELAY_SECONDS times the failures so far (at most 4 times). Every failed
sign-in also counts against its source address like any failed authentication (kasir.ratelimit):
past KASIR_RATE_LIMIT_FAILURES_PER_IP the address is refused (429) whatever the email.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any, NoReturn

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from kasir.audit.service import Actor, audit
from kasir.config import get_settings
from kasir.console.models import Role
from kasir.console.repository import ConsoleSessionRow, ConsoleUserRow, console_repository
from kasir.db import Session
from kasir.errors import BadRequest, Conflict, KasirError, NotFound, TooManyRequests
from kasir.kit.clock import clock
from kasir.kit.crypto import constant_time_equals
from kasir.kit.ids import INT32_MAX
from kasir.merchants.service import merchant_service


class UserInvalid(BadRequest):
    pass


class UserNotFound(NotFound):
    pass


class UserEmailTaken(Conflict):
    pass


class SignInRefused(KasirError):
    http_status = 401
    default_message = "Email or password is wrong."


class AccountLocked(TooManyRequests):
    """Answered with Retry-After: the seconds until the lock ends."""

    def __init__(self, until: datetime) -> None:
        seconds = max(1, math.ceil((until - clock.now()).total_seconds()))
        super().__init__(_locked_message(until), headers={"Retry-After": str(seconds)})


class SignInRequired(KasirError):
    http_status = 401
    default_message = "Please sign in."


class CsrfRefused(KasirError):
    http_status = 403
    default_message = "This form has expired or did not come from the console. Reload the page and try again."


class NotYours(NotFound):
    """Another merchant's payment, callback or merchant: answered exactly like one that does not exist."""

    default_message = "Not found."


MIN_PASSWORD_LENGTH = 12
_EMAIL = re.compile(r"^[^@\s]{1,64}@[^@\s]{1,189}\.[^@\s]{2,}$")


@lru_cache(maxsize=1)
def _hasher() -> PasswordHasher:
    return PasswordHasher()  # Argon2id, RFC 9106's second recommended parameters (64 MiB, 3 passes)


@lru_cache(maxsize=1)
def _dummy_hash() -> str:
    # Verified against when the email is unknown, so a wrong email costs what a wrong password costs.
    return _hasher().hash(secrets.token_urlsafe(16))


def hash_password_sync(password: str) -> str:
    return _hasher().hash(password)


async def hash_password(password: str) -> str:
    return await asyncio.to_thread(hash_password_sync, password)


async def verify_password(password_hash: str, password: str) -> bool:
    def verify() -> bool:
        try:
            return _hasher().verify(password_hash, password)
        except (VerificationError, InvalidHashError):
            return False

    return await asyncio.to_thread(verify)


def session_key(token: str) -> str:
    """The stored id of a session: SHA-256 of the cookie's value."""
    return hashlib.sha256(token.encode()).hexdigest()


def new_password() -> str:
    return secrets.token_urlsafe(15)  # 20 characters, 120 bits


def normalise_email(email: str) -> str:
    email = email.strip().lower()
    if not _EMAIL.match(email):
        raise UserInvalid("email must be an address such as name@example.id", field="email")
    return email


def check_password(password: str) -> str:
    if len(password) < MIN_PASSWORD_LENGTH:
        raise UserInvalid(f"password must be at least {MIN_PASSWORD_LENGTH} characters", field="password")
    if len(password) > 1024:
        raise UserInvalid("password must be at most 1024 characters", field="password")
    return password


@dataclass(frozen=True, slots=True)
class Viewer:
    """The signed-in console user of a request, and what it may see."""

    user_id: int
    email: str
    role: Role
    merchant_id: str | None
    session_id: str
    csrf_token: str

    @property
    def is_operator(self) -> bool:
        return self.role is Role.OPERATOR

    @property
    def scope(self) -> str | None:
        """The merchant every query is limited to; None for an operator (every merchant)."""
        return None if self.is_operator else self.merchant_id

    @property
    def manages_users(self) -> bool:
        """Operators manage every console user; a merchant's admin, its own merchant's."""
        return self.role in (Role.OPERATOR, Role.MERCHANT_ADMIN)

    @property
    def is_merchant_admin(self) -> bool:
        """A merchant's admin: it alone changes its merchant's credentials and callback URL (My merchant)."""
        return self.role is Role.MERCHANT_ADMIN

    def may_see(self, merchant_id: str | None) -> bool:
        return self.is_operator or (merchant_id is not None and merchant_id == self.merchant_id)

    def check(self, merchant_id: str | None) -> None:
        """NotYours (404, as if it did not exist) unless this viewer may see `merchant_id`'s data."""
        if not self.may_see(merchant_id):
            raise NotYours()

    def actor(self, ip: str | None) -> Actor:
        return Actor(f"console:{self.email}", "console", ip, self.user_id)


@dataclass(frozen=True, slots=True)
class SignedIn:
    token: str  # the cookie's value; only its hash is stored
    viewer: Viewer
    max_age: int


def user_state(user: ConsoleUserRow) -> dict[str, Any]:
    return {
        "email": user.email,
        "role": user.role,
        "merchant_id": user.merchant_id,
        "disabled": user.disabled_at is not None,
    }


@dataclass(frozen=True, slots=True)
class UserEntry:
    """A row of the console's users page."""

    user: ConsoleUserRow
    merchant_name: str | None
    state: str  # active | disabled | locked


def state_of(user: ConsoleUserRow, now: datetime) -> str:
    if user.disabled_at is not None:
        return "disabled"
    if user.locked_until is not None and user.locked_until > now:
        return "locked"
    return "active"


class ConsoleUserService:
    async def entries(self, session: Session, within: str | None = None) -> list[UserEntry]:
        """The users page: every user (or merchant `within`'s), with its merchant's name and state."""
        if within is not None:
            names = {within: (await merchant_service.get(session, within)).name}
        else:
            names = {merchant.id: merchant.name for merchant in await merchant_service.list(session)}
        now = clock.now()
        return [
            UserEntry(user, names.get(user.merchant_id) if user.merchant_id else None, state_of(user, now))
            for user in await self.list(session, within)
        ]

    async def create(
        self,
        session: Session,
        *,
        email: str,
        role: str,
        merchant_id: str | None = None,
        password: str | None = None,
        actor: Actor,
        within: str | None = None,
    ) -> tuple[ConsoleUserRow, str]:
        """The new user and its password (generated when none is given): shown once. `within`: the merchant
        a merchant's admin manages; the new user is that merchant's."""
        email = normalise_email(email)
        try:
            role_ = Role(role)
        except ValueError as exc:
            raise UserInvalid("role must be operator, merchant or merchant_admin", field="role") from exc
        if within is not None:
            # A merchant's admin adds its own merchant's users, never an operator nor another merchant's.
            if not role_.of_a_merchant:
                raise UserInvalid("role must be merchant or merchant_admin", field="role")
            if merchant_id and merchant_id != within:
                raise NotYours()
            merchant_id = within
        if role_.of_a_merchant and not merchant_id:
            raise UserInvalid("a merchant user needs --merchant (the merchant id)", field="merchant_id")
        if not role_.of_a_merchant and merchant_id:
            raise UserInvalid("an operator sees every merchant: give no merchant", field="merchant_id")
        password = check_password(password) if password is not None else new_password()
        # Before the unit's first statement: on SQLite that statement takes the write seat, and the hash
        # (on a thread, and slow on purpose) must not hold it.
        password_hash = await hash_password(password)
        if merchant_id:
            await merchant_service.get(session, merchant_id)
        if await console_repository.user_by_email(session, email) is not None:
            raise UserEmailTaken(f"a console user {email} already exists", field="email")
        user = await console_repository.add_user(
            session,
            email=email,
            role=role_.value,
            merchant_id=merchant_id if role_.of_a_merchant else None,
            password_hash=password_hash,
            created_at=clock.now(),
        )
        await audit.record(
            session,
            actor,
            "user.create",
            target_type="console_user",
            target_id=email,
            merchant_id=user.merchant_id,
            after=user_state(user),
        )
        return user, password

    async def list(self, session: Session, within: str | None = None) -> Sequence[ConsoleUserRow]:
        """Every user, or only merchant `within`'s (what its admin sees)."""
        if within is not None:
            return await console_repository.users_of(session, within)
        return await console_repository.users(session)

    async def get(self, session: Session, email_or_id: str | int, within: str | None = None) -> ConsoleUserRow:
        """The user; with `within`, only one of that merchant (another's answers as if it did not exist)."""
        user = await self._get(session, email_or_id)
        if within is not None and user.merchant_id != within:
            raise UserNotFound(f"no console user {email_or_id}", field="user")
        return user

    async def _get(self, session: Session, email_or_id: str | int) -> ConsoleUserRow:
        if isinstance(email_or_id, int) or str(email_or_id).isdigit():
            user_id = int(email_or_id)
            # Beyond its Integer column no row can have it, and the driver would raise instead of finding none.
            user = await console_repository.user(session, user_id) if 0 < user_id <= INT32_MAX else None
        else:
            user = await console_repository.user_by_email(session, str(email_or_id).strip().lower())
        if user is None:
            raise UserNotFound(f"no console user {email_or_id}", field="user")
        return user

    async def set_disabled(
        self, session: Session, email_or_id: str | int, disabled: bool, *, actor: Actor, within: str | None = None
    ) -> ConsoleUserRow:
        """Disabling ends every session of the user at once."""
        user = await self.get(session, email_or_id, within)
        if disabled and actor.user_id == user.id:
            # Nobody else of the merchant may be left to enable it again: a user never disables itself.
            raise UserInvalid("you cannot disable the user you are signed in as", field="user")
        before = user_state(user)
        now = clock.now()
        user.disabled_at = (user.disabled_at or now) if disabled else None
        user.updated_at = now
        await console_repository.save_user(session, user, ("disabled_at", "updated_at"))
        if disabled:
            await console_repository.revoke_all(session, user.id, now)
        await audit.record(
            session,
            actor,
            "user.disable" if disabled else "user.enable",
            target_type="console_user",
            target_id=user.email,
            merchant_id=user.merchant_id,
            before=before,
            after=user_state(user),
        )
        return user

    async def reset_password(
        self,
        session: Session,
        email_or_id: str | int,
        password: str | None = None,
        *,
        actor: Actor,
        within: str | None = None,
    ) -> tuple[ConsoleUserRow, str]:
        """A new password (generated when none is given), shown once; the user's sessions end, a lock is lifted."""
        password = check_password(password) if password is not None else new_password()
        password_hash = await hash_password(password)
        user = await self.get(session, email_or_id, within)
        now = clock.now()
        user.password_hash = password_hash
        user.failed_sign_ins = 0
        user.locked_until = None
        user.updated_at = now
        await console_repository.save_user(
            session, user, ("password_hash", "failed_sign_ins", "locked_until", "updated_at")
        )
        await console_repository.revoke_all(session, user.id, now)
        await audit.record(
            session,
            actor,
            "user.reset_password",
            target_type="console_user",
            target_id=user.email,
            merchant_id=user.merchant_id,
        )
        return user, password

    async def unlock(
        self, session: Session, email_or_id: str | int, *, actor: Actor, within: str | None = None
    ) -> ConsoleUserRow:
        """Lift a sign-in lock (too many failures in a row) before it ends; the password stays."""
        user = await self.get(session, email_or_id, within)
        before = {"failed_sign_ins": user.failed_sign_ins, "locked_until": user.locked_until}
        user.failed_sign_ins = 0
        user.locked_until = None
        user.updated_at = clock.now()
        await console_repository.save_user(session, user, ("failed_sign_ins", "locked_until", "updated_at"))
        await audit.record(
            session,
            actor,
            "user.unlock",
            target_type="console_user",
            target_id=user.email,
            merchant_id=user.merchant_id,
            before=before,
            after={"failed_sign_ins": 0, "locked_until": None},
        )
        return user


@dataclass(frozen=True, slots=True)
class SigningIn:
    """Who is signing in: the email as given (normalised) and its user, if any."""

    email: str
    user: ConsoleUserRow | None


@dataclass(frozen=True, slots=True)
class PasswordChecked:
    """A known, enabled, unlocked user whose password was verified: `right` or not; `new_hash` when
    the stored hash's parameters are out of date (re-hashed, before any unit opens)."""

    email: str
    user: ConsoleUserRow
    right: bool
    new_hash: str | None = None


@dataclass(frozen=True, slots=True)
class FailedSignIn:
    failures: int
    locked_until: datetime | None


class ConsoleSessionService:
    """Sign-in is three steps, each in its caller's unit of work or none: `signing_in` reads the user
    (a read unit), `check_password` verifies the password with no unit open (Argon2, on a thread), then
    `record_failure` (a write unit) and `refuse`, or `start_session` (a write unit)."""

    async def signing_in(self, session: Session, email: str) -> SigningIn:
        email = email.strip().lower()[:254]
        return SigningIn(email, await console_repository.user_by_email(session, email))

    async def check_password(self, signing_in: SigningIn, password: str) -> PasswordChecked:
        """AccountLocked, or SignInRefused for an unknown or disabled user (after as long as a wrong
        password takes); otherwise whether the password is right."""
        user = signing_in.user
        if user is not None and user.locked_until is not None and user.locked_until > clock.now():
            raise AccountLocked(user.locked_until)
        if user is None or user.disabled_at is not None:
            await verify_password(_dummy_hash(), password)
            await asyncio.sleep(get_settings().console_sign_in_delay_seconds)
            raise SignInRefused()
        if not await verify_password(user.password_hash, password):
            return PasswordChecked(signing_in.email, user, right=False)
        rehash = _hasher().check_needs_rehash(user.password_hash)
        new_hash = await hash_password(password) if rehash else None
        return PasswordChecked(signing_in.email, user, right=True, new_hash=new_hash)

    async def record_failure(self, session: Session, checked: PasswordChecked, ip: str | None) -> FailedSignIn:
        """One more failure in a row; KASIR_CONSOLE_LOCK_AFTER of them lock the account (audited)."""
        settings = get_settings()
        user = checked.user
        failures = await console_repository.count_failure(session, user.id, clock.now())
        locked_until = None
        if failures >= settings.console_lock_after:
            locked_until = clock.now() + timedelta(minutes=settings.console_lock_minutes)
            await console_repository.lock(session, user.id, locked_until)
            await audit.record(
                session,
                Actor(f"console:{checked.email}", "console", ip, user.id),
                "user.locked",
                target_type="console_user",
                target_id=checked.email,
                merchant_id=user.merchant_id,
                after={"failed_sign_ins": failures, "locked_until": locked_until},
            )
        return FailedSignIn(failures, locked_until)

    async def refuse(self, failed: FailedSignIn) -> NoReturn:
        """After the failure is recorded (its unit committed): wait longer the more failures, then refuse."""
        await asyncio.sleep(get_settings().console_sign_in_delay_seconds * min(failed.failures, 4))
        if failed.locked_until is not None:
            raise AccountLocked(failed.locked_until)
        raise SignInRefused()

    async def start_session(self, session: Session, checked: PasswordChecked, ip: str | None) -> SignedIn:
        """A new session for a right password, or SignInRefused when the user was disabled meanwhile."""
        user = checked.user
        token, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        lifetime = timedelta(hours=get_settings().console_session_hours)
        fresh = await console_repository.user(session, user.id)
        if fresh is None or fresh.disabled_at is not None:
            raise SignInRefused()
        now = clock.now()
        fresh.failed_sign_ins = 0
        fresh.last_sign_in_at = now
        changed: tuple[str, ...] = ("failed_sign_ins", "last_sign_in_at")
        if checked.new_hash is not None:
            fresh.password_hash = checked.new_hash
            changed += ("password_hash",)
        await console_repository.save_user(session, fresh, changed)
        await console_repository.add_session(
            session,
            ConsoleSessionRow(
                id=session_key(token),
                user_id=user.id,
                csrf_token=csrf,
                ip=ip,
                created_at=now,
                last_seen_at=now,
                expires_at=now + lifetime,
                revoked_at=None,
            ),
        )
        await audit.record(
            session,
            Actor(f"console:{checked.email}", "console", ip, user.id),
            "user.sign_in",
            target_type="console_user",
            target_id=checked.email,
            merchant_id=user.merchant_id,
        )
        viewer = Viewer(user.id, user.email, Role(user.role), user.merchant_id, session_key(token), csrf)
        return SignedIn(token, viewer, int(lifetime.total_seconds()))

    async def viewer(self, session: Session, token: str | None) -> tuple[Viewer, bool]:
        """The signed-in user of a session cookie, or SignInRequired (no session, ended, user disabled); and
        whether the session's last_seen_at is due to be moved (`touch`: one write a minute at most, not one
        per page)."""
        if not token or len(token) > 128:
            raise SignInRequired()
        key = session_key(token)
        found = await console_repository.session_with_user(session, key)
        if found is None:
            raise SignInRequired()
        row, user = found
        now = clock.now()
        idle = timedelta(minutes=get_settings().console_idle_minutes)
        if (
            row.revoked_at is not None
            or row.expires_at <= now
            or row.last_seen_at + idle <= now
            or user.disabled_at is not None
        ):
            raise SignInRequired("Your session has ended. Please sign in again.")
        viewer = Viewer(user.id, user.email, Role(user.role), user.merchant_id, key, row.csrf_token)
        return viewer, now - row.last_seen_at > timedelta(seconds=60)

    async def touch(self, session: Session, viewer: Viewer) -> None:
        await console_repository.touch(session, viewer.session_id, clock.now())

    async def sign_out(self, session: Session, viewer: Viewer, ip: str | None) -> None:
        await console_repository.revoke(session, viewer.session_id, clock.now())
        await audit.record(
            session,
            viewer.actor(ip),
            "user.sign_out",
            target_type="console_user",
            target_id=viewer.email,
            merchant_id=viewer.merchant_id,
        )

    def check_csrf(self, viewer: Viewer, given: str | None) -> None:
        if not given or not constant_time_equals(given, viewer.csrf_token):
            raise CsrfRefused()


def _locked_message(until: datetime) -> str:
    from kasir.console.format import jakarta_time

    return f"Too many failed sign-ins. This account is locked until {jakarta_time(until)}."


console_users = ConsoleUserService()
console_sessions = ConsoleSessionService()
