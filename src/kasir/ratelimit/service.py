"""Rate limits and lockouts: the one service every route asks (KASIR_RATE_LIMIT_* settings).

    KasirError
    └── TooManyRequests (errors.py)     429, in the route's wire format, always with Retry-After
        └── RateLimited                 the access-token endpoint: too many requests
            └── AuthenticationLocked    too many failed authentications (wallet 04, card field authorization)

What is counted, each in fixed windows (a window starts at a multiple of its length):

    token requests       per source address: every request to a token path, counted before anything is read
    tokens issued        per client (X-CLIENT-KEY): only requests that proved the client's key, so
                         nobody else can spend a merchant's allowance
    failed authentications
                         per source address (any merchant, the admin API, console sign-in), and per
                         merchant and source address (Basic, access token, SNAP signatures, x-req-signature)

A failed authentication locks until its window ends once the window holds the limit. The
merchant's counter is kept per source address: whoever fails from elsewhere cannot lock a
merchant out of its own API; guessing from many addresses meets per-address limits and
credentials no guessing can reach (random secrets, RSA keys). Console accounts also keep their
own lock (kasir.console.service).

Where counters live is the database's decision (`Database.keeps_counters`): in its rows on
PostgreSQL (every process counts together), in process memory on SQLite (kasir.ratelimit.counters).
The source address is the ASGI client's (the TCP peer, or what KASIR_TRUSTED_PROXIES vouch for);
an IPv6 address counts as its /64, which one machine usually holds whole.
"""

from __future__ import annotations

import hashlib
import ipaddress
import math
import weakref
from collections.abc import Sequence

from starlette.requests import Request

from kasir.config import get_settings
from kasir.db import Database
from kasir.errors import TooManyRequests
from kasir.kit.clock import clock
from kasir.ratelimit.counters import Counter, Counters, SharedCounters


class RateLimited(TooManyRequests):
    """SNAP `429xx00 Too Many Requests`; `Retry-After` says when the window ends."""

    def __init__(self, retry_after: int, *, field: str, reason: str) -> None:
        super().__init__("Too Many Requests", field=field, headers={"Retry-After": str(retry_after)})
        self.reason = reason
        self.retry_after = retry_after


class AuthenticationLocked(RateLimited):
    """Too many failed authentications; the wallet format says it as `04` (Unauthorized Merchant)."""

    wallet_code = "04"

    def __init__(self, retry_after: int) -> None:
        super().__init__(
            retry_after,
            field="authorization",
            reason=f"refused: too many failed authentications; retry after {retry_after} seconds",
        )


def source_address(request: Request) -> str:
    """The ASGI client address; an IPv6 address as its /64."""
    client = request.scope.get("client")
    host = client[0] if client else ""
    if ":" not in host:
        return host or "unknown"
    try:
        network = ipaddress.ip_network(f"{host}/64", strict=False)
    except ValueError:
        return host[:64]
    return str(network)


def _name(value: str) -> str:
    """A merchant's name as a counter key's part: anything longer than an id is hashed (keys stay short)."""
    if len(value) <= 64:
        return value
    return "#" + hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()


def _retry_after(now: float, length: int) -> int:
    return max(1, math.ceil((int(now // length) + 1) * length - now))


class RateLimits:
    def __init__(self) -> None:
        self._counters: weakref.WeakKeyDictionary[Database, Counters] = weakref.WeakKeyDictionary()
        self._last: tuple[Database, Counters] | None = None  # a process has one database: skip the look-up

    def counters(self, database: Database) -> Counters:
        last = self._last
        if last is not None and last[0] is database:
            return last[1]
        counters = self._counters.get(database)
        if counters is None:
            counters = SharedCounters(database) if database.keeps_counters else Counters()
            self._counters[database] = counters
        self._last = (database, counters)
        return counters

    # --- access tokens ----------------------------------------------------------------------

    async def token_request(self, database: Database, address: str) -> None:
        """Count a request to a token path from `address`; RateLimited past the limit."""
        settings = get_settings()
        limit, length = settings.rate_limit_token_requests_per_ip, settings.rate_limit_token_window_seconds
        if not limit:
            return
        now = clock.epoch()
        (count,) = await self.counters(database).hit([(f"token:ip:{address}", length)], now)
        if count > limit:
            raise RateLimited(
                _retry_after(now, length),
                field="X-CLIENT-KEY",
                reason=f"refused: more than {limit} token requests from this address in {length} seconds",
            )

    async def before_token(self, database: Database, address: str, client_key: str) -> None:
        """Before a token is issued: the address or the client is not locked, the client's allowance not spent."""
        settings = get_settings()
        counters, limits = self._failure_counters(address, client_key)
        limit, length = settings.rate_limit_tokens_per_client, settings.rate_limit_token_window_seconds
        if limit:
            counters.append((f"token:client:{_name(client_key)}", length))
        if not counters:
            return
        now = clock.epoch()
        counts = await self.counters(database).read(counters, now)  # one look-up (one sync) for all
        issued = 0
        if limit:
            issued = counts.pop()
            counters.pop()
        _refuse_past(counts, limits, counters, now)
        if limit and issued >= limit:
            raise RateLimited(
                _retry_after(now, length),
                field="X-CLIENT-KEY",
                reason=f"refused: {limit} tokens were issued to this client in {length} seconds",
            )

    async def token_issued(self, database: Database, client_key: str) -> None:
        settings = get_settings()
        if settings.rate_limit_tokens_per_client:
            counter = (f"token:client:{_name(client_key)}", settings.rate_limit_token_window_seconds)
            await self.counters(database).hit([counter], clock.epoch())

    # --- failed authentications -------------------------------------------------------------

    def _failure_counters(self, address: str, merchant: str | None) -> tuple[list[Counter], list[int]]:
        settings = get_settings()
        length = settings.rate_limit_failure_window_seconds
        counters: list[Counter] = []
        limits: list[int] = []
        if settings.rate_limit_failures_per_ip:
            counters.append((f"fail:ip:{address}", length))
            limits.append(settings.rate_limit_failures_per_ip)
        if merchant is not None and settings.rate_limit_failures_per_merchant:
            counters.append((f"fail:merchant:{_name(merchant)}:{address}", length))
            limits.append(settings.rate_limit_failures_per_merchant)
        return counters, limits

    async def before_authentication(self, database: Database, address: str, merchant: str | None = None) -> None:
        """AuthenticationLocked while `address` (or `merchant` from `address`) has failed too often."""
        counters, limits = self._failure_counters(address, merchant)
        if not counters:
            return
        now = clock.epoch()
        counts = await self.counters(database).read(counters, now)
        _refuse_past(counts, limits, counters, now)

    async def failed_authentication(self, database: Database, address: str, merchant: str | None = None) -> None:
        """Count a failed authentication (written through: every process must see it at once).

        Call it outside any unit of work: on PostgreSQL it writes in a unit of its own.
        """
        counters, _ = self._failure_counters(address, merchant)
        if counters:
            await self.counters(database).hit(counters, clock.epoch(), write_through=True)


def _refuse_past(counts: Sequence[int], limits: Sequence[int], counters: Sequence[Counter], now: float) -> None:
    locked = [length for count, limit, (_, length) in zip(counts, limits, counters, strict=True) if count >= limit]
    if locked:
        raise AuthenticationLocked(max(_retry_after(now, length) for length in locked))


rate_limits = RateLimits()
