"""Every field rule of the charge request: 400 VALIDATION_ERROR naming exactly the violated fields."""

from __future__ import annotations

import copy
import ipaddress
import json
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from hypothesis import given, settings
from hypothesis import strategies as st

from kasir.card.cards import InvalidCardData
from kasir.card.schemas import (
    CardValidationError,
    ChargeRequest,
    parse_charge_request,
    parse_charge_request_slowly,
)
from kasir.kit.clock import clock
from tests.support import builders
from tests.support.builders import make_merchant
from tests.support.wire import compact
from tests.support.wire.card import charge_body, jakarta_in, post_charge, with_change

A64 = "A" * 64


@pytest.fixture(scope="module")
async def merchant(app: FastAPI) -> builders.TestMerchant:
    return await make_merchant(app)


def fields(response: httpx.Response) -> list[str]:
    body = response.json()
    assert response.status_code == 400, response.text
    assert body["statusCode"] == "400"
    assert body["statusMessage"] == "VALIDATION_ERROR"
    assert all(isinstance(e["message"], str) and e["message"] for e in body["errors"])
    return [e["field"] for e in body["errors"]]


CASES: list[tuple[str, Any, list[str]]] = [
    ("externalId", ..., ["externalId"]),
    ("externalId", "", ["externalId"]),
    ("externalId", A64 + "A", ["externalId"]),
    ("orderId", A64 + "A", ["orderId"]),
    ("orderId", 12345, ["orderId"]),
    ("currency", "USD", ["currency"]),
    ("currency", ..., ["currency"]),
    ("paymentMethod", "cash", ["paymentMethod"]),
    ("paymentChannel", "VISA", ["paymentChannel"]),
    ("paymentChannel", ..., ["paymentChannel"]),
    ("paymentMode", "close", ["paymentMode"]),
    ("paymentMode", "HALF", ["paymentMode"]),
    ("paymentDetails", ..., ["paymentDetails"]),
    ("paymentDetails.amount", 0, ["paymentDetails.amount"]),
    ("paymentDetails.amount", -5, ["paymentDetails.amount"]),
    ("paymentDetails.amount", "150000", ["paymentDetails.amount"]),
    ("paymentDetails.amount", 150000.5, ["paymentDetails.amount"]),
    ("paymentDetails.amount", 150001, ["paymentDetails.amount"]),  # not the items' total
    ("paymentDetails.isCustomerPayingFee", ..., ["paymentDetails.isCustomerPayingFee"]),
    ("paymentDetails.isCustomerPayingFee", "no", ["paymentDetails.isCustomerPayingFee"]),
    ("paymentDetails.transactionDescription", ..., ["paymentDetails.transactionDescription"]),
    ("paymentDetails.expiredTime", "tomorrow", ["paymentDetails.expiredTime"]),
    ("paymentDetails.expiredTime", "2026-01-01T10:00:00", ["paymentDetails.expiredTime"]),  # no offset
    ("itemDetails", [], ["itemDetails"]),
    ("itemDetails", ..., ["itemDetails"]),
    ("itemDetails[0].qty", 0, ["itemDetails[0].qty"]),
    ("itemDetails[0].qty", 1000, ["itemDetails[0].qty"]),
    ("itemDetails[0].qty", 3, ["paymentDetails.amount"]),
    ("itemDetails[0].qty", "2", ["itemDetails[0].qty"]),
    ("itemDetails[1].itemId", ..., ["itemDetails[1].itemId"]),
    ("itemDetails[1].name", "", ["itemDetails[1].name"]),
    ("itemDetails[0].amount", "50000", ["itemDetails[0].amount"]),
    ("itemDetails[0].amount", -1, ["itemDetails[0].amount"]),
    ("customerDetails.email", "siti-at-example", ["customerDetails.email"]),
    ("customerDetails.fullName", ..., ["customerDetails.fullName"]),
    ("customerDetails.phone", "12ab", ["customerDetails.phone"]),
    ("customerDetails.ipAddress", "300.1.1.1", ["customerDetails.ipAddress"]),
    ("billingAddress.country", "XX", ["billingAddress.country"]),
    ("billingAddress.country", "id", ["billingAddress.country"]),
    ("shippingAddress.country", "Indonesia", ["shippingAddress.country"]),
    ("shippingAddress.postalCode", ..., ["shippingAddress.postalCode"]),
    ("billingAddress.phone", "+", ["billingAddress.phone"]),
    ("billingAddress", ..., ["billingAddress"]),
    ("returnUrl", ..., ["returnUrl"]),
    ("returnUrl", "shop.example/return", ["returnUrl"]),
    ("callbackUrl", "ftp://shop.example/cb", ["callbackUrl"]),
    ("paymentOptions", {"tenor": "4"}, ["paymentOptions.tenor"]),
    ("paymentOptions", {"tenor": 3}, ["paymentOptions.tenor"]),
    ("paymentOptions", {"useRewards": "yes"}, ["paymentOptions.useRewards"]),
    ("paymentOptions", {"campaign_code": "c" * 65}, ["paymentOptions.campaign_code"]),
]

