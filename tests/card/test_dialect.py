"""The provider SDK's snake_case card dialect (issue 29): its three routes, headers, answers, stored
cards, instalments, sub-merchants and callbacks, through the real card service and a real receiver."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from kasir_client import SignatureError, verify_payment_page_callback
from sqlalchemy import select

from kasir.card.models import CardOrder, StoredCard
from kasir.card.repository import CardAttemptRow, CardOrderRow, card_repository
from kasir.config import get_settings
from kasir.db import fetch_one, fetch_value
from tests.conftest import TEST_ADMIN_TOKEN
from tests.support.builders import make_merchant
from tests.support.cli import kasir_beside_app
from tests.support.receiver import CallbackReceiver, ReceivedRequest
from tests.support.wire import auth, compact, x_req_signature
from tests.support.wire.callbacks import callback_signature, sub_merchant_signature
from tests.support.wire.card import CHARGE, charge_body, post_charge
from tests.support.wire.dialect import (
    APPROVED,
    CHALLENGE,
    DECLINED,
    DIRECT_V1,
    DIRECT_V2,
    INSUFFICIENT,
    dialect_body,
    dialect_headers,
    post_dialect,
    reference,
)

ADMIN = {"Authorization": f"Bearer {TEST_ADMIN_TOKEN}"}
DIALECT_CALLBACK_FIELDS = {"payment_mode", "tenor", "sub_merchant_id"}


async def stored(app: FastAPI, transaction_id: str) -> tuple[CardOrderRow, list[CardAttemptRow]]:
    async with app.state.database.unit_of_work(read_only=True) as session:
        order = await card_repository.get(session, transaction_id)
        assert order is not None
        return order, await card_repository.attempts(session, transaction_id)


def callback_of(
    request: ReceivedRequest, merchant: Any, body: dict[str, Any], sub: str | None = None
) -> dict[str, Any]:
    """A dialect payment's callback: the interface's fields and the dialect's three, signed as documented."""
    payload = dict(request.json())
    assert DIALECT_CALLBACK_FIELDS <= set(payload)
    x_req = x_req_signature(merchant.credentials.hash_key, body["external_id"], body["order_id"])
    expected = (
        sub_merchant_signature(payload["transaction_id"], x_req, sub)
        if sub
        else callback_signature(payload["transaction_id"], x_req)
    )
    assert request.headers["svc-signature"] == expected
    assert payload["external_id"] == body["external_id"]
    assert payload["order_id"] == body["order_id"]
    assert payload["sub_merchant_id"] == sub
    return payload


# --- the 3-D Secure charge: data.html or data.link ---------------------------------------------


