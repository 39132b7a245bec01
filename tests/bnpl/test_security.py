"""SNAP request security of the BNPL routes (docs/decisions.md §3.2), signed in the test."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import httpx
import pytest
from fastapi import FastAPI

from kasir.kit.clock import clock
from tests.support.builders import make_merchant
from tests.support.wire import compact
from tests.support.wire.snap import (
    DISBURSEMENT_TOKEN_PATH,
    access_token,
    calculation_body,
    calculation_item,
    checkout_body,
    external_id,
    post_signed,
    pretty,
    rsa_sign,
    snap_headers,
    snap_symmetric,
    snap_timestamp,
)

CALC = "/v1.0/bnpl/payment-calculation"
ROUTES = [
    ("/v1.0/bnpl/payment-calculation", "90"),
    ("/v1.1/bnpl/payment-calculation", "90"),
    ("/v1.0/bnpl/qr-checkout", "92"),
    ("/v1.1/bnpl/qr-checkout", "92"),
    ("/v1.0/bnpl/status", "93"),
    ("/v1.1/bnpl/status", "93"),
]


def unicode_body() -> dict[str, object]:
    """Non-ASCII text and nested arrays, inside strings and structures."""
    items = [calculation_item(name='Kopi Luwak — 特級 ☕ "premium"  blend')]
    body = calculation_body("100000.00", items)
    body["additionalInfo"] = {"tags": [["a", "b c"], [1, 2, [3, {"k": "v  w"}]]], "note": "  spasi  \t tab  "}
    return body


@pytest.mark.parametrize("symmetric", [False, True], ids=["asymmetric", "symmetric"])
async def test_signed_bodies_with_unicode_nested_arrays_and_whitespace(
    app: FastAPI, client: httpx.AsyncClient, symmetric: bool
) -> None:
    merchant = await make_merchant(app)
    token = await access_token(client, merchant) if symmetric else None
    for text in (compact(unicode_body()), pretty(unicode_body())):
        response = await post_signed(client, merchant, CALC, text, token=token)
        assert response.status_code == 200, response.text
        assert response.json()["responseCode"] == "2009000"


async def test_the_minified_body_is_what_is_signed(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    text = pretty(unicode_body())
    timestamp = snap_timestamp()
    headers = snap_headers(merchant, CALC, text, timestamp=timestamp)
    # Signing the raw, whitespace-laden bytes instead of their minified form does not verify.
    raw_digest = hashlib.sha256(text.encode()).hexdigest()
    headers["X-SIGNATURE"] = rsa_sign(merchant.private_key, f"POST:{CALC}:{raw_digest}:{timestamp}")
    response = await client.post(CALC, content=text.encode(), headers=headers)
    assert response.status_code == 401
    assert response.json()["responseCode"] == "4019000"


async def test_only_json_whitespace_is_minified_away(app: FastAPI, client: httpx.AsyncClient) -> None:
    # §3.2: space, tab, LF and CR outside strings; other control characters (a fuzzed body's \x1d) stay in
    # what is signed. Signed so, such a body passes the signature and is refused as what it is: not JSON.
    merchant = await make_merchant(app)
    text = '{\x1d \x0b\n"a"\x1c:\t1}'
    timestamp = snap_timestamp()
    headers = snap_headers(merchant, CALC, text, timestamp=timestamp)
    digest = hashlib.sha256(b'{\x1d\x0b"a"\x1c:1}').hexdigest()
    assert headers["X-SIGNATURE"] == rsa_sign(merchant.private_key, f"POST:{CALC}:{digest}:{timestamp}")
    response = await client.post(CALC, content=text.encode(), headers=headers)
    assert response.status_code == 400, response.text


async def test_path_with_query_string_is_signed(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    text = compact(calculation_body())
    path = f"{CALC}?channel=web&x=1"
    ok = await client.post(path, content=text.encode(), headers=snap_headers(merchant, path, text))
    assert ok.status_code == 200, ok.text
    without_query = await client.post(path, content=text.encode(), headers=snap_headers(merchant, CALC, text))
    assert without_query.status_code == 401
    assert without_query.json()["responseCode"] == "4019000"


@pytest.mark.parametrize(("path", "service"), ROUTES)
@pytest.mark.parametrize("header", ["X-TIMESTAMP", "X-SIGNATURE", "X-PARTNER-ID", "X-EXTERNAL-ID", "CHANNEL-ID"])
async def test_every_header_is_mandatory(
    app: FastAPI, client: httpx.AsyncClient, path: str, service: str, header: str
) -> None:
    merchant = await make_merchant(app)
    text = compact(calculation_body())
    headers = snap_headers(merchant, path, text)
    del headers[header]
    response = await client.post(path, content=text.encode(), headers=headers)
    assert response.status_code == 400
    assert response.json() == {
        "responseCode": f"400{service}02",
        "responseMessage": f"Invalid Mandatory Field {header}",
    }


@pytest.mark.parametrize(("path", "service"), ROUTES[::2])
async def test_content_type(app: FastAPI, client: httpx.AsyncClient, path: str, service: str) -> None:
    merchant = await make_merchant(app)
    text = compact(calculation_body())
    headers = snap_headers(merchant, path, text)
    del headers["Content-Type"]
    missing = await client.post(path, content=text.encode(), headers=headers)
    assert missing.status_code == 400
    assert missing.json()["responseCode"] == f"400{service}02"
    headers["Content-Type"] = "text/plain"
    wrong = await client.post(path, content=text.encode(), headers=headers)
    assert wrong.status_code == 400
    assert wrong.json()["responseCode"] == f"400{service}00"


@pytest.mark.parametrize(("path", "service"), ROUTES[::2])
async def test_timestamp_format_and_skew(app: FastAPI, client: httpx.AsyncClient, path: str, service: str) -> None:
    merchant = await make_merchant(app)
    text = compact(calculation_body())
    naive = await post_signed(client, merchant, path, text, timestamp="2026-11-22T10:00:00")
    assert naive.status_code == 400
    assert naive.json() == {"responseCode": f"400{service}01", "responseMessage": "Invalid Field Format X-TIMESTAMP"}
    old = await post_signed(client, merchant, path, text, timestamp=snap_timestamp(-301))
    assert old.status_code == 401
    assert old.json()["responseCode"] == f"401{service}00"
    # X-TIMESTAMP drops the fraction of a second: 302 s ahead stays over 300 s when the server reads it.
    ahead = await post_signed(client, merchant, path, text, timestamp=snap_timestamp(302))
    assert ahead.status_code == 401
    with_millis = await post_signed(
        client, merchant, CALC, text, timestamp=clock.local_now().isoformat(timespec="milliseconds")
    )
    assert with_millis.status_code == 200, with_millis.text


@pytest.mark.parametrize("value", ["12a4", "1" * 37, "-1", "1.5"])
async def test_external_id_must_be_numeric_up_to_36(app: FastAPI, client: httpx.AsyncClient, value: str) -> None:
    merchant = await make_merchant(app)
    response = await post_signed(client, merchant, CALC, compact(calculation_body()), external=value)
    assert response.status_code == 400
    assert response.json() == {"responseCode": "4009001", "responseMessage": "Invalid Field Format X-EXTERNAL-ID"}
    longest = await post_signed(client, merchant, CALC, compact(calculation_body()), external="9" * 36)
    assert longest.status_code == 200, longest.text


@pytest.mark.parametrize(("path", "service"), ROUTES[::2])
async def test_external_id_unique_per_merchant_per_jakarta_day(
    app: FastAPI, client: httpx.AsyncClient, path: str, service: str
) -> None:
    merchant = await make_merchant(app)
    other = await make_merchant(app)
    token = await access_token(client, merchant)
    first_body = compact(calculation_body()) if "calc" in path else compact(checkout_body())
    if path.endswith("/status"):
        created = await post_signed(client, merchant, "/v1.0/bnpl/qr-checkout", checkout_body())
        first_body = compact({"originalReferenceNo": created.json()["referenceNo"]})
    shared = external_id()
    first = await post_signed(client, merchant, path, first_body, external=shared)
    assert first.status_code == 200, first.text
    again = await post_signed(client, merchant, path, first_body, external=shared, token=token)
    assert again.status_code == 409
    assert again.json() == {"responseCode": f"409{service}00", "responseMessage": "Conflict"}
    # another merchant may use the same id
    other_body = first_body if not path.endswith("qr-checkout") else compact(checkout_body())
    if path.endswith("/status"):
        created = await post_signed(client, other, "/v1.0/bnpl/qr-checkout", checkout_body())
        other_body = compact({"originalReferenceNo": created.json()["referenceNo"]})
    assert (await post_signed(client, other, path, other_body, external=shared)).status_code == 200
    # the next calendar day in Asia/Jakarta it is free again
    local = clock.local_now()
    midnight = (local + timedelta(days=1)).replace(hour=0, minute=0, second=1, microsecond=0)
    clock.advance((midnight - local).total_seconds())
    next_body = first_body if not path.endswith("qr-checkout") else compact(checkout_body())
    next_day = await post_signed(client, merchant, path, next_body, external=shared)
    assert next_day.status_code == 200, next_day.text


async def test_a_rejected_request_does_not_use_up_its_external_id(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    shared = external_id()
    bad = await post_signed(client, merchant, CALC, compact(calculation_body("1.00")), external=shared)
    assert bad.status_code == 400
    good = await post_signed(client, merchant, CALC, compact(calculation_body()), external=shared)
    assert good.status_code == 200, good.text


async def test_channel_id_at_most_5(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    response = await post_signed(client, merchant, CALC, compact(calculation_body()), channel="123456")
    assert response.status_code == 400
    assert response.json() == {"responseCode": "4009001", "responseMessage": "Invalid Field Format CHANNEL-ID"}


async def test_invalid_or_foreign_token(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    other = await make_merchant(app)
    text = compact(calculation_body())
    forged = await post_signed(client, merchant, CALC, text, token="bm90LWEtdG9rZW4.c2ln")
    assert forged.status_code == 401
    assert forged.json() == {"responseCode": "4019001", "responseMessage": "Invalid Token (B2B)"}

    headers = snap_headers(merchant, CALC, text)
    headers["Authorization"] = "Basic dXNlcjpwYXNz"
    basic = await client.post(CALC, content=text.encode(), headers=headers)
    assert basic.json()["responseCode"] == "4019001"

    other_token = await access_token(client, other)
    # signed correctly with the other merchant's secret, but X-PARTNER-ID names `merchant`
    mismatch = await post_signed(client, other, CALC, text, token=other_token, partner_id=merchant.id)
    assert mismatch.status_code == 401
    assert mismatch.json()["responseCode"] == "4019000"

    clock.advance(901)
    expired = await post_signed(client, other, CALC, text, token=other_token)
    assert expired.json()["responseCode"] == "4019001"


async def test_wrong_signatures_are_401(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    stranger = await make_merchant(app, key_slot=1)
    text = compact(calculation_body())
    # asymmetric, signed with another merchant's private key
    wrong_key = await post_signed(client, stranger, CALC, text, partner_id=merchant.id)
    assert wrong_key.status_code == 401
    assert wrong_key.json() == {"responseCode": "4019000", "responseMessage": "Unauthorized. Invalid signature"}
    # symmetric with the right token but another client secret
    token = await access_token(client, merchant)
    timestamp = snap_timestamp()
    headers = snap_headers(merchant, CALC, text, token=token, timestamp=timestamp)
    headers["X-SIGNATURE"] = snap_symmetric("not-the-secret", "POST", CALC, token, text, timestamp)
    wrong_secret = await client.post(CALC, content=text.encode(), headers=headers)
    assert wrong_secret.json()["responseCode"] == "4019000"
    # the body changed after signing
    headers = snap_headers(merchant, CALC, text)
    tampered = await client.post(CALC, content=text.replace("100000.00", "100001.00").encode(), headers=headers)
    assert tampered.json()["responseCode"] == "4019000"
    # the signature string is not even Base64
    headers = snap_headers(merchant, CALC, text)
    headers["X-SIGNATURE"] = "%%%"
    assert (await client.post(CALC, content=text.encode(), headers=headers)).json()["responseCode"] == "4019000"
    # symmetric signature presented without the token: verified as asymmetric, fails
    headers = snap_headers(merchant, CALC, text, token=token)
    del headers["Authorization"]
    assert (await client.post(CALC, content=text.encode(), headers=headers)).json()["responseCode"] == "4019000"


async def test_unknown_partner_is_401(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    text = compact(calculation_body())
    response = await post_signed(client, merchant, CALC, text, partner_id="MCHNOSUCHMERCHANT")
    assert response.status_code == 401
    assert response.json() == {"responseCode": "4019000", "responseMessage": "Unauthorized. Unknown X-PARTNER-ID"}


async def test_signed_body_that_is_not_json_is_400(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    response = await post_signed(client, merchant, CALC, "{not json")
    assert response.status_code == 400
    assert response.json()["responseCode"] == "4009000"


async def test_a_disbursement_token_is_not_a_payment_token(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    disbursement_token = await access_token(client, merchant, DISBURSEMENT_TOKEN_PATH)
    response = await post_signed(client, merchant, CALC, compact(calculation_body()), token=disbursement_token)
    assert response.status_code == 401
    assert response.json()["responseCode"] == "4019001"