# Issue 26: every rule of the card data is 422 INVALID_CARD (these were 400 before), every failing card field listed.
CARD_CASES: list[tuple[str, Any, list[str]]] = [
    ("cardDetails", ..., ["cardDetails"]),
    ("cardDetails", "4811111111111114", ["cardDetails"]),
    ("cardDetails.cardCvn", ..., ["cardDetails.cardCvn"]),
    ("cardDetails.cardNumber", "", ["cardDetails.cardNumber"]),
    ("cardDetails.cardNumber", 4811111111111114, ["cardDetails.cardNumber"]),
    ("cardDetails.cardNumber", "4" * 40, ["cardDetails.cardNumber"]),
    ("cardDetails.cardExpiredMonth", "9", ["cardDetails.cardExpiredMonth"]),
    ("cardDetails.cardExpiredMonth", 12, ["cardDetails.cardExpiredMonth"]),
    ("cardDetails.cardExpiredYear", "20301", ["cardDetails.cardExpiredYear"]),
    ("cardDetails.cardCvn", "12345", ["cardDetails.cardCvn"]),
    ("cardDetails.cardHolderName", "S" * 65, ["cardDetails.cardHolderName"]),
]


@pytest.mark.parametrize(("path", "value", "expected"), CASES, ids=[f"{c[0]}={c[1]!r}"[:60] for c in CASES])
async def test_each_rule_names_its_field(
    merchant: builders.TestMerchant, client: httpx.AsyncClient, path: str, value: Any, expected: list[str]
) -> None:
    body = with_change(charge_body(), path, value)
    response = await post_charge(client, merchant, body)
    assert sorted(fields(response)) == sorted(expected)


@pytest.mark.parametrize(("path", "value", "expected"), CARD_CASES, ids=[f"{c[0]}={c[1]!r}"[:60] for c in CARD_CASES])
async def test_each_card_rule_is_422_invalid_card(
    merchant: builders.TestMerchant, client: httpx.AsyncClient, path: str, value: Any, expected: list[str]
) -> None:
    response = await post_charge(client, merchant, with_change(charge_body(), path, value))
    assert response.status_code == 422, response.text
    body = response.json()
    assert (body["statusCode"], body["statusMessage"]) == ("422", "INVALID_CARD")
    assert [e["field"] for e in body["errors"]] == expected
    assert all(isinstance(e["message"], str) and e["message"] for e in body["errors"])


async def test_every_failing_card_field_is_listed_whatever_rule_it_breaks(
    merchant: builders.TestMerchant, client: httpx.AsyncClient
) -> None:
    # A type error, a missing field and content errors at once: one 422 naming each card field.
    body = charge_body()
    body["cardDetails"] = {
        "cardNumber": 4811111111111114,
        "cardExpiredMonth": "9",
        "cardExpiredYear": "2099",
        "cardCvn": "12",
    }
    response = await post_charge(client, merchant, body)
    assert response.status_code == 422, response.text
    assert sorted(e["field"] for e in response.json()["errors"]) == [
        "cardDetails.cardCvn",
        "cardDetails.cardExpiredMonth",
        "cardDetails.cardHolderName",
        "cardDetails.cardNumber",
    ]


async def test_other_fields_failing_too_answer_400_without_the_card(
    merchant: builders.TestMerchant, client: httpx.AsyncClient
) -> None:
    # Every other field stays 400 VALIDATION_ERROR; the card is looked at once the request is valid.
    body = with_change(charge_body(), "cardDetails.cardCvn", "1")
    body["currency"] = "USD"
    assert fields(await post_charge(client, merchant, body)) == ["currency"]


async def test_every_violation_is_listed_at_once(merchant: builders.TestMerchant, client: httpx.AsyncClient) -> None:
    body = charge_body()
    body["externalId"] = ""
    body["currency"] = "USD"
    body["paymentMode"] = "SOMETIMES"
    body["itemDetails"][0]["qty"] = 0
    body["itemDetails"][1]["name"] = "x" * 129
    body["customerDetails"]["email"] = "nope"
    body["shippingAddress"]["country"] = "ZZ"
    body["paymentOptions"] = {"tenor": "24", "campaign_code": "c" * 65}
    del body["returnUrl"]
    response = await post_charge(client, merchant, body)
    assert sorted(fields(response)) == sorted(
        [
            "externalId",
            "currency",
            "paymentMode",
            "itemDetails[0].qty",
            "itemDetails[1].name",
            "customerDetails.email",
            "shippingAddress.country",
            "paymentOptions.tenor",
            "paymentOptions.campaign_code",
            "returnUrl",
        ]
    )
    by_field = {e["field"]: e["message"] for e in response.json()["errors"]}
    assert by_field["returnUrl"] == "is required"
    assert by_field["itemDetails[0].qty"] == "Input should be greater than or equal to 1"


