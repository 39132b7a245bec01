"""Signing in and out of the console: cookies, lockout, CSRF, session end, security headers."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select

from kasir.audit.models import AuditEvent
from kasir.config import get_settings
from kasir.console.models import ConsoleSession
from kasir.db import fetch
from kasir.kit.clock import clock
from tests.console.helpers import PASSWORD, closing, csrf_of, make_user, page_csrf, sign_in, signed_in


@pytest.fixture(autouse=True)
def _no_sign_in_delay() -> Iterator[None]:
    settings = get_settings()
    before = settings.console_sign_in_delay_seconds
    settings.console_sign_in_delay_seconds = 0
    yield
    settings.console_sign_in_delay_seconds = before


def new_client(app: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://kasir.test")


async def test_good_sign_in_sets_a_safe_cookie_and_opens_the_overview(app: FastAPI) -> None:
    email = await make_user(app)
    async with new_client(app) as client:
        response = await sign_in(client, email)
        assert response.status_code == 303
        assert response.headers["location"] == "/console/overview"
        cookie = next(
            v for k, v in response.headers.multi_items() if k == "set-cookie" and v.startswith("kasir_console=")
        )
        assert "HttpOnly" in cookie
        assert "SameSite=lax" in cookie
        assert "Path=/console" in cookie
        assert "Secure" not in cookie  # KASIR_PUBLIC_URL is http in the tests
        page = await client.get("/console/overview")
        assert page.status_code == 200
        assert email in page.text
        csp = page.headers["content-security-policy"]
        assert "script-src 'self'" in csp
        assert "unsafe-inline" not in csp
        assert "frame-ancestors 'none'" in csp
        assert page.headers["x-frame-options"] == "DENY"
        assert page.headers["x-content-type-options"] == "nosniff"
        assert page.headers["referrer-policy"] == "same-origin"


async def test_secure_cookie_when_the_public_url_is_https(app: FastAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(get_settings(), "public_url", "https://pay.example.id")
    email = await make_user(app)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="https://kasir.test") as client:
        response = await sign_in(client, email)
        cookie = next(
            v for k, v in response.headers.multi_items() if k == "set-cookie" and v.startswith("kasir_console=")
        )
        assert "Secure" in cookie


async def test_wrong_password_and_unknown_email_get_the_same_answer(app: FastAPI) -> None:
    email = await make_user(app)
    async with new_client(app) as client:
        wrong = await sign_in(client, email, "not the password at all")
        unknown = await sign_in(client, "nobody@example.id", PASSWORD)
    assert wrong.status_code == unknown.status_code == 401
    assert "Email or password is wrong." in wrong.text
    assert "Email or password is wrong." in unknown.text
    assert not any(v.startswith("kasir_console=") for k, v in wrong.headers.multi_items() if k == "set-cookie")


async def test_five_failures_lock_the_account_even_for_the_right_password(app: FastAPI) -> None:
    email = await make_user(app)
    async with new_client(app) as client:
        for _ in range(4):
            assert (await sign_in(client, email, "wrong password 123")).status_code == 401
        fifth = await sign_in(client, email, "wrong password 123")
        assert fifth.status_code == 429
        assert "locked until" in fifth.text
        assert 15 * 60 - 30 <= int(fifth.headers["Retry-After"]) <= 15 * 60
        right = await sign_in(client, email)
        assert right.status_code == 429
        assert 1 <= int(right.headers["Retry-After"]) <= 15 * 60
        clock.advance(15 * 60 + 1)
        assert (await sign_in(client, email)).status_code == 303
    async with app.state.database.unit_of_work(read_only=True) as session:
        actions = [
            row.action for row in await fetch(session, select(AuditEvent.action).where(AuditEvent.target_id == email))
        ]
    assert "user.locked" in actions
    assert "user.sign_in" in actions


async def test_a_good_sign_in_starts_the_failures_again_and_is_recorded(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    email = await make_user(app)
    async with new_client(app) as browser:
        for _ in range(4):
            assert (await sign_in(browser, email, "wrong password 123")).status_code == 401
        assert (await sign_in(browser, email)).status_code == 303
        for _ in range(4):  # four more in a row, not nine: no lock
            assert (await sign_in(browser, email, "wrong password 123")).status_code == 401
        assert (await sign_in(browser, email)).status_code == 303
    users = (await client.get("/admin/users", headers={"Authorization": "Bearer test-admin-token"})).json()["users"]
    (user,) = [user for user in users if user["email"] == email]
    assert user["last_sign_in_at"] is not None
    assert user["locked_until"] is None


async def test_failures_slow_the_answer_down(app: FastAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    monkeypatch.setattr(get_settings(), "console_sign_in_delay_seconds", 0.2)  # the session's, put back after
    email = await make_user(app)
    async with new_client(app) as client:
        await sign_in(client, email, "wrong password 123")
        started = time.monotonic()
        await sign_in(client, email, "wrong password 123")  # the second in a row waits 2 x 0.2 s
        # Wall-clock time: the delay is slept on it. A lower bound only: a busy machine makes it longer.
        assert time.monotonic() - started >= 0.4


async def test_sign_in_form_needs_its_csrf_cookie(app: FastAPI) -> None:
    email = await make_user(app)
    async with new_client(app) as client:
        response = await client.post(
            "/console/sign-in", data={"email": email, "password": PASSWORD, "csrf_token": "forged"}
        )
    assert response.status_code == 403


async def test_next_never_leaves_the_console(app: FastAPI) -> None:
    email = await make_user(app)
    async with new_client(app) as client:
        page = await client.get("/console/sign-in")
        response = await client.post(
            "/console/sign-in",
            data={"email": email, "password": PASSWORD, "csrf_token": csrf_of(page.text), "next": "//evil.example/x"},
        )
    assert response.headers["location"] == "/console/overview"


async def test_pages_without_a_session_send_to_sign_in(app: FastAPI, client: httpx.AsyncClient) -> None:
    response = await client.get("/console/payments?status=paid")
    assert response.status_code == 303
    assert response.headers["location"] == "/console/sign-in?next=/console/payments%3Fstatus%3Dpaid"
    assert response.headers["x-frame-options"] == "DENY"


async def test_state_changing_requests_need_the_sessions_csrf_token(app: FastAPI) -> None:
    client = await signed_in(app)
    async with closing(client):
        refused = await client.post("/console/sign-out", data={"csrf_token": "forged"})
        assert refused.status_code == 403
        assert (await client.get("/console/overview")).status_code == 200  # still signed in
        other_origin = await client.post(
            "/console/sign-out",
            data={"csrf_token": await page_csrf(client)},
            headers={"origin": "https://evil.example"},
        )
        assert other_origin.status_code == 403


async def test_sign_out_ends_the_session_everywhere(app: FastAPI) -> None:
    client = await signed_in(app)
    async with closing(client):
        cookie = client.cookies.get("kasir_console")
        response = await client.post("/console/sign-out", data={"csrf_token": await page_csrf(client)})
        assert response.status_code == 303
        assert response.headers["location"] == "/console/sign-in?signed_out=1"
    async with new_client(app) as replayed:  # the old cookie, sent again by another browser
        replayed.cookies.set("kasir_console", cookie or "", path="/console")
        assert (await replayed.get("/console/overview")).status_code == 303


async def test_disabling_a_user_ends_its_sessions(app: FastAPI) -> None:
    client = await signed_in(app)
    async with closing(client):
        page = await client.get("/console/overview")
        email = page.text.split('class="who">', 1)[1].split("<", 1)[0]
        from tests.support.cli import kasir_beside_app

        result = await kasir_beside_app("user", "disable", email)
        assert result.exit_code == 0, result.output
        assert (await client.get("/console/overview")).status_code == 303


async def test_sessions_expire_when_idle_and_after_their_lifetime(app: FastAPI) -> None:
    client = await signed_in(app)
    async with closing(client):
        clock.advance(59 * 60)
        assert (await client.get("/console/overview")).status_code == 200  # used: the idle time starts again
        clock.advance(61 * 60)
        assert (await client.get("/console/overview")).status_code == 303
    client = await signed_in(app)
    async with closing(client):
        for _ in range(9):
            clock.advance(55 * 60)
            await client.get("/console/overview")
        assert (await client.get("/console/overview")).status_code == 303  # 8 hours at most


async def test_the_cookie_value_is_not_stored(app: FastAPI) -> None:
    client = await signed_in(app)
    async with closing(client):
        token = client.cookies.get("kasir_console")
    async with app.state.database.unit_of_work(read_only=True) as session:
        ids = [row.id for row in await fetch(session, select(ConsoleSession.id))]
    assert token
    assert token not in ids
