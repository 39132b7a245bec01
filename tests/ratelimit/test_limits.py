"""Rate limits and lockouts (issue 24, finding 8): every limit answered 429 in its route's format
with Retry-After, lifted when its window ends, kept per merchant and address, and shared by every
process on PostgreSQL (per process on SQLite).

The session's app runs with limits out of reach (tests/conftest.py); each test lowers the ones it
tries, speaks from addresses of its own and moves the clock to the start of a window first.
"""

from __future__ import annotations

import itertools
import json
import secrets
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import func, select

from kasir.config import get_settings
from kasir.db import Database, fetch_value
from kasir.kit.clock import clock
from kasir.ratelimit.jobs import purge_expired_counters
from kasir.ratelimit.models import RateLimitCounter
from kasir.ratelimit.service import AuthenticationLocked, rate_limits
from tests.conftest import TEST_ADMIN_TOKEN, TEST_DB
from tests.console.helpers import make_user, sign_in
from tests.support import builders
from tests.support.builders import make_merchant
from tests.support.wire import basic_auth
from tests.support.wire.card import charge_body, post_charge
from tests.support.wire.snap import GRANT, calculation_body, post_signed, snap_timestamp, token_headers
from tests.support.wire.wallet import CREATE, create_body, post_wallet

TOKEN_PATH = "/auth/merchants/v1.0/access-token/b2b"
CALCULATION_PATH = "/v1.0/bnpl/payment-calculation"

_block = secrets.randbelow(200) + 20
_hosts = itertools.count(1)


def new_address() -> str:
    """An address no other test speaks from (TEST-NET-style private block, random per session)."""
    n = next(_hosts)
    return f"10.{_block}.{n // 250}.{n % 250 + 1}"


def client_from(app: FastAPI, address: str) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=(address, 40000))
    return httpx.AsyncClient(transport=transport, base_url="http://kasir.test")


