"""Hostile input is a 4xx in the route's own format, never a 500 (hardening findings 3 to 6), on both databases:
a NUL character, JSON nested a thousand deep, an unpaired surrogate, NaN / Infinity / 1e400, an id beyond int64."""

from __future__ import annotations

import json

import httpx
import pytest
from fastapi import FastAPI

from kasir.console.service import UserNotFound, console_users
from tests.console.helpers import closing, signed_in
from tests.support.builders import make_merchant, public_pem, rsa_key
from tests.support.wire import compact, wallet
from tests.support.wire import snap as bnpl
from tests.support.wire.card import CHARGE, charge_body, post_charge
from tests.support.wire.dialect import dialect_body
from tests.support.wire.snap import snap_timestamp, token_headers

ADMIN = {"Authorization": "Bearer test-admin-token"}
DEEP = "[" * 1000 + "]" * 1000


@pytest.mark.parametrize(
    "path", ["/ewallet/qr/%00.png", "/bnpl/qr/%00.png", "/card/pages/%00", "/ewallet/pages/%00", "/admin/merchants/%00"]
)
async def test_a_nul_in_the_path_is_not_found(client: httpx.AsyncClient, path: str) -> None:
    answer = await client.get(path, headers=ADMIN)
    assert answer.status_code == 404, answer.text


async def test_a_nul_in_the_query_is_a_bad_request(client: httpx.AsyncClient) -> None:
    answer = await client.get("/admin/payments?q=%00", headers=ADMIN)
    assert answer.status_code == 400, answer.text


@pytest.mark.parametrize("value", ["ORD-\u0000-1", "\ud800"])
async def test_wallet_strings_with_a_nul_or_an_unpaired_surrogate_are_refused(
    app: FastAPI, client: httpx.AsyncClient, value: str
) -> None:
    merchant = await make_merchant(app)
    body = wallet.create_body()
    body["payment_details"]["transaction_description"] = value
    text = json.dumps(body)  # escaped as JSON must: \u0000, \ud800
    answer = await client.post(wallet.CREATE, content=text.encode(), headers=wallet.wallet_headers(merchant, body))
    wallet.assert_problem(answer, 400, "01", "payment_details.transaction_description")


