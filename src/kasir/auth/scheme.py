"""What every authenticator is: a FastAPI dependency that names its scheme and owns its rate limit.

A route declares its scheme by depending on one authenticator (kasir.auth's `Annotated` aliases),
or on `public` when it needs none; the route guard (tests/auth/test_routes.py) reads these
dependencies from `route.dependant` and refuses a route that declares none, or an authenticator
whose `rate_limit` is missing.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, ClassVar, Generic, TypeVar

from fastapi import Depends, Request

from kasir.db import Database
from kasir.ratelimit.service import rate_limits, source_address

Caller = TypeVar("Caller")


class FailedAuthentications:
    """The failed-authentication lockout (kasir.ratelimit): asked before a check, counted after a failure.

    Counted per source address, and per merchant from that address once the request names one.
    Both calls happen outside any unit of work (on PostgreSQL a count is written in a unit of its own).
    """

    async def before(self, database: Database, address: str, merchant: str | None = None) -> None:
        await rate_limits.before_authentication(database, address, merchant)

    async def failed(self, database: Database, address: str, merchant: str | None = None) -> None:
        await rate_limits.failed_authentication(database, address, merchant)


def database(request: Request) -> Database:
    """The application's database (its units of work, its rate-limit counters)."""
    db: Database = request.app.state.database
    return db


class Authenticator(ABC, Generic[Caller]):
    """One scheme: `await authenticator(request)` is the proven caller, or a KasirError.

    `rate_limit` is what counts this scheme's failures; None only for `public`, which proves nothing.
    """

    scheme: ClassVar[str]
    rate_limit: Any

    @abstractmethod
    async def __call__(self, request: Request) -> Caller: ...

    def __repr__(self) -> str:
        return f"<authenticator {self.scheme}>"


class Public(Authenticator[None]):
    """No credential: health, readiness, metrics, documents, static files and the customers' hosted pages."""

    scheme = "public"
    rate_limit = None

    async def __call__(self, request: Request) -> None:
        return None


class OneOf(Authenticator[Any]):
    """One route, a scheme per request: `choose` picks one of `schemes` (the card charge's two dialects)."""

    scheme = "one of"

    def __init__(
        self, choose: Callable[[Request], Awaitable[Authenticator[Any]]], schemes: Sequence[Authenticator[Any]]
    ) -> None:
        self.choose = choose
        self.schemes = tuple(schemes)

    @property
    def rate_limit(self) -> tuple[Any, ...]:  # type: ignore[override]
        """Each scheme's own: the route guard asks every scheme `choose` may pick."""
        return tuple(scheme.rate_limit for scheme in self.schemes)

    async def __call__(self, request: Request) -> Any:
        chosen = await self.choose(request)
        return await chosen(request)


public = Public()
# `dependencies=[PUBLIC]` on a route or router that proves no caller.
PUBLIC = Depends(public)


def source(request: Request) -> tuple[Database, str]:
    """(database, source address) of a request: what every rate-limit call needs."""
    return database(request), source_address(request)