@pytest.fixture
def limits(monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """Set rate-limit settings for this test (`limits(failures_per_ip=3)`), then move the clock
    to just after the start of a failure window and of a token window."""
    settings = get_settings()

    def set_limits(**values: int) -> None:
        for name, value in values.items():
            monkeypatch.setattr(settings, f"rate_limit_{name}", value)
        lengths = (settings.rate_limit_failure_window_seconds, settings.rate_limit_token_window_seconds)
        longest = max(lengths)
        assert all(longest % length == 0 for length in lengths)
        clock.advance(longest - clock.epoch() % longest + 1)

    return set_limits


def retry_after(response: httpx.Response, window: int) -> int:
    seconds = int(response.headers["Retry-After"])
    assert 1 <= seconds <= window
    return seconds


def assert_snap_429(response: httpx.Response, service_code: str, window: int) -> None:
    assert response.status_code == 429, response.text
    assert response.json() == {"responseCode": f"429{service_code}00", "responseMessage": "Too Many Requests"}
    # the window began at most a few seconds ago (the fixture): nearly all of it is left
    assert retry_after(response, window) >= window - 30


# --- access tokens ----------------------------------------------------------------------------


async def test_token_requests_per_address(app: FastAPI, limits: Callable[..., None]) -> None:
    limits(token_requests_per_ip=3, token_window_seconds=60)
    merchant = await make_merchant(app)
    async with client_from(app, new_address()) as client, client_from(app, new_address()) as other:
        for _ in range(2):
            assert (await client.post(TOKEN_PATH, headers=token_headers(merchant), content=GRANT)).status_code == 200
        # a malformed request counts too: the limit is asked before anything is read
        assert (await client.post(TOKEN_PATH, headers={"X-CLIENT-KEY": "x"}, content=GRANT)).status_code == 400
        refused = await client.post(TOKEN_PATH, headers=token_headers(merchant), content=GRANT)
        assert_snap_429(refused, "73", 60)
        assert (await other.post(TOKEN_PATH, headers=token_headers(merchant), content=GRANT)).status_code == 200

        clock.advance(60)
        again = await client.post(TOKEN_PATH, headers=token_headers(merchant), content=GRANT)
        assert again.status_code == 200, again.text


async def test_tokens_per_client_count_only_requests_that_prove_the_key(
    app: FastAPI, limits: Callable[..., None]
) -> None:
    limits(tokens_per_client=2, token_window_seconds=60)
    merchant, bystander = await make_merchant(app), await make_merchant(app)
    async with client_from(app, new_address()) as attacker, client_from(app, new_address()) as owner:
        for _ in range(4):  # wrong signatures in the merchant's name spend nothing of its allowance
            wrong = await attacker.post(TOKEN_PATH, headers=token_headers(merchant, wrong=True), content=GRANT)
            assert wrong.status_code == 401
        for _ in range(2):
            assert (await owner.post(TOKEN_PATH, headers=token_headers(merchant), content=GRANT)).status_code == 200
        # the client's allowance, whatever the address
        assert_snap_429(await attacker.post(TOKEN_PATH, headers=token_headers(merchant), content=GRANT), "73", 60)
        assert_snap_429(await owner.post(TOKEN_PATH, headers=token_headers(merchant), content=GRANT), "73", 60)
        assert (await owner.post(TOKEN_PATH, headers=token_headers(bystander), content=GRANT)).status_code == 200

        clock.advance(60)
        assert (await owner.post(TOKEN_PATH, headers=token_headers(merchant), content=GRANT)).status_code == 200


async def test_failed_token_signatures_lock_the_address(app: FastAPI, limits: Callable[..., None]) -> None:
    limits(failures_per_ip=3, failure_window_seconds=300)
    merchant, other_merchant = await make_merchant(app), await make_merchant(app)
    async with client_from(app, new_address()) as attacker, client_from(app, new_address()) as elsewhere:
        for _ in range(3):
            wrong = await attacker.post(TOKEN_PATH, headers=token_headers(merchant, wrong=True), content=GRANT)
            assert wrong.status_code == 401
            assert wrong.json()["responseCode"] == "4017300"
        # locked: even a right signature, even for another merchant, from that address
        assert_snap_429(await attacker.post(TOKEN_PATH, headers=token_headers(merchant), content=GRANT), "73", 300)
        locked = await attacker.post(TOKEN_PATH, headers=token_headers(other_merchant), content=GRANT)
        assert_snap_429(locked, "73", 300)
        # the merchant from its own address is not touched
        assert (await elsewhere.post(TOKEN_PATH, headers=token_headers(merchant), content=GRANT)).status_code == 200

        clock.advance(300)
        assert (await attacker.post(TOKEN_PATH, headers=token_headers(merchant), content=GRANT)).status_code == 200


async def test_a_timestamp_outside_the_skew_is_not_a_failed_authentication(
    app: FastAPI, limits: Callable[..., None]
) -> None:
    limits(failures_per_ip=2, failures_per_merchant=2)
    merchant = await make_merchant(app)
    async with client_from(app, new_address()) as client:
        for _ in range(4):
            stale = await client.post(
                TOKEN_PATH, headers=token_headers(merchant, timestamp=snap_timestamp(-3600)), content=GRANT
            )
            assert stale.status_code == 401
        assert (await client.post(TOKEN_PATH, headers=token_headers(merchant), content=GRANT)).status_code == 200


# --- Basic (wallet, card) ---------------------------------------------------------------------


def wrong_basic(merchant: builders.TestMerchant) -> str:
    return basic_auth(merchant.id, merchant.credentials.secret + "x")


async def test_wallet_basic_failures_lock_the_merchant_from_that_address_only(
    app: FastAPI, limits: Callable[..., None]
) -> None:
    limits(failures_per_merchant=2, failures_per_ip=100, failure_window_seconds=300)
    merchant, neighbour = await make_merchant(app), await make_merchant(app)
    async with client_from(app, new_address()) as client, client_from(app, new_address()) as elsewhere:
        for _ in range(2):
            body = create_body()
            headers = {"Content-Type": "application/json", "x-version": "v3", "Authorization": wrong_basic(merchant)}
            headers["x-req-signature"] = "0" * 64
            response = await client.post(CREATE, content=json.dumps(body), headers=headers)
            assert (response.status_code, response.json()["response_code"]) == (401, "04")
        refused = await post_wallet(client, merchant, CREATE, create_body())
        assert refused.status_code == 429, refused.text
        assert refused.json()["response_code"] == "04"
        assert "too many failed authentications" in refused.json()["response_message"]
        assert retry_after(refused, 300) >= 270
        # failures of one merchant do not limit another, nor the merchant from another address
        assert (await post_wallet(client, neighbour, CREATE, create_body())).status_code == 200
        assert (await post_wallet(elsewhere, merchant, CREATE, create_body())).status_code == 200

        clock.advance(300)
        assert (await post_wallet(client, merchant, CREATE, create_body())).status_code == 200


async def test_wrong_x_req_signatures_are_failed_authentications(app: FastAPI, limits: Callable[..., None]) -> None:
    limits(failures_per_merchant=2, failures_per_ip=100)
    merchant = await make_merchant(app)
    async with client_from(app, new_address()) as client:
        for _ in range(2):
            wrong = await post_wallet(client, merchant, CREATE, create_body(), signature="0" * 64)
            assert (wrong.status_code, wrong.json()["response_code"]) == (401, "04")
        refused = await post_wallet(client, merchant, CREATE, create_body())
        assert (refused.status_code, refused.json()["response_code"]) == (429, "04")
        assert "Retry-After" in refused.headers


async def test_card_basic_failures_answer_in_the_card_format(app: FastAPI, limits: Callable[..., None]) -> None:
    limits(failures_per_ip=3, failure_window_seconds=300)
    merchant = await make_merchant(app)
    async with client_from(app, new_address()) as client:
        for authorization in ("Basic !!!", wrong_basic(merchant), basic_auth("no-such-merchant", "secret")):
            wrong = await post_charge(client, merchant, charge_body(), authorization=authorization)
            assert (wrong.status_code, wrong.json()["statusMessage"]) == (401, "UNAUTHORIZED")
        refused = await post_charge(client, merchant, charge_body())
        assert refused.status_code == 429, refused.text
        body = refused.json()
        assert body["statusCode"] == "429"
        assert body["statusMessage"] == "TOO_MANY_REQUESTS"
        assert body["errors"][0]["field"] == "authorization"
        seconds = retry_after(refused, 300)
        assert f"retry after {seconds} seconds" in body["errors"][0]["message"]

        clock.advance(seconds)
        assert (await post_charge(client, merchant, charge_body())).status_code == 200


async def test_a_nul_in_the_basic_user_is_a_counted_failure_never_a_500(
    app: FastAPI, limits: Callable[..., None]
) -> None:
    """Issue 43 N4: a NUL in the Basic user reached the database (a 500 on PostgreSQL, uncounted)."""
    limits(failures_per_ip=2, failure_window_seconds=300)
    merchant = await make_merchant(app)
    async with client_from(app, new_address()) as client:
        for user in ("\x00", f"{merchant.id}\x00"):
            headers = {"Content-Type": "application/json", "x-version": "v3", "Authorization": basic_auth(user, "s")}
            headers["x-req-signature"] = "0" * 64
            wrong = await client.post(CREATE, content=json.dumps(create_body()), headers=headers)
            assert (wrong.status_code, wrong.json()["response_code"]) == (401, "04"), wrong.text
            assert "NUL" in wrong.json()["response_message"]
        refused = await post_wallet(client, merchant, CREATE, create_body())
        assert refused.status_code == 429, refused.text


# --- SNAP signatures and access tokens (BNPL) --------------------------------------------------


def calculation() -> dict[str, Any]:
    return calculation_body()


async def test_bnpl_signature_and_token_failures(app: FastAPI, limits: Callable[..., None]) -> None:
    limits(failures_per_merchant=3, failures_per_ip=100, failure_window_seconds=300)
    merchant, impostor = await make_merchant(app), await make_merchant(app, key_slot=1)
    async with client_from(app, new_address()) as client, client_from(app, new_address()) as elsewhere:
        # an asymmetric signature by another key, a forged token, a symmetric signature by another secret
        asymmetric = await post_signed(client, impostor, CALCULATION_PATH, calculation(), partner_id=merchant.id)
        assert asymmetric.json()["responseCode"] == "4019000"
        forged = await post_signed(client, merchant, CALCULATION_PATH, calculation(), token="forged.token")
        assert forged.json()["responseCode"] == "4019001"
        token_response = await elsewhere.post(TOKEN_PATH, headers=token_headers(merchant), content=GRANT)
        token = token_response.json()["accessToken"]
        symmetric = await post_signed(client, impostor, CALCULATION_PATH, calculation(), token=token,
                                      partner_id=merchant.id)  # fmt: skip
        assert symmetric.json()["responseCode"] == "4019000"

        assert_snap_429(await post_signed(client, merchant, CALCULATION_PATH, calculation()), "90", 300)
        assert (await post_signed(client, impostor, CALCULATION_PATH, calculation())).status_code == 200
        assert (await post_signed(elsewhere, merchant, CALCULATION_PATH, calculation())).status_code == 200

        clock.advance(300)
        assert (await post_signed(client, merchant, CALCULATION_PATH, calculation())).status_code == 200


# --- a processor's notification ------------------------------------------------------------------


async def test_forged_processor_notifications_lock_the_address(app: FastAPI, limits: Callable[..., None]) -> None:
    """The staging simulator sends no notifications: every one posted to it is forged (401), and counted."""
    limits(failures_per_ip=3, failure_window_seconds=300)
    async with client_from(app, new_address()) as client, client_from(app, new_address()) as other:
        for _ in range(3):
            assert (await client.post("/processors/simulator/notify", content=b"{}")).status_code == 401
        refused = await client.post("/processors/simulator/notify", content=b"{}")
        assert refused.status_code == 429
        assert retry_after(refused, 300) >= 270
        assert (await other.post("/processors/simulator/notify", content=b"{}")).status_code == 401
        assert (await client.post("/processors/nobody/notify", content=b"{}")).status_code == 404  # no processor

        clock.advance(300)
        assert (await client.post("/processors/simulator/notify", content=b"{}")).status_code == 401


# --- the admin token and console sign-in -------------------------------------------------------


async def test_admin_token_failures_lock_the_address(app: FastAPI, limits: Callable[..., None]) -> None:
    limits(failures_per_ip=3, failure_window_seconds=300)
    async with client_from(app, new_address()) as client, client_from(app, new_address()) as operator:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TEST_ADMIN_TOKEN}"}):
            assert (await client.get("/admin/merchants", headers=headers)).status_code == 401
        right = {"Authorization": f"Bearer {TEST_ADMIN_TOKEN}"}
        refused = await client.get("/admin/merchants", headers=right)
        assert refused.status_code == 429
        assert refused.json()["error"] == "AuthenticationLocked"
        assert retry_after(refused, 300) >= 270
        assert (await operator.get("/admin/merchants", headers=right)).status_code == 200

        clock.advance(300)
        assert (await client.get("/admin/merchants", headers=right)).status_code == 200


