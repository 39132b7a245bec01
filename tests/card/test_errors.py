"""Every row of the interface's card error table, and the card-data rules (422 INVALID_CARD)."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from kasir.card.service import card_service
from kasir.db import DatabaseUnavailable
from tests.support import builders
from tests.support.builders import make_merchant
from tests.support.wire import basic_auth
from tests.support.wire.card import APPROVED, card, charge_body, post_charge


@pytest.fixture(scope="module")
async def merchant(app: FastAPI) -> builders.TestMerchant:
    return await make_merchant(app)


def card_error(response: httpx.Response, status: int, message: str) -> list[dict[str, str]]:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"statusCode", "statusMessage", "errors"}
    assert body["statusCode"] == str(status)
    assert body["statusMessage"] == message
    return list(body["errors"])


# --- 401 UNAUTHORIZED ------------------------------------------------------------------


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


async def test_unauthorized_forms(merchant: builders.TestMerchant, client: httpx.AsyncClient) -> None:
    creds = merchant.credentials
    bad = {
        "missing": None,
        "bearer": "Bearer abc",
        "not base64": "Basic ***",
        "one part": "Basic " + _b64(creds.merchant_id),
        "four parts": basic_auth(creds.merchant_id, creds.secret, creds.hash_key, "x"),
        "unknown merchant": basic_auth("MCHNOSUCH", creds.secret),
        "wrong secret": basic_auth(creds.merchant_id, creds.secret + "x"),
        "wrong hash key": basic_auth(creds.merchant_id, creds.secret, creds.hash_key + "x"),
    }
    for name, header in bad.items():
        headers = {"Content-Type": "application/json"}
        if header is not None:
            headers["Authorization"] = header
        response = await client.post("/card-v2/v1/charge", content=b"{}", headers=headers)
        [error] = card_error(response, 401, "UNAUTHORIZED")
        assert error["field"] == "authorization", name
        assert creds.secret not in response.text
        assert creds.hash_key not in response.text


async def test_both_basic_forms_are_accepted(merchant: builders.TestMerchant, client: httpx.AsyncClient) -> None:
    creds = merchant.credentials
    for header in (
        basic_auth(creds.merchant_id, creds.secret),
        basic_auth(creds.merchant_id, creds.secret, creds.hash_key),
    ):
        response = await post_charge(client, merchant, charge_body(), authorization=header)
        assert response.status_code == 200, response.text


async def test_authentication_comes_before_validation(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/card-v2/v1/charge", content=b"not json", headers={"Content-Type": "application/json"}
    )
    card_error(response, 401, "UNAUTHORIZED")


# --- 409 DUPLICATE_ORDER -----------------------------------------------------------------


async def test_order_id_and_external_id_reuse(merchant: builders.TestMerchant, client: httpx.AsyncClient) -> None:
    first = charge_body()
    assert (await post_charge(client, merchant, first)).status_code == 200
    same_order = charge_body()
    same_order["orderId"] = first["orderId"]
    [error] = card_error(await post_charge(client, merchant, same_order), 409, "DUPLICATE_ORDER")
    assert error["field"] == "orderId"
    same_external = charge_body()
    same_external["externalId"] = first["externalId"]
    [error] = card_error(await post_charge(client, merchant, same_external), 409, "DUPLICATE_ORDER")
    assert error["field"] == "externalId"


async def test_other_merchants_may_use_the_same_order_id(client: httpx.AsyncClient, app: FastAPI) -> None:
    one, two = await make_merchant(app), await make_merchant(app)
    body = charge_body()
    assert (await post_charge(client, one, body)).status_code == 200
    assert (await post_charge(client, two, body)).status_code == 200


# --- 400 VALIDATION_ERROR: Content-Type ------------------------------------------------------


@pytest.mark.parametrize("content_type", [None, "", "text/plain", "application/x-www-form-urlencoded", "json"])
async def test_charge_requires_json_content_type(
    merchant: builders.TestMerchant, client: httpx.AsyncClient, content_type: str | None
) -> None:
    # Issue 26: interface.md endpoint 6 requires Content-Type application/json, as the other routes do.
    from tests.support.wire import auth, compact
    from tests.support.wire.card import CHARGE

    headers = {"Authorization": auth(merchant)}
    if content_type is not None:
        headers["Content-Type"] = content_type
    body = charge_body()
    response = await client.post(CHARGE, content=compact(body).encode(), headers=headers)
    [error] = card_error(response, 400, "VALIDATION_ERROR")
    assert error["field"] == "Content-Type"
    # Nothing was created: the same body with the right type is accepted afterwards.
    assert (await post_charge(client, merchant, body)).status_code == 200


async def test_charge_takes_json_content_type_with_parameters(
    merchant: builders.TestMerchant, client: httpx.AsyncClient
) -> None:
    from tests.support.wire import auth, compact
    from tests.support.wire.card import CHARGE

    headers = {"Authorization": auth(merchant), "Content-Type": "Application/JSON; charset=utf-8"}
    response = await client.post(CHARGE, content=compact(charge_body()).encode(), headers=headers)
    assert response.status_code == 200, response.text


# --- 422 INVALID_CARD --------------------------------------------------------------------

CARD_CASES: list[tuple[dict[str, Any], list[str]]] = [
    ({"cardNumber": "4811 1111 1111"}, ["cardDetails.cardNumber"]),  # 12 digits
    ({"cardNumber": "4" * 20}, ["cardDetails.cardNumber"]),  # 20 digits
    ({"cardNumber": "4811-1111-1111-1114"}, ["cardDetails.cardNumber"]),
    ({"cardNumber": "4811 1111 1111 1115"}, ["cardDetails.cardNumber"]),  # Luhn
    ({"cardExpiredMonth": "13"}, ["cardDetails.cardExpiredMonth"]),
    ({"cardExpiredMonth": "0"}, ["cardDetails.cardExpiredMonth"]),
    ({"cardExpiredYear": "202"}, ["cardDetails.cardExpiredYear"]),
    ({"cardExpiredYear": "2020"}, ["cardDetails.cardExpiredYear"]),  # in the past
    ({"cardExpiredYear": "20"}, ["cardDetails.cardExpiredYear"]),  # YY, in the past
    ({"cardCvn": "12"}, ["cardDetails.cardCvn"]),
    ({"cardCvn": "12a"}, ["cardDetails.cardCvn"]),
    ({"cardHolderName": "R2-D2"}, ["cardDetails.cardHolderName"]),
    (
        {"cardNumber": "1234", "cardExpiredMonth": "00", "cardCvn": "1"},
        ["cardDetails.cardNumber", "cardDetails.cardExpiredMonth", "cardDetails.cardCvn"],
    ),
]


@pytest.mark.parametrize(("change", "expected"), CARD_CASES)
async def test_invalid_card(
    merchant: builders.TestMerchant, client: httpx.AsyncClient, change: dict[str, Any], expected: list[str]
) -> None:
    body = charge_body()
    body["cardDetails"] = card(APPROVED, **change)
    errors = card_error(await post_charge(client, merchant, body), 422, "INVALID_CARD")
    assert [e["field"] for e in errors] == expected
    for value in change.values():
        if len(value) > 4:
            assert value not in str(errors)  # messages never repeat card data


async def test_expiry_this_month_is_still_valid(merchant: builders.TestMerchant, client: httpx.AsyncClient) -> None:
    from kasir.kit.clock import clock

    now = clock.local_now()
    body = charge_body()
    body["cardDetails"] = card(APPROVED, cardExpiredMonth=f"{now.month:02d}", cardExpiredYear=str(now.year))
    assert (await post_charge(client, merchant, body)).status_code == 200


# --- 500 INTERNAL_ERROR and 503 SERVICE_UNAVAILABLE ------------------------------------------


async def test_a_bug_answers_500_in_the_card_format(
    merchant: builders.TestMerchant, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(card_service, "charge", broken)
    response = await post_charge(client, merchant, charge_body())
    assert card_error(response, 500, "INTERNAL_ERROR") == [{"field": "", "message": "General Error"}]
    assert "boom" not in response.text


async def test_database_unavailable_answers_503(
    merchant: builders.TestMerchant, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def unreachable(*_args: Any, **_kwargs: Any) -> Any:
        raise DatabaseUnavailable("PostgreSQL: ConnectionRefusedError: INSERT ... connection refused")

    monkeypatch.setattr(card_service, "charge", unreachable)
    response = await post_charge(client, merchant, charge_body())
    [error] = card_error(response, 503, "SERVICE_UNAVAILABLE")
    assert "retry" in error["message"]
    assert "INSERT" not in response.text
    assert response.headers["retry-after"] == "1"


async def test_unknown_card_route_answers_in_the_card_format(client: httpx.AsyncClient) -> None:
    card_error(await client.post("/card-v2/v1/refund"), 404, "NOT_FOUND")