async def test_amount_must_equal_the_items_total(merchant: builders.TestMerchant, client: httpx.AsyncClient) -> None:
    response = await post_charge(client, merchant, with_change(charge_body(), "paymentDetails.amount", 100000))
    [error] = response.json()["errors"]
    assert error == {
        "field": "paymentDetails.amount",
        "message": "must equal the sum of itemDetails amount × qty (150000)",
    }


async def test_expired_time_must_be_in_the_future(merchant: builders.TestMerchant, client: httpx.AsyncClient) -> None:
    response = await post_charge(client, merchant, charge_body(expired_time=jakarta_in(-60)))
    assert fields(response) == ["paymentDetails.expiredTime"]


async def test_accepted_edges(merchant: builders.TestMerchant, client: httpx.AsyncClient) -> None:
    """qty 999, 64-character ids, alpha-3 country, YY expiry, tenor 12, campaign_code snake_case: all fine."""
    body = charge_body(tenor="12")
    body["externalId"], body["orderId"] = "E" + A64[1:], "O" + A64[1:]
    body["itemDetails"] = [{"itemId": "SKU-9", "name": "Pin", "amount": 150, "qty": 999}]
    body["paymentDetails"]["amount"] = 149850
    body["billingAddress"]["country"] = "IDN"
    body["cardDetails"]["cardExpiredYear"] = body["cardDetails"]["cardExpiredYear"][2:]
    body["cardDetails"]["cardHolderName"] = "budi santoso"
    response = await post_charge(client, merchant, body)
    assert response.status_code == 200, response.text


async def test_body_that_is_not_json_or_not_an_object(
    merchant: builders.TestMerchant, client: httpx.AsyncClient
) -> None:
    assert fields(await post_charge(client, merchant, "{not json")) == ["body"]
    assert fields(await post_charge(client, merchant, "[1, 2]")) == ["body"]


async def test_idempotency_key_too_long(merchant: builders.TestMerchant, client: httpx.AsyncClient) -> None:
    response = await post_charge(client, merchant, charge_body(), key="k" * 256)
    assert fields(response) == ["X-Idempotency-Key"]


@given(
    st.one_of(
        st.from_regex(r"\A[0-9]{1,4}(\.[0-9]{1,4}){2,4}\Z"),
        st.ip_addresses(v=4).map(str),
        st.text(alphabet="0123456789.:abcdef٣ ", max_size=20),
    )
)
def test_the_quick_ipv4_check_agrees_with_ipaddress(value: str) -> None:
    # customerDetails.ipAddress takes dotted quads by a regular expression, and everything else to
    # ipaddress: both ways must accept and refuse exactly what ipaddress alone does.
    try:
        ipaddress.ip_address(value)
        valid = True
    except ValueError:
        valid = False
    body = compact(with_change(charge_body(), "customerDetails.ipAddress", value)).encode()
    try:
        parse_charge_request(body, clock.now())
        accepted = True
    except CardValidationError as refused:
        accepted = "customerDetails.ipAddress" not in [error.field for error in refused.errors]
    assert accepted == valid


def _paths(value: Any) -> list[tuple[str | int, ...]]:
    """Every path into a body, to its containers and leaves."""
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    return [path for key, child in children for path in [(key,), *((key, *rest) for rest in _paths(child))]]


def _changed(body: Any, path: tuple[str | int, ...], value: Any) -> Any:
    """A copy of `body` with `path` set to `value` (`...` removes it)."""
    changed = copy.deepcopy(body)
    target = changed
    for key in path[:-1]:
        target = target[key]
    if value is ...:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return changed


_BODIES = [
    charge_body(),
    charge_body(mode="OPEN", number=None),
    charge_body(tenor="3", callback_url="https://shop.example/cb", expired_time=jakarta_in(3600)),
    charge_body(mode="OPEN", number=None, paymentMethod="ewallet", channel="OVO"),
]
_WORDS = [
    "",
    " ",
    "\t",
    "CARD",
    "BCACC",
    "OVO",
    "DANA",
    "card",
    "ewallet",
    "CLOSE",
    "OPEN",
    "IDR",
    "3",
    "12",
    "ID",
    "IDN",
    "0812345678",
    "a@b.co",
    "10.0.0.1",
    "::1",
    "https://x.example/r",
    "2020-01-01T00:00:00+07:00",
    "2999-01-01T00:00:00+07:00",
    "2999-01-01T00:00:00",
    "4811 1111 1111 1114",
    "12",
    "2099",
    "123",
]
_JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=8)
    | st.sampled_from(_WORDS),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(_WORDS) | st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)