async def test_a_nul_in_a_signed_wallet_field_is_refused(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    body = wallet.create_body(external_id="EXT-\u0000")
    answer = await client.post(
        wallet.CREATE, content=json.dumps(body).encode(), headers=wallet.wallet_headers(merchant, body)
    )
    wallet.assert_problem(answer, 400, "01", "external_id")


@pytest.mark.parametrize("value", ["\u0000", "\ud800"])
async def test_card_strings_with_a_nul_or_an_unpaired_surrogate_are_refused(
    app: FastAPI, client: httpx.AsyncClient, value: str
) -> None:
    merchant = await make_merchant(app)
    body = charge_body(mode="OPEN", number=None)
    body["paymentDetails"]["transactionDescription"] = f"Sepatu {value}"
    answer = await post_charge(client, merchant, json.dumps(body))
    assert answer.status_code == 400, answer.text
    assert answer.json()["statusMessage"] == "VALIDATION_ERROR"
    assert [e["field"] for e in answer.json()["errors"]] == ["paymentDetails.transactionDescription"]


async def test_bnpl_refuses_nan_infinity_and_out_of_range_numbers_and_a_nul_reference(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    merchant = await make_merchant(app)
    path = "/v1.0/bnpl/qr-checkout"
    for extra in ('{"x": NaN}', '{"x": Infinity}', '{"x": 1e400}'):
        text = compact(bnpl.checkout_body()).replace('"callbackUrl"', f'"additionalInfo":{extra},"callbackUrl"', 1)
        answer = await client.post(path, content=text.encode(), headers=bnpl.snap_headers(merchant, path, text))
        assert answer.status_code == 400, answer.text
        assert answer.json()["responseCode"].startswith("4009201"), answer.text
    status = "/v1.0/bnpl/status"
    text = json.dumps({"originalPartnerReferenceNo": "\u0000"})
    answer = await client.post(status, content=text.encode(), headers=bnpl.snap_headers(merchant, status, text))
    assert answer.status_code == 400, answer.text


async def test_the_token_refuses_nan_in_additional_info(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    answer = await client.post(
        "/auth/merchants/v1.0/access-token/b2b",
        content=b'{"grantType":"client_credentials","additionalInfo":{"x":NaN}}',
        headers=token_headers(merchant),
    )
    assert answer.status_code == 400, answer.text
    assert answer.json()["responseCode"].startswith("40073")


async def test_json_nested_a_thousand_deep_is_refused_on_every_json_route(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    merchant = await make_merchant(app)
    token = await client.post(
        "/auth/merchants/v1.0/access-token/b2b",
        content=DEEP.encode(),
        headers={"Content-Type": "application/json", "X-TIMESTAMP": snap_timestamp(), "X-CLIENT-KEY": "x",
                 "X-SIGNATURE": "x"},
    )  # fmt: skip
    assert token.status_code in (400, 401), token.text
    body = {"external_id": "E", "order_id": "O", "nested": json.loads("[" * 900 + "]" * 900)}
    walleted = await client.post(
        wallet.CREATE, content=json.dumps(body).encode(), headers=wallet.wallet_headers(merchant, body)
    )
    wallet.assert_problem(walleted, 400, "01")
    carded = await post_charge(client, merchant, DEEP)
    assert carded.status_code == 400, carded.text
    path = "/v1.0/bnpl/payment-calculation"
    bnpl_answer = await client.post(path, content=DEEP.encode(), headers=bnpl.snap_headers(merchant, path, DEEP))
    assert bnpl_answer.status_code == 400, bnpl_answer.text


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/admin/callbacks/99999999999999999999/replay"),
        ("GET", "/admin/callbacks/99999999999999999999"),
        # Found by Schemathesis (tests/test_api_fuzz.py): the console users' routes were a 500, beyond int64 on
        # SQLite and beyond int32 (console_user.id is an Integer) on PostgreSQL.
        ("POST", "/admin/users/210400608128658049710686208/enable"),
        ("POST", "/admin/users/99999999999999999999/disable"),
        ("POST", "/admin/users/9223372036854775806/disable"),
        ("POST", "/admin/users/2147483648/enable"),
        ("POST", "/admin/users/2147483648/reset-password"),
    ],
)
async def test_an_id_beyond_its_column_is_refused_before_the_database(
    client: httpx.AsyncClient, method: str, path: str
) -> None:
    answer = await client.request(method, path, headers=ADMIN, json={"password": "a-long-enough-password"})
    assert 400 <= answer.status_code < 500, answer.text


async def test_the_console_service_finds_no_user_beyond_its_column(app: FastAPI) -> None:
    """The same ids through the service (`kasir user disable 99999999999999999999`): not found, not a 500."""
    for user_id in ("99999999999999999999", "2147483648"):
        async with app.state.database.unit_of_work() as session:
            with pytest.raises(UserNotFound):
                await console_users.get(session, user_id)


async def test_a_body_over_the_limit_is_refused_before_authentication(app: FastAPI, client: httpx.AsyncClient) -> None:
    """Finding 1: an unauthenticated admin request with a huge body was read and parsed whole before its 401."""
    limit = app.state.settings.max_body_bytes
    big = b'{"name":"' + b"x" * (limit + 1) + b'"}'
    refused = await client.post("/admin/merchants", content=big, headers={"Content-Type": "application/json"})
    assert refused.status_code == 413, refused.text[:200]
    merchant = await make_merchant(app)
    body = charge_body(mode="OPEN", number=None)
    body["additionalData"] = "x" * (limit + 1)
    carded = await post_charge(client, merchant, json.dumps(body))
    assert carded.status_code == 413
    assert carded.json()["errors"] == [{"field": "body", "message": f"must be at most {limit} bytes"}]
    walleted = await client.post(wallet.CREATE, content=big, headers=wallet.wallet_headers(merchant, {}))
    assert walleted.status_code == 413
    assert walleted.json()["response_code"] == "01"

    async def chunks():  # no Content-Length: cut off as it grows
        for _ in range(4):
            yield b"x" * (limit // 2)

    chunked = await client.post("/admin/merchants", content=chunks(), headers={"Content-Type": "application/json"})
    assert chunked.status_code == 413, chunked.text[:200]


async def test_every_response_says_nosniff(client: httpx.AsyncClient) -> None:
    for path in ("/healthz", "/nowhere", "/openapi.json"):
        assert (await client.get(path)).headers["x-content-type-options"] == "nosniff"


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("DELETE", "/healthz", "GET"),
        ("PUT", "/admin/users", "GET, POST"),  # two routes on one path, in an included router
        ("GET", "/card-v2/v1/charge", "POST"),
    ],
)
async def test_a_405_names_the_methods_the_path_has(
    client: httpx.AsyncClient, method: str, path: str, allowed: str
) -> None:
    """RFC 9110: a 405 carries Allow (Schemathesis's unsupported_method and allow_header_conformance checks)."""
    answer = await client.request(method, path, headers=ADMIN)
    assert answer.status_code == 405, answer.text
    assert answer.headers["allow"] == allowed


async def test_a_dialect_looking_body_nested_past_the_limit_is_no_500_before_authentication(
    client: httpx.AsyncClient,
) -> None:
    """Issue 43 N3: the dialect check read the body with plain json.loads before authentication (a RecursionError,
    a 500 for anyone). It reads with the strict reader now: a body with the dialect's keys is the dialect's to
    refuse, in its format, before anything else (here: the headers the SDK always sends are missing)."""
    body = '{"external_id": ' + "[" * 100_000 + "]" * 100_000 + ', "payment_details": {}}'
    answer = await client.post(CHARGE, content=body.encode(), headers={"Content-Type": "application/json"})
    assert answer.status_code == 400, answer.text
    assert answer.json()["response_code"] == "01", answer.text


RAW_SURROGATE = b"\xed\xa0\x80"  # U+D800 as UTF-8 would spell it, not \u-escaped


def with_raw_surrogate(text: str, marker: str) -> bytes:
    return text.encode().replace(marker.encode(), RAW_SURROGATE, 1)


async def test_raw_surrogate_bytes_are_refused_on_token_wallet_dialect_and_bnpl(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    """Issue 43 N7: json.loads decodes bytes with surrogatepass, so `ED A0 80` passed as a lone surrogate and
    reached the database or the response (a 500 on each of these routes)."""
    merchant = await make_merchant(app)
    token_body = '{"grantType":"client_credentials","additionalInfo":{"note":"MARK"}}'
    token = await client.post(
        "/auth/merchants/v1.0/access-token/b2b",
        content=with_raw_surrogate(token_body, "MARK"),
        headers=token_headers(merchant),
    )
    assert token.status_code == 400, token.text
    assert token.json()["responseCode"].startswith("40073"), token.text

    body = wallet.create_body()
    body["payment_details"]["transaction_description"] = "MARK"
    walleted = await client.post(
        wallet.CREATE,
        content=with_raw_surrogate(json.dumps(body), "MARK"),
        headers=wallet.wallet_headers(merchant, body),
    )
    wallet.assert_problem(walleted, 400, "01", "payment_details.transaction_description")

    charge = dialect_body()
    charge["payment_details"]["transaction_description"] = "MARK"
    dialected = await client.post(
        CHARGE, content=with_raw_surrogate(json.dumps(charge), "MARK"), headers=wallet.wallet_headers(merchant, charge)
    )
    assert dialected.status_code == 400, dialected.text
    assert dialected.json()["response_code"] == "01", dialected.text

    path = bnpl.CHECKOUT
    text = compact(bnpl.checkout_body()).replace('"callbackUrl"', '"additionalInfo":{"note":"MARK"},"callbackUrl"', 1)
    raw = with_raw_surrogate(text, "MARK")
    signed_as_sent = raw.decode("utf-8", "surrogateescape")  # the helpers hash it back to these very bytes
    bnpl_answer = await client.post(path, content=raw, headers=bnpl.snap_headers(merchant, path, signed_as_sent))
    assert bnpl_answer.status_code == 400, bnpl_answer.text
    assert bnpl_answer.json()["responseCode"].startswith("4009201"), bnpl_answer.text


async def test_a_merchant_user_filtering_by_another_merchant_sees_nothing_and_no_500(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    """Issue 43 N4: the console filtered a merchant user's request for another merchant by a "\\x00none" id, which
    PostgreSQL refuses (a 500, and a CSV cut mid-stream). The filter now matches nothing without a query."""
    mine, theirs = await make_merchant(app), await make_merchant(app)
    async with closing(await signed_in(app, role="merchant", merchant_id=mine.id)) as browser:
        listed = await browser.get(f"/console/payments?merchant={theirs.id}")
        assert listed.status_code == 200, listed.text
        exported = await browser.get(f"/console/payments.csv?merchant={theirs.id}")
        assert exported.status_code == 200, exported.text
        assert len(exported.text.strip().splitlines()) == 1  # the header row, whole


@pytest.mark.parametrize(
    "path", ["/console/sign-in", "/ewallet/pages/EWALLETNOSUCHPAGE/fail", "/bnpl/pages/BNPLNOSUCHPAGE/approve"]
)
async def test_a_nul_in_a_form_is_a_bad_request_before_any_look_up(client: httpx.AsyncClient, path: str) -> None:
    """Issue 43 N4: the console sign-in's e-mail and the wallet page's Fail reason carried a NUL to PostgreSQL (a
    500, uncounted as a failed sign-in). A form with `%00` is refused before a route reads it."""
    answer = await client.post(
        path,
        content=b"email=a%00b%40example.com&password=x&reason=no%00&csrf_token=x",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert answer.status_code == 400, answer.text
    assert "NUL" in answer.text


@pytest.mark.parametrize("since", ["0001-01-01T00:00:00+07:00", "0001-01-01T00:00:00Z", "1900-01-01T00:00:00+07:00"])
async def test_a_since_in_year_one_is_refused_by_the_admin_api_and_the_console(
    app: FastAPI, client: httpx.AsyncClient, since: str
) -> None:
    """Issue 43 N8: year 1 with an offset cannot be moved to UTC (a 500), and a merchant console user reaches it."""
    merchant = await make_merchant(app)
    for path in ("/admin/callbacks/recover", "/admin/callbacks/replay-given-up"):
        answer = await client.post(path, json={"merchant_id": merchant.id, "since": since}, headers=ADMIN)
        assert answer.status_code == 400, (path, answer.text)
        assert "since" in answer.text
    async with closing(await signed_in(app, role="merchant", merchant_id=merchant.id)) as browser:
        page = await browser.get("/console/callbacks")
        csrf = page.text.split('name="csrf_token" value="', 1)[1].split('"', 1)[0]
        for typed in (since, "0001-01-01", "0001-01-01T00:00"):
            answer = await browser.post(
                "/console/callbacks/replay-given-up", data={"merchant": merchant.id, "since": typed, "csrf_token": csrf}
            )
            assert answer.status_code == 400, (typed, answer.text[:300])


@pytest.mark.parametrize(
    "url",
    ["HTTPS://shop.example/cb", "http://shop.example/c\r\nb", "http://shop.example/cb\n", "http://shop .example/"],
)
async def test_every_callback_url_entry_point_applies_the_one_url_check(
    app: FastAPI, client: httpx.AsyncClient, url: str
) -> None:
    """Issue 43 N13: the admin and console callback-URL routes took `HTTPS://` and a CR/LF that the product
    routes refuse; every entry point now goes through the one check."""
    merchant = await make_merchant(app)
    changed = await client.post(
        f"/admin/merchants/{merchant.id}/callback-url", json={"callback_url": url}, headers=ADMIN
    )
    assert changed.status_code == 400, changed.text
    created = await client.post(
        "/admin/merchants",
        json={"name": "N13", "public_key": public_pem(rsa_key(1)), "callback_url": url},
        headers=ADMIN,
    )
    assert created.status_code == 400, created.text
    body = wallet.create_body(callback_url=url)
    walleted = await client.post(wallet.CREATE, content=json.dumps(body), headers=wallet.wallet_headers(merchant, body))
    wallet.assert_problem(walleted, 400, "01")


async def test_replay_to_with_a_url_but_another_target_is_refused(client: httpx.AsyncClient) -> None:
    answer = await client.post("/admin/callbacks/1/replay-to", json={"url": "http://127.0.0.1:9/new"}, headers=ADMIN)
    assert answer.status_code == 400, answer.text
    assert "url" in answer.text
