"""Token verification (valid, expired after 900 s, unknown, wrong product -> 401xx01): kasir.auth.access_token."""

from __future__ import annotations

import json

import httpx
import pytest
from fastapi import FastAPI

from kasir.auth import PaymentToken
from kasir.errors import WireFormat, install_error_handlers, wire
from kasir.kit.clock import clock
from kasir.middleware import RequestContextMiddleware
from tests.support.builders import make_merchant
from tests.support.wire.snap import GRANT, token_headers
from tests.tokens.test_endpoints import DISBURSEMENT_PATH, PAYMENT_PATH

# A route guarded the way the BNPL endpoints are, with QR checkout's service code (92).
probe = FastAPI()
probe.add_middleware(RequestContextMiddleware)
install_error_handlers(probe)


@probe.post("/probe", openapi_extra=wire(WireFormat.SNAP, "92"))
async def guarded(token: PaymentToken) -> dict[str, str]:
    return {"merchant": token.merchant_id}


@probe.post("/boom", openapi_extra=wire(WireFormat.SNAP, "92"))
async def boom() -> None:
    raise RuntimeError("a bug, with a secret=abc in its message")


async def get_token(app, client, path: str = PAYMENT_PATH):
    merchant = await make_merchant(app)
    response = await client.post(path, headers=token_headers(merchant), content=GRANT)
    return merchant, response.json()["accessToken"]


@pytest.fixture
async def probe_client(app):
    probe.state.database = app.state.database  # where the authenticator counts failures (kasir.ratelimit)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=probe), base_url="http://probe") as http:
        yield http


async def call(probe_client, authorization: str | None):
    headers = {} if authorization is None else {"Authorization": authorization}
    return await probe_client.post("/probe", headers=headers)


async def test_valid_token(app, client, probe_client):
    merchant, token = await get_token(app, client)
    response = await call(probe_client, f"Bearer {token}")
    assert response.status_code == 200
    assert response.json() == {"merchant": merchant.id}


async def test_token_valid_until_900_seconds(app, client, probe_client):
    """Good for at least its 900 seconds (its expiry is a whole second, rounded up), not past 901."""
    _merchant, token = await get_token(app, client)
    clock.advance(899)
    assert (await call(probe_client, f"Bearer {token}")).status_code == 200
    clock.advance(2)
    response = await call(probe_client, f"Bearer {token}")
    assert response.status_code == 401
    assert response.json() == {"responseCode": "4019201", "responseMessage": "Invalid Token (B2B)"}


@pytest.mark.parametrize("token", ["garbage", "a.b", "", "x" * 3000])
async def test_unknown_token(probe_client, token):
    response = await call(probe_client, f"Bearer {token}")
    assert response.status_code == 401
    assert response.json()["responseCode"] == "4019201"


async def test_tampered_token(app, client, probe_client):
    _merchant, token = await get_token(app, client)
    payload, signature = token.split(".")
    tampered = payload[:-2] + ("AA" if payload[-2:] != "AA" else "BB") + "." + signature
    response = await call(probe_client, f"Bearer {tampered}")
    assert response.json()["responseCode"] == "4019201"


async def test_disbursement_token_is_not_a_payment_token(app, client, probe_client):
    _merchant, token = await get_token(app, client, DISBURSEMENT_PATH)
    response = await call(probe_client, f"Bearer {token}")
    assert response.status_code == 401
    assert response.json()["responseCode"] == "4019201"


async def test_wrong_scheme(app, client, probe_client):
    _merchant, token = await get_token(app, client)
    assert (await call(probe_client, f"Basic {token}")).json()["responseCode"] == "4019201"


async def test_missing_authorization(probe_client):
    response = await call(probe_client, None)
    assert response.status_code == 400
    assert response.json() == {"responseCode": "4009202", "responseMessage": "Invalid Mandatory Field Authorization"}


async def test_unexpected_exception_is_json_without_details():
    transport = httpx.ASGITransport(app=probe, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://probe") as http:
        response = await http.post("/boom")
    assert response.status_code == 500
    assert response.json() == {"responseCode": "5009200", "responseMessage": "General Error"}
    assert "secret" not in response.text
    assert response.headers["X-Request-ID"]
    json.loads(response.text)