_ACROSS = {"paymentMethod", "paymentChannel", "paymentMode", "itemDetails", "cardDetails", "paymentOptions"}


def _at(body: Any, path: tuple[str | int, ...]) -> Any:
    for key in path:
        body = body[key]
    return body


def _nudged(value: Any) -> st.SearchStrategy[Any]:
    """Values next to `value`: where rules across fields and blank-but-present fields live."""
    if isinstance(value, bool):
        return st.just(not value)
    if isinstance(value, int):
        return st.sampled_from([value - 1, value + 1, value * 2, 0, -value, float(value), str(value)])
    if isinstance(value, str):
        return st.sampled_from(["", " ", value + " ", " " + value, value.lower(), value[:-1], value * 2])
    return st.nothing()


@st.composite
def _charge_bodies(draw: st.DrawFn) -> bytes:
    body = draw(st.sampled_from(_BODIES))
    for _ in range(draw(st.integers(0, 2))):
        paths = _paths(body)
        # Half the time a field the rules across fields read: that is where the two paths differ most.
        across = [p for p in paths if p[0] in _ACROSS or p[:2] == ("paymentDetails", "amount")]
        if paths:
            path = draw(st.sampled_from(across if across and draw(st.booleans()) else paths))
            nudged = _nudged(_at(body, path))  # mostly: a random value rarely passes the field rules
            body = _changed(body, path, draw(st.one_of(nudged, nudged, nudged, st.just(...), _JSON_VALUES)))
    raw = json.dumps(body, ensure_ascii=draw(st.booleans())).encode()
    edit = draw(st.sampled_from(["none"] * 6 + ["bom", "duplicate", "nan", "spaces", "truncate", "latin1"]))
    if edit == "bom":
        raw = b"\xef\xbb\xbf" + raw
    elif edit == "duplicate" and raw.startswith(b"{") and len(raw) > 2:
        raw = b'{"orderId": "twice", ' + raw[1:]  # the later orderId wins with json.loads
    elif edit == "nan":
        raw = raw.replace(b"150000", b"NaN", 1)
    elif edit == "spaces":
        raw = b" \n" + raw + b"\r\n "
    elif edit == "truncate":
        raw = raw[: draw(st.integers(0, len(raw)))]
    elif edit == "latin1":
        raw = raw.replace(b"Siti", "Sít".encode("latin-1"), 1)
    return raw


def _outcome(parse: Any, body: bytes) -> Any:
    now = clock.now()
    try:
        request: ChargeRequest = parse(body, now)
    except CardValidationError as refused:
        return ("refused", [(e.field, e.message) for e in refused.errors])
    except InvalidCardData as refused:
        return ("card refused", [(e.field, e.message) for e in refused.errors])
    return ("parsed", request.model_dump())


@settings(max_examples=600, deadline=None)
@given(_charge_bodies())
def test_one_pass_parsing_answers_as_the_slow_path(body: bytes) -> None:
    # The charge parses a valid body with pydantic's JSON validation and reads the rules across
    # fields off the model; any other body goes the old way (json.loads, then both rule sets on
    # the objects). Whatever the body, the answer must be the one the old way alone gives.
    assert _outcome(parse_charge_request, body) == _outcome(parse_charge_request_slowly, body)


def test_the_one_pass_path_reports_the_rules_across_fields() -> None:
    # Valid fields, broken only across them: answered by the model-reading rules, as the old ones did.
    now = clock.now()
    cases = {
        "paymentDetails.amount": with_change(charge_body(), "paymentDetails.amount", 150001),
        "paymentDetails.expiredTime": charge_body(expired_time=jakarta_in(-60)),
        "paymentChannel": charge_body(channel="OVO"),
        "cardDetails": with_change(charge_body(), "cardDetails", ...),
        "cardDetails.cardCvn": with_change(charge_body(), "cardDetails.cardCvn", " "),
    }
    for field, body in cases.items():
        raw = json.dumps(body).encode()
        ChargeRequest.model_validate_json(raw)  # the fields alone are valid: this is the one-pass path
        for parse in (parse_charge_request, parse_charge_request_slowly):
            with pytest.raises((CardValidationError, InvalidCardData)) as refused:
                parse(raw, now)
            assert [e.field for e in refused.value.errors] == [field]
