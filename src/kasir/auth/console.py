"""The console's schemes: signing in with a password, then the session cookie it sets.

    console_sign_in     email + password (kasir.console.service, in the sign-in route's units); a refusal is a failed
                        authentication of the source address (kasir.ratelimit), and past the limit
                        the form says so (429) before the password is looked at
    console_session     the `kasir_console` cookie's session; `checked` also requires the session's
                        CSRF token (form field or X-CSRF-Token) and, when sent, the console's own Origin

A session's cookie is a random token no guessing reaches: its rate limit is the sign-in's, the
only credential a person types. A missing or ended session is SignInRequired, which the console's
routes answer with the sign-in page (kasir.console.web.ConsoleRoute).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import Depends, Request

from kasir.auth.scheme import Authenticator, FailedAuthentications, database, source
from kasir.console.models import Role
from kasir.console.service import AccountLocked, CsrfRefused, NotYours, SignInRefused, Viewer, console_sessions
from kasir.console.service import SignedIn as NewSession

COOKIE = "kasir_console"


def client_ip(request: Request) -> str | None:
    return request.client.host if request.client else None


class ConsoleSignInAuthenticator(Authenticator["ConsoleSignInAuthenticator"]):
    """The sign-in form's check; the route asks `sign_in` with the form's fields."""

    scheme = "console sign-in"

    def __init__(self) -> None:
        self.rate_limit = FailedAuthentications()

    async def __call__(self, request: Request) -> ConsoleSignInAuthenticator:
        return self

    async def sign_in(self, request: Request, attempt: Callable[[], Awaitable[NewSession]]) -> NewSession:
        """`attempt()`'s new session (the route's units: the password is checked between them), or
        AuthenticationLocked before it is tried; its SignInRefused or AccountLocked is counted."""
        db, address = source(request)
        await self.rate_limit.before(db, address)
        try:
            return await attempt()
        except (SignInRefused, AccountLocked):
            await self.rate_limit.failed(db, address)
            raise


console_sign_in = ConsoleSignInAuthenticator()


class ConsoleSessionAuthenticator(Authenticator[Viewer]):
    """Who is asking, by the session cookie; `checked`: a state-changing request, CSRF-checked."""

    scheme = "console session"

    def __init__(self, *, checked: bool) -> None:
        self.checked = checked
        self.rate_limit = console_sign_in.rate_limit

    async def __call__(self, request: Request) -> Viewer:
        db = database(request)
        async with db.unit_of_work(read_only=True) as session:
            viewer, touch_due = await console_sessions.viewer(session, request.cookies.get(COOKIE))
        if touch_due:
            async with db.unit_of_work() as session:
                await console_sessions.touch(session, viewer)
        request.state.viewer = viewer
        if self.checked:
            given = request.headers.get("x-csrf-token")
            if given is None and request.headers.get("content-type", "").startswith(
                ("application/x-www-form-urlencoded", "multipart/form-data")
            ):
                form = await request.form()
                value = form.get("csrf_token")
                given = value if isinstance(value, str) else None
            console_sessions.check_csrf(viewer, given)
            _check_origin(request)
        return viewer


def _check_origin(request: Request) -> None:
    """A browser's Origin, when it sends one, must be this console's own."""
    origin = request.headers.get("origin")
    if origin and origin != "null":
        host = request.headers.get("host", "")
        if origin.split("://", 1)[-1] != host:
            raise CsrfRefused()


console_session = ConsoleSessionAuthenticator(checked=False)
console_session_checked = ConsoleSessionAuthenticator(checked=True)


def operator_only(viewer: Viewer) -> Viewer:
    if not viewer.is_operator:
        raise NotYours()  # merchant users do not learn the page exists
    return viewer


async def current_operator(viewer: Annotated[Viewer, Depends(console_session)]) -> Viewer:
    return operator_only(viewer)


async def checked_operator(viewer: Annotated[Viewer, Depends(console_session_checked)]) -> Viewer:
    return operator_only(viewer)


def user_manager_only(viewer: Viewer) -> Viewer:
    if not viewer.manages_users:
        raise NotYours()
    return viewer


async def current_user_manager(viewer: Annotated[Viewer, Depends(console_session)]) -> Viewer:
    return user_manager_only(viewer)


async def checked_user_manager(viewer: Annotated[Viewer, Depends(console_session_checked)]) -> Viewer:
    return user_manager_only(viewer)


def merchant_user_only(viewer: Viewer) -> Viewer:
    """A merchant's user, any role (its own merchant's self-service pages); an operator has no merchant of its own."""
    if viewer.is_operator or viewer.merchant_id is None:
        raise NotYours()
    return viewer


def merchant_admin_only(viewer: Viewer) -> Viewer:
    """A merchant's admin: it alone changes its merchant's credentials and callback URL."""
    if viewer.role is not Role.MERCHANT_ADMIN or viewer.merchant_id is None:
        raise NotYours()
    return viewer


async def current_merchant_user(viewer: Annotated[Viewer, Depends(console_session)]) -> Viewer:
    return merchant_user_only(viewer)


async def checked_merchant_user(viewer: Annotated[Viewer, Depends(console_session_checked)]) -> Viewer:
    return merchant_user_only(viewer)


async def checked_merchant_admin(viewer: Annotated[Viewer, Depends(console_session_checked)]) -> Viewer:
    return merchant_admin_only(viewer)


SignedIn = Annotated[Viewer, Depends(console_session)]
Checked = Annotated[Viewer, Depends(console_session_checked)]
Operator = Annotated[Viewer, Depends(current_operator)]
CheckedOperator = Annotated[Viewer, Depends(checked_operator)]
UserManager = Annotated[Viewer, Depends(current_user_manager)]
CheckedUserManager = Annotated[Viewer, Depends(checked_user_manager)]
MerchantUser = Annotated[Viewer, Depends(current_merchant_user)]
CheckedMerchantUser = Annotated[Viewer, Depends(checked_merchant_user)]
CheckedMerchantAdmin = Annotated[Viewer, Depends(checked_merchant_admin)]
SignIn = Annotated[ConsoleSignInAuthenticator, Depends(console_sign_in)]