async def test_charge_answers_an_auto_submitting_page_by_default_and_the_link_on_request(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    merchant = await make_merchant(app)
    body = dialect_body(number=APPROVED)
    response = await post_dialect(client, merchant, CHARGE, body)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert set(answer) == {"response_code", "response_message", "data"}
    assert (answer["response_code"], answer["response_message"]) == ("00", "Success")
    assert set(answer["data"]) == {"html"}
    page = answer["data"]["html"]
    action = re.search(r'<form [^>]*method="get" action="([^"]+)"', page)
    assert action is not None
    assert 'onload="document.forms[0].submit()"' in page
    order_id = action.group(1).rsplit("/", 1)[1]
    assert action.group(1) == f"{get_settings().public_url}/card/pages/{order_id}"
    order, [attempt] = await stored(app, order_id)
    assert (order.status, order.dialect, order.external_id) == ("SUCCESS", "v3", body["external_id"])
    assert (order.payment_channel, attempt.acq) == ("BCACC", "BCA")  # BCAPG is charged on BCA's channel

    body = dialect_body(number=APPROVED)
    linked = await post_dialect(client, merchant, CHARGE, body, response_type="url")
    assert linked.status_code == 200, linked.text
    assert set(linked.json()["data"]) == {"link"}
    assert linked.json()["data"]["link"].startswith(f"{get_settings().public_url}/card/pages/CARD")

    body = dialect_body(number=APPROVED)
    refused = await post_dialect(client, merchant, CHARGE, body, response_type="json")
    assert refused.json() == {"response_code": "01", "response_message": "response-type must be html or url"}

    # A declined card on the 3-D Secure charge: the link is the payment page, open for another attempt,
    # though the dialect's body named no items and no addresses.
    body = dialect_body(number=DECLINED, items=False)
    del body["billing_address"]
    link = (await post_dialect(client, merchant, CHARGE, body, response_type="url")).json()["data"]["link"]
    page = await client.get(link.removeprefix(get_settings().public_url))
    assert page.status_code == 200, page.text
    assert 'name="cardNumber"' in page.text  # the form, for the next attempt


async def test_a_3ds_card_goes_to_the_challenge_and_a_sub_merchants_callback_is_signed_with_its_id(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    merchant = await make_merchant(app)
    added = await client.post(
        f"/admin/merchants/{merchant.id}/sub-merchants", json={"sub_merchant_id": "TOKO-1"}, headers=ADMIN
    )
    assert added.status_code == 201, added.text
    body = dialect_body(number=CHALLENGE, callback_url=receiver.url("/dialect/3ds"))
    response = await post_dialect(client, merchant, CHARGE, body, response_type="url", sub_merchant_id="TOKO-1")
    assert response.status_code == 200, response.text
    link = response.json()["data"]["link"]
    transaction_id = link.split("/card/pages/")[1].split("/")[0]
    assert link == f"{get_settings().public_url}/card/pages/{transaction_id}/3ds"
    order, [attempt] = await stored(app, transaction_id)
    assert (order.status, attempt.status, order.sub_merchant_id) == ("AUTHENTICATING", "CHALLENGE", "TOKO-1")

    path = link.removeprefix(get_settings().public_url)
    otp_page = await client.get(path)
    otp = re.search(r'id="staging-otp">(\d{6})<', otp_page.text)
    hidden = dict(re.findall(r'name="(attempt|csrf)" value="([^"]+)"', otp_page.text))
    assert otp is not None
    passed = await client.post(path, data={**hidden, "otp": otp.group(1)})
    assert passed.status_code == 303
    [callback] = await receiver.wait_for(1, path="/dialect/3ds")
    payload = callback_of(callback, merchant, body, sub="TOKO-1")
    assert payload["transaction_status"] == "SUCCESS"
    # The SDK's verifier checks the sub-merchant's signature: the one it is told, else the one the callback names
    # (as verify_va_callback; the signature covers it), never another.
    order = (body["external_id"], body["order_id"])
    hash_key = merchant.credentials.hash_key
    event = verify_payment_page_callback(
        callback.body, callback.headers, hash_key=hash_key, order=order, sub_merchant_id="TOKO-1"
    )
    assert event.transaction_id == transaction_id
    assert verify_payment_page_callback(callback.body, callback.headers, hash_key=hash_key, order=order).sub_merchant_id
    with pytest.raises(SignatureError):
        verify_payment_page_callback(
            callback.body, callback.headers, hash_key=hash_key, order=order, sub_merchant_id="TOKO-2"
        )
    assert (payload["payment_mode"], payload["tenor"]) == ("CLOSE", 0)
    assert payload["card_token"] is not None  # store_token defaults to true

    # A sub-merchant the merchant does not have: 04, and nothing is charged.
    other = dialect_body(number=APPROVED)
    refused = await post_dialect(client, merchant, CHARGE, other, sub_merchant_id="TOKO-2")
    assert refused.json() == {
        "response_code": "04",
        "response_message": "sub-merchant-id is not a sub-merchant of this merchant",
    }
    async with app.state.database.unit_of_work(read_only=True) as session:
        assert (
            await fetch_value(session, select(CardOrder.id).where(CardOrder.external_id == other["external_id"]))
            is None
        )


# --- the direct charges ----------------------------------------------------------------------


async def test_direct_charge_answers_the_outcome_and_a_token(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    merchant = await make_merchant(app)
    body = dialect_body(number=APPROVED, callback_url=receiver.url("/dialect/direct"), channel="CIMBCC")
    response = await post_dialect(client, merchant, DIRECT_V1, body)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert (answer["response_code"], answer["response_message"]) == ("00", "Success")
    data = answer["data"]
    assert set(data) == {"token", "status", "transaction_code", "transaction_description", "transaction_data"}
    assert (data["status"], data["transaction_code"], data["transaction_description"]) == ("SUCCESS", "00", "Approved")
    assert re.fullmatch(r"CTK[A-Z0-9]{32}", data["token"])
    tx = data["transaction_data"]
    assert set(tx) == {"external_id", "receipt_no", "order_id", "transaction_id", "approval_code"}
    assert (tx["external_id"], tx["order_id"]) == (body["external_id"], body["order_id"])
    assert tx["receipt_no"] == f"{tx['transaction_id']}-1"
    assert re.fullmatch(r"[0-9]{6}", tx["approval_code"])
    order, [attempt] = await stored(app, tx["transaction_id"])
    assert (order.status, order.card_token, attempt.acq) == ("SUCCESS", data["token"], "CIMB")

    [callback] = await receiver.wait_for(1, path="/dialect/direct")
    payload = callback_of(callback, merchant, body)  # no sub-merchant: the interface's formula
    assert (payload["transaction_status"], payload["card_token"]) == ("SUCCESS", data["token"])
    assert (payload["payment_mode"], payload["tenor"], payload["amount"]) == ("CLOSE", 0, 150000)


async def test_a_declined_card_is_00_with_status_failed_and_the_declines_code(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    merchant = await make_merchant(app)
    for number, code, description in (
        (DECLINED, "05", "Card declined by the issuer"),
        (INSUFFICIENT, "51", "Insufficient funds"),
        ("4000000000000069", "54", "Expired card"),
        ("5100000000000511", "91", "Issuer not responding"),
        ("4111111111111111", "14", "Card not recognised by the staging issuer; use a test card"),
        (CHALLENGE, "1A", "3-D Secure authentication is not available on a direct charge"),
    ):
        body = dialect_body(number=number)
        response = await post_dialect(client, merchant, DIRECT_V1, body)
        assert response.status_code == 200, response.text
        answer = response.json()
        assert answer["response_code"] == "00"
        data = answer["data"]
        assert (data["status"], data["transaction_code"], data["transaction_description"]) == (
            "FAILED",
            code,
            description,
        )
        assert data["token"] is None
        assert "approval_code" not in data["transaction_data"]
        order, [attempt] = await stored(app, data["transaction_data"]["transaction_id"])
        assert (order.status, order.attempts_failed, attempt.status) == ("PENDING", 1, "FAILED")
        assert order.card_token is None


async def test_v2_takes_a_card_without_its_cvn_and_v1_does_not(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    body = dialect_body(number=APPROVED, cvn=None)
    refused = await post_dialect(client, merchant, DIRECT_V1, body)
    assert refused.status_code == 400
    assert refused.json() == {"response_code": "01", "response_message": "card_details.card_cvn is required"}
    charged = await post_dialect(client, merchant, DIRECT_V2, body)
    assert charged.status_code == 200, charged.text
    assert charged.json()["data"]["status"] == "SUCCESS"
    bad_cvn = dialect_body(number=APPROVED, cvn="12")
    assert (await post_dialect(client, merchant, DIRECT_V2, bad_cvn)).json() == {
        "response_code": "01",
        "response_message": "card_details.card_cvn must be 3 or 4 digits",
    }


# --- stored cards ------------------------------------------------------------------------------


async def test_a_stored_card_is_charged_by_its_token_by_its_merchant_only(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    merchant, stranger = await make_merchant(app), await make_merchant(app)
    first = dialect_body(number=APPROVED)
    token = (await post_dialect(client, merchant, DIRECT_V1, first)).json()["data"]["token"]
    async with app.state.database.unit_of_work(read_only=True) as session:
        card = await fetch_one(session, select(*StoredCard.__table__.c).where(StoredCard.token == token))
        assert card is not None
        assert (card.merchant_id, card.masked_card, card.card_brand) == (merchant.id, "481111******1114", "VISA")
        values = [str(value) for value in card]
        assert not any(APPROVED in value for value in values)  # never the number
        assert "123" not in values  # never the CVN

    again = dialect_body(
        number=APPROVED, callback_url=receiver.url("/dialect/token"), card_details={"token": token, "card_cvn": "123"}
    )
    response = await post_dialect(client, merchant, DIRECT_V1, again)
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    assert (data["status"], data["token"]) == ("SUCCESS", token)
    order, [attempt] = await stored(app, data["transaction_data"]["transaction_id"])
    assert (order.status, attempt.masked_card) == ("SUCCESS", "481111******1114")
    [callback] = await receiver.wait_for(1, path="/dialect/token")
    assert callback_of(callback, merchant, again)["transaction_status"] == "SUCCESS"

    # v2: the token without the CVN; the 3-D Secure charge takes a token too.
    tokened = dialect_body(card_details={"token": token})
    assert (await post_dialect(client, merchant, DIRECT_V2, tokened)).json()["data"]["status"] == "SUCCESS"
    tokened = dialect_body(card_details={"token": token, "card_cvn": "123"})
    assert (await post_dialect(client, merchant, CHARGE, tokened)).json()["response_code"] == "00"

    theirs = dialect_body(card_details={"token": token, "card_cvn": "123"})
    refused = await post_dialect(client, stranger, DIRECT_V1, theirs)
    assert refused.json() == {
        "response_code": "01",
        "response_message": "card_details.token is not a card stored for this merchant",
    }
    assert "481111" not in refused.text
    unknown = dialect_body(card_details={"token": "CTK" + "0" * 32, "card_cvn": "123"})
    assert (await post_dialect(client, merchant, DIRECT_V1, unknown)).json() == refused.json()

    # store_token false: no token, nothing stored.
    unstored = dialect_body(number=APPROVED, store_token=False)
    data = (await post_dialect(client, merchant, DIRECT_V1, unstored)).json()["data"]
    assert (data["status"], data["token"]) == ("SUCCESS", None)
    async with app.state.database.unit_of_work(read_only=True) as session:
        count = await fetch_value(
            session,
            select(StoredCard.token).where(StoredCard.card_order_id == data["transaction_data"]["transaction_id"]),
        )
        assert count is None


# --- instalments -----------------------------------------------------------------------------


async def test_instalments_are_recorded_and_shown_in_the_callback(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    merchant = await make_merchant(app)
    body = dialect_body(mode="INSTALLMENT", tenor=6, callback_url=receiver.url("/dialect/tenor"))
    data = (await post_dialect(client, merchant, DIRECT_V1, body)).json()["data"]
    assert data["status"] == "SUCCESS"
    order, [attempt] = await stored(app, data["transaction_data"]["transaction_id"])
    assert (order.tenor, attempt.tenor) == ("6", "6")
    [callback] = await receiver.wait_for(1, path="/dialect/tenor")
    payload = callback_of(callback, merchant, body)
    assert (payload["payment_mode"], payload["tenor"]) == ("INSTALLMENT", 6)

    for mode, tenor, message in (
        ("INSTALLMENT", None, "payment_options.tenor must be 3, 6 or 12 when payment_mode is INSTALLMENT"),
        ("INSTALLMENT", 0, "payment_options.tenor must be 3, 6 or 12 when payment_mode is INSTALLMENT"),
        ("INSTALLMENT", 5, "payment_options.tenor must be one of 0, 3, 6, 12"),
        ("CLOSE", 3, "payment_options.tenor must be 0 or absent when payment_mode is CLOSE"),
    ):
        wrong = dialect_body(mode=mode, tenor=tenor)
        answer = (await post_dialect(client, merchant, DIRECT_V1, wrong)).json()
        assert answer == {"response_code": "01", "response_message": message}, (mode, tenor)


# --- headers and refusals ------------------------------------------------------------------------


async def test_wrong_signature_credentials_disabled_merchant_and_x_version(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    merchant = await make_merchant(app)
    for path in (CHARGE, DIRECT_V1, DIRECT_V2):
        body = dialect_body()
        signed_wrong = await post_dialect(client, merchant, path, body, hash_key="not-the-hash-key")
        assert signed_wrong.status_code == 401
        assert signed_wrong.json() == {
            "response_code": "04",
            "response_message": "Unauthorized. x-req-signature does not match "
            "sha256(hash_key + external_id + order_id)",
        }
        wrong_secret = await post_dialect(client, merchant, path, body, secret="not-the-secret")
        assert (wrong_secret.status_code, wrong_secret.json()["response_code"]) == (401, "04")
        version = await post_dialect(client, merchant, path, body, version="v2")
        assert (version.status_code, version.json()) == (
            400,
            {"response_code": "01", "response_message": "x-version must be v3"},
        )
        missing = await post_dialect(client, merchant, path, body, version=None)
        assert missing.json() == {"response_code": "01", "response_message": "x-version is required"}

    disabled = await make_merchant(app)
    assert (await client.post(f"/admin/merchants/{disabled.id}/disable", headers=ADMIN)).status_code == 200
    refused = await post_dialect(client, disabled, DIRECT_V1, dialect_body())
    assert (refused.status_code, refused.json()["response_code"]) == (401, "04")


async def test_a_camelcase_charge_with_the_dialects_headers_is_kasirs_own_card_api(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    """docs/decisions.md §12.3: on the shared charge path the body decides, not `x-version` or `x-req-signature`."""
    merchant = await make_merchant(app)
    body = charge_body()
    headers = {
        "Content-Type": "application/json",
        "Authorization": auth(merchant),
        "x-version": "v3",
        "x-req-signature": x_req_signature(merchant.credentials.hash_key, body["externalId"], body["orderId"]),
    }
    charged = await client.post(CHARGE, content=compact(body), headers=headers)
    assert charged.status_code == 200, charged.text
    assert (charged.json()["statusCode"], charged.json()["statusMessage"]) == ("00", "SUCCESS")
    # Its refusals are the card format's too: a missing field, wrong credentials.
    del body["orderId"]
    missing = await client.post(CHARGE, content=compact(body), headers=headers)
    assert (missing.status_code, missing.json()["statusMessage"]) == (400, "VALIDATION_ERROR")
    assert missing.json()["errors"][0]["field"] == "orderId"
    wrong = await client.post(
        CHARGE, content=compact(charge_body()), headers={**headers, "Authorization": auth(merchant, secret="nope")}
    )
    assert (wrong.status_code, wrong.json()["statusMessage"]) == (401, "UNAUTHORIZED")


async def test_validation_names_the_field_and_the_reason(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    cases: list[tuple[dict[str, Any], str]] = [
        (dialect_body(payment_details={"transaction_description": "x"}), "payment_details.amount is required"),
        (
            dialect_body(payment_details={"amount": 1000, "transaction_description": "x"}),
            "payment_details.amount must equal the sum of item_details amount × qty (150000)",
        ),
        (dialect_body(payment_channel="OVO"), "payment_channel must be one of BCAPG, CIMBPG, BCACC, CIMBCC, BRICC"),
        (dialect_body(payment_method="card"), "payment_method must be one of CARD"),
        (dialect_body(number="4811111111111115"), "card_details.card_number is not a valid card number (check digit)"),
        (
            dialect_body(card_details={"card_number": APPROVED, "card_cvn": "123"}),
            "card_details.card_holder_name is required (or card_details.token); "
            "card_details.card_expired_month is required (or card_details.token); "
            "card_details.card_expired_year is required (or card_details.token)",
        ),
    ]
    body = dialect_body()
    body["customer_details"]["email"] = "not-an-email"
    cases.append((body, "customer_details.email must be an email address"))
    for body, message in cases:
        response = await post_dialect(client, merchant, DIRECT_V1, body)
        assert response.status_code == 400, response.text
        assert response.json() == {"response_code": "01", "response_message": message}
        assert APPROVED not in response.text

    # Without items the whole amount is one item: still charged.
    response = await post_dialect(client, merchant, DIRECT_V1, dialect_body(items=False))
    assert response.json()["data"]["status"] == "SUCCESS"


async def test_a_repeated_external_id_or_order_id_is_03(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    first = dialect_body()
    assert (await post_dialect(client, merchant, DIRECT_V1, first)).json()["response_code"] == "00"
    same_external = dialect_body(external_id=first["external_id"])
    same_order = dialect_body(order_id=first["order_id"])
    for body, field in ((same_external, "external_id"), (same_order, "order_id")):
        for path in (CHARGE, DIRECT_V1):
            response = await post_dialect(client, merchant, path, body)
            assert response.status_code == 409
            assert response.json() == {
                "response_code": "03",
                "response_message": f"{field} is already used; use a new unused {field}",
            }
    # A camelCase charge's references are the same namespace.
    camel = charge_body(number=APPROVED)
    assert (await post_charge(client, merchant, camel)).status_code == 200
    clash = dialect_body(order_id=camel["orderId"])
    assert (await post_dialect(client, merchant, DIRECT_V1, clash)).json()["response_code"] == "03"


async def test_an_idempotency_key_replays_the_dialects_answer(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    body = dialect_body()
    headers = {**dialect_headers(merchant, body), "X-Idempotency-Key": reference("KEY")}
    first = await client.post(DIRECT_V1, content=compact(body), headers=headers)
    again = await client.post(DIRECT_V1, content=compact(body), headers=headers)
    assert first.status_code == again.status_code == 200
    assert first.content == again.content
    assert again.headers["Idempotent-Replayed"] == "true"


async def test_the_camelcase_charge_is_unchanged_beside_the_dialect(app: FastAPI, client: httpx.AsyncClient) -> None:
    """The same path, the camelCase body: the camelCase answer, and its errors in the card format."""
    merchant = await make_merchant(app)
    body = charge_body(number=APPROVED, additionalData='{"external_id": "x", "payment_details": 1}')
    response = await post_charge(client, merchant, body)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert list(answer) == ["statusCode", "statusMessage", "data"]
    assert list(answer["data"]) == ["transactionId", "externalId", "paymentStatus", "link"]
    order, _ = await stored(app, answer["data"]["transactionId"])
    assert (order.dialect, order.sub_merchant_id) == (None, None)
    broken = await post_charge(client, merchant, {"orderId": "x"})
    assert broken.status_code == 400
    assert broken.json()["statusMessage"] == "VALIDATION_ERROR"
    unauthorized = await post_charge(client, merchant, charge_body(), authorization="Basic Og==")
    assert unauthorized.json()["statusMessage"] == "UNAUTHORIZED"


# --- sub-merchants: admin API and CLI ------------------------------------------------------------


async def test_sub_merchants_through_the_admin_api_and_the_cli(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    base = f"/admin/merchants/{merchant.id}/sub-merchants"
    assert (
        await client.post(base, json={"sub_merchant_id": "A-1", "name": "Cabang A"}, headers=ADMIN)
    ).status_code == 201
    again = await client.post(base, json={"sub_merchant_id": "A-1"}, headers=ADMIN)
    assert again.status_code == 409
    bad = await client.post(base, json={"sub_merchant_id": "no spaces"}, headers=ADMIN)
    assert bad.status_code == 400
    assert (await client.get(base)).status_code == 401  # admin only

    added = await kasir_beside_app("merchant", "sub-merchant", "add", merchant.id, "B-2", "--name", "Cabang B")
    assert added.exit_code == 0, added.output
    listed = await kasir_beside_app("merchant", "sub-merchant", "list", merchant.id, "--json")
    assert listed.exit_code == 0, listed.output
    assert json.loads(listed.output) == [
        {"sub_merchant_id": "A-1", "name": "Cabang A"},
        {"sub_merchant_id": "B-2", "name": "Cabang B"},
    ]
    body = dialect_body()
    charged = await post_dialect(client, merchant, DIRECT_V1, body, sub_merchant_id="B-2")
    assert charged.json()["data"]["status"] == "SUCCESS"
    order, _ = await stored(app, charged.json()["data"]["transaction_data"]["transaction_id"])
    assert order.sub_merchant_id == "B-2"

    removed = await kasir_beside_app("merchant", "sub-merchant", "remove", merchant.id, "B-2")
    assert removed.exit_code == 0, removed.output
    assert (await client.delete(f"{base}/A-1", headers=ADMIN)).status_code == 204
    assert (await client.get(base, headers=ADMIN)).json() == {"merchant_id": merchant.id, "sub_merchants": []}
    refused = await post_dialect(client, merchant, DIRECT_V1, dialect_body(), sub_merchant_id="B-2")
    assert refused.json()["response_code"] == "04"


async def test_the_worker_answers_a_stopped_dialect_charge_in_the_dialect(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    """Held and asked, never recorded (the process stopped): the worker's job records the acquirer's answer
    and keeps the dialect's answer with the key, which a retry then gets."""
    from datetime import timedelta

    from kasir.auth.basic import basic
    from kasir.card.dialect import DIALECT_ANSWER, answer_details, parse_dialect
    from kasir.card.service import card_service
    from kasir.idempotency.repository import NewKey, idempotency_repository
    from kasir.idempotency.service import KeyRef, request_fingerprint
    from kasir.kit.clock import clock
    from kasir.processors.calls import PendingCall, finish_stalled_calls, stalled_after
    from kasir.processors.registry import card_acquirer

    merchant = await make_merchant(app)
    body = dialect_body(number=APPROVED)
    raw = compact(body).encode()
    headers = dialect_headers(merchant, body)
    database = app.state.database
    scope, key = f"POST {DIRECT_V1}", reference("KEY")
    caller = await basic.authenticate(database, headers["Authorization"], address="127.0.0.1")
    charge = parse_dialect(json.loads(raw), now=clock.local_now(), cvn_required=True)
    async with database.unit_of_work() as session:
        now = clock.now()
        claimed = NewKey(merchant.id, scope, key, request_fingerprint(raw), now, now + timedelta(hours=1))
        assert await idempotency_repository.claim(session, claimed, wait_seconds=0.5)
        pending = await card_service.charge(
            session, caller, charge.request, charge.card, save_card=True, dialect="v3", sub_merchant_id=None
        )
        assert isinstance(pending, PendingCall)
        pending.call.details[DIALECT_ANSWER] = answer_details("direct", None)
        await pending.hold(session, KeyRef(merchant.id, scope, key))
    assert pending.call.card is not None
    await card_acquirer(pending.call.details["channel"]).charge(pending.call.card)  # asked; the process "stopped"
    clock.advance(stalled_after().total_seconds() + 1)
    try:
        await finish_stalled_calls(database)  # this job, or the app's own worker meanwhile
    finally:
        clock.reset()
    replay = await client.post(DIRECT_V1, content=raw, headers={**headers, "X-Idempotency-Key": key})
    assert replay.status_code == 200, replay.text
    assert replay.headers["Idempotent-Replayed"] == "true"
    answer = replay.json()
    assert (answer["response_code"], answer["data"]["status"]) == ("00", "SUCCESS")
    assert answer["data"]["transaction_data"]["order_id"] == body["order_id"]
    assert re.fullmatch(r"CTK[A-Z0-9]{32}", answer["data"]["token"])


async def test_the_provider_sdks_requests_get_its_format_where_no_route_answers(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    """The SDK reads only its dialect's answers (wallet format): an unknown /card-v2/ path, or a request refused
    before routing (a body past KASIR_MAX_BODY_BYTES), answers in it when the SDK's headers say who sent it."""
    merchant = await make_merchant(app)
    body = dialect_body()
    unknown = await post_dialect(client, merchant, "/card-v2/v1/no-such-call", body)
    assert unknown.status_code == 404
    assert set(unknown.json()) >= {"response_code", "response_message"}, unknown.text
    assert "statusCode" not in unknown.json()
    # Kasir's own card API (no x-req-signature, no x-version) keeps the card format there.
    camel = await client.post("/card-v2/v1/no-such-call", json=charge_body())
    assert camel.status_code == 404
    assert "statusCode" in camel.json(), camel.text
    assert "response_code" not in camel.json()

    too_big = {**body, "padding": "x" * (get_settings().max_body_bytes + 1)}
    refused = await post_dialect(client, merchant, DIRECT_V1, too_big)
    assert refused.status_code == 413, refused.text
    assert set(refused.json()) >= {"response_code", "response_message"}, refused.text