async def test_console_sign_in_failures_lock_the_address(
    app: FastAPI, limits: Callable[..., None], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(get_settings(), "console_sign_in_delay_seconds", 0)
    limits(failures_per_ip=3, failure_window_seconds=300)
    email = await make_user(app)
    async with client_from(app, new_address()) as client, client_from(app, new_address()) as owner:
        # three emails, one password each: no account reaches its own lock, the address does
        for target in ("nobody@example.id", f"x{email}", email):
            assert (await sign_in(client, target, "wrong password 123")).status_code == 401
        refused = await sign_in(client, email)
        assert refused.status_code == 429
        assert "Too many failed sign-ins from this address" in refused.text
        assert retry_after(refused, 300) >= 270
        assert (await sign_in(owner, email)).status_code == 303

        clock.advance(300)
        assert (await sign_in(client, email)).status_code == 303


# --- where the counters live --------------------------------------------------------------------


async def test_two_databases_share_the_counters_on_postgres_only(
    app: FastAPI, settings: Any, limits: Callable[..., None]
) -> None:
    """Two Database instances stand for two server processes: on PostgreSQL failures counted
    through one lock the address in the other; on SQLite each process counts its own."""
    limits(failures_per_ip=3)
    address, merchant = new_address(), await make_merchant(app)
    second = Database(settings)
    try:
        for _ in range(3):
            await rate_limits.failed_authentication(second, address, merchant.id)
        with pytest.raises(AuthenticationLocked) if TEST_DB == "postgres" else nullcontext():
            await rate_limits.before_authentication(app.state.database, address)
        # either way the process that counted them refuses the address
        with pytest.raises(AuthenticationLocked):
            await rate_limits.before_authentication(second, address)
    finally:
        await second.dispose()


@pytest.mark.slow
async def test_a_served_process_and_this_one_count_together_on_postgres(app: FastAPI, served: Any) -> None:
    """Failures over real HTTP to `kasir serve` (another process) count here too on PostgreSQL.
    The session's windows last a day, so both processes are in the same one without moving clocks."""
    settings = get_settings()
    monkeypatch_limit = settings.rate_limit_failures_per_merchant
    merchant = await make_merchant(app)
    async with httpx.AsyncClient(base_url=served.base_url) as http:
        for _ in range(3):
            wrong = await post_charge(http, merchant, charge_body(), authorization=wrong_basic(merchant))
            assert wrong.status_code == 401
    try:
        settings.rate_limit_failures_per_merchant = 3
        async with client_from(app, "127.0.0.1") as same_address, client_from(app, new_address()) as other:
            answer = await post_charge(same_address, merchant, charge_body())
            assert answer.status_code == (429 if TEST_DB == "postgres" else 200), answer.text
            assert (await post_charge(other, merchant, charge_body())).status_code == 200
    finally:
        settings.rate_limit_failures_per_merchant = monkeypatch_limit


async def test_ended_windows_are_purged(app: FastAPI, limits: Callable[..., None]) -> None:
    limits(failures_per_ip=100, failure_window_seconds=300)
    database = app.state.database
    address = new_address()
    await rate_limits.failed_authentication(database, address)
    if not database.keeps_counters:  # SQLite: nothing in the table, nothing to purge
        assert await purge_expired_counters(database) == 0
        return
    key = f"fail:ip:{address}"

    async def rows() -> int:
        async with database.unit_of_work(read_only=True) as session:
            return int(await fetch_value(session, select(func.count()).where(RateLimitCounter.key == key)) or 0)

    assert await rows() == 1
    clock.advance(301 + 60)  # past the window, and past the purge's once-a-minute
    await purge_expired_counters(database)
    assert await rows() == 0
