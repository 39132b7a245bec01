"""Issue 26: every callback kind's payload against the interface's tables, and no null anywhere.

The tables below are interface.md's "Wallet callback payload" and "Payment-page callback payload"
and docs/decisions.md §6's BNPL notification body, typed here by hand (not read from the service): a
string field with no value is "", numbers and booleans are never null, an object the interface
lists carries every field it lists, and a list is [] rather than null. The answers of the routes
that led to each callback are walked for null too.

The callbacks are real: wallet PAID (an e-wallet and the QR channel), EXPIRED, failed, REFUNDED and
VOID; payment-page SUCCESS, FAILED, EXPIRED after an attempt and EXPIRED never attempted; BNPL 00,
06 and 05. Every transaction ends in a final state, so nothing is left to call the receiver later.
Phone numbers with separators (`0812-3456-7890`, `+62 (812) 3456-7890`) and 16 digits
(`0811111111111111`) are sent too, and must come back exactly as sent.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
from fastapi import FastAPI
from sqlalchemy import select, update

from kasir.bnpl.jobs import expire_due_bnpl_transactions
from kasir.bnpl.models import BnplTransaction
from kasir.db import fetch_value, run
from kasir.kit.clock import clock
from tests.support import builders
from tests.support.builders import make_merchant
from tests.support.forms import submit
from tests.support.receiver import CallbackReceiver
from tests.support.wire.card import APPROVED, DECLINED, charge_body, jakarta_in, post_charge
from tests.support.wire.snap import checkout_body, post_signed
from tests.support.wire.wallet import create, dummy_payment, inquire, refund, void
from tests.support.worker import expiry_hang_guard

# --- the tables --------------------------------------------------------------------------

NUMBER = "number"  # a JSON number (int or float), never a boolean
Optional = tuple  # (spec,): the field is present only in some callbacks (interface.md says when)


def _address() -> dict[str, Any]:
    return dict.fromkeys(("phone", "address", "city", "postal_code", "country", "full_name"), str)


WALLET: dict[str, Any] = {
    **dict.fromkeys(
        (
            "transaction_id",
            "external_id",
            "order_id",
            "merchant_id",
            "reference_id",
            "currency",
            "payment_method",
            "payment_channel",
            "payment_system",
            "transaction_status",
            "response_code",
            "response_message",
            "additional_data",
            "terminal_id",
            "payer_name",
        ),
        str,
    ),
    "payment_details": {
        "amount": NUMBER,
        "expired_time": str,
        "transaction_description": str,
        "transaction_time": str,
        "total_amount": NUMBER,
        "paid_time": str,
    },
    "customer_details": {"phone": str, "email": str, "full_name": str},
    "item_details": [{"item_id": str, "name": str, "amount": NUMBER, "qty": NUMBER, "description": str}],
    "billing_address": _address(),
    "shipping_address": _address(),
    "wallet_details": {"id": str, "id_type": str},
    "issuer": (str,),  # paid transactions only
    "refund_history": ([{"refund_time": str, "refund_amount": NUMBER}],),
    "void_history": ([{"void_time": str, "void_amount": NUMBER}],),
    "retrieval_reference_no": (str,),
    "acquirer_issuer_relation": (str,),
    "payer_number": (str,),
}

PAYMENT_PAGE: dict[str, Any] = {
    **dict.fromkeys(
        (
            "transaction_id",
            "order_id",
            "external_id",
            "currency",
            "transaction_status",
            "response_message",
            "payment_method",
            "payment_channel",
            "acq",
            "paid_date",
            "card_token",
            "callback_url",
            "success_redirect_url",
            "failed_redirect_url",
            "expired_time",
        ),
        str,
    ),
    "amount": NUMBER,
    "selected_channels": [{"channel": str, "acq": str}],
    "is_customer_paying_fee": bool,
    "item_details": [{"item_id": str, "name": str, "amount": NUMBER, "qty": NUMBER}],
    "save_card": bool,
    "customer_details": {
        "full_name": str,
        "email": str,
        "phone": str,
        "address": str,
        "is_email_show": bool,
        "is_phone_show": bool,
    },
    "shipping_address": _address(),
    "billing_address": _address(),
}

BNPL: dict[str, Any] = {
    "originalPartnerReferenceNo": str,
    "originalReferenceNo": str,
    "latestTransactionStatus": str,
    "transactionStatusDesc": str,
    "amount": {"value": str, "currency": str},
    "tenure": NUMBER,
    "paidTime": (str,),  # once paid
    "additionalInfo": dict,
}


def check(value: Any, spec: Any, where: str) -> None:
    """`value` against `spec`: a type, NUMBER, a list of one item spec, or a table of fields."""
    assert value is not None, f"{where} is null"
    if spec is NUMBER:
        assert not isinstance(value, bool), f"{where} is a boolean, not a number"
        assert isinstance(value, int | float), f"{where} is not a number: {value!r}"
    elif isinstance(spec, list):
        assert isinstance(value, list), f"{where} is not a list: {value!r}"
        for index, item in enumerate(value):
            check(item, spec[0], f"{where}[{index}]")
    elif isinstance(spec, dict):
        assert isinstance(value, dict), f"{where} is not an object: {value!r}"
        for name, field in spec.items():
            if isinstance(field, Optional):
                if name in value:
                    check(value[name], field[0], f"{where}.{name}")
            else:
                assert name in value, f"{where}.{name} is missing"
                check(value[name], field, f"{where}.{name}")
    else:
        assert isinstance(value, spec), f"{where} is not {spec.__name__}: {value!r}"


def assert_no_null(value: Any, where: str = "body") -> None:
    assert value is not None, f"{where} is null"
    if isinstance(value, dict):
        for name, child in value.items():
            assert_no_null(child, f"{where}.{name}")
    elif isinstance(value, list):
        for index, child in enumerate(value):
            assert_no_null(child, f"{where}[{index}]")


def test_the_checker_refuses_what_the_rule_forbids() -> None:
    table = {"a": str, "n": NUMBER, "o": {"x": str}, "l": [{"y": bool}], "p": (str,)}
    check({"a": "", "n": 0, "o": {"x": ""}, "l": []}, table, "ok")
    for bad in (
        {"a": None, "n": 0, "o": {"x": ""}, "l": []},
        {"a": "", "n": None, "o": {"x": ""}, "l": []},
        {"a": "", "n": True, "o": {"x": ""}, "l": []},
        {"a": "", "n": 0, "o": None, "l": []},
        {"a": "", "n": 0, "o": {}, "l": []},
        {"a": "", "n": 0, "o": {"x": ""}, "l": None},
        {"a": "", "n": 0, "o": {"x": ""}, "l": [{"y": None}]},
        {"a": "", "n": 0, "o": {"x": ""}, "l": [], "p": None},
    ):
        try:
            check(bad, table, "bad")
        except AssertionError:
            continue
        raise AssertionError(f"accepted {bad}")


# --- wallet --------------------------------------------------------------------------------

WALLET_PHONE = "0812-3456-7890"


async def _wallet_callbacks(
    client: httpx.AsyncClient, merchant: builders.TestMerchant, url: str
) -> list[dict[str, Any]]:
    """Answers of every wallet route on the way (walked for null); the callbacks come to `url`."""
    answers: list[dict[str, Any]] = []
    customer = {"email": "siti@example.id", "full_name": "Siti Rahayu", "phone": WALLET_PHONE}

    async def made(**kw: Any) -> dict[str, Any]:
        tx = await create(client, merchant, url, customer_details=customer, **kw)
        answers.append(tx)
        return tx

    async def ok(response: httpx.Response) -> None:
        assert response.status_code == 200, response.text
        answers.append(response.json())

    paid = await made(channel="DANA")  # no addresses, no item description, no additional_data
    await ok(await dummy_payment(client, merchant, paid))
    qris = await made(
        channel="QRIS",
        billing_address={
            "full_name": "Siti",
            "phone": "+62 812 3456 7890",
            "address": "Jl. Sudirman 1",
            "city": "Jakarta",
            "postal_code": "10220",
            "country": "ID",
        },
    )
    await ok(await dummy_payment(client, merchant, qris))
    expired = await made(channel="SHOPEEPAY")
    await ok(await dummy_payment(client, merchant, expired, simulate_status="EXPIRED"))
    failed = await made(channel="OVO")
    await ok(await dummy_payment(client, merchant, failed, simulate_status="FAILED"))
    refunded = await made(channel="LINKAJA")
    await ok(await dummy_payment(client, merchant, refunded))
    await ok(await refund(client, merchant, refunded, 10_000))
    voided = await made(channel="VIRGO")
    await ok(await dummy_payment(client, merchant, voided))
    await ok(await void(client, merchant, voided))
    for tx in (paid, qris, expired, failed, refunded, voided):
        answers.append(await inquire(client, merchant, tx))
    for answer in answers:
        assert_no_null(answer, "wallet answer")
    return answers


async def test_wallet_callbacks_follow_the_interface_table(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    merchant = await make_merchant(app)
    await _wallet_callbacks(client, merchant, receiver.url("/wallet"))
    # PAID x2, EXPIRED, failed, PAID + REFUNDED, PAID + VOID
    callbacks = [r.json() for r in await receiver.wait_for(8, path="/wallet")]
    statuses = sorted(c["transaction_status"] for c in callbacks)
    assert statuses == sorted(["PAID", "PAID", "EXPIRED", "failed", "PAID", "REFUNDED", "PAID", "VOID"])
    for payload in callbacks:
        where = f"wallet {payload['payment_channel']} {payload['transaction_status']}"
        check(payload, WALLET, where)
        assert_no_null(payload, where)
        assert payload["customer_details"]["phone"] == WALLET_PHONE  # exactly as sent
    by_channel = {(c["payment_channel"], c["transaction_status"]): c for c in callbacks}
    dana = by_channel[("DANA", "PAID")]
    assert dana["shipping_address"] == dict.fromkeys(
        ("phone", "address", "city", "postal_code", "country", "full_name"), ""
    )
    assert dana["item_details"][0]["description"] == ""
    assert (dana["terminal_id"], dana["additional_data"]) == ("", "")
    assert by_channel[("QRIS", "PAID")]["billing_address"]["phone"] == "+62 812 3456 7890"
    assert by_channel[("SHOPEEPAY", "EXPIRED")]["payment_details"]["paid_time"] == ""
    assert by_channel[("SHOPEEPAY", "EXPIRED")]["payer_name"] == ""


# --- payment page ------------------------------------------------------------------------------

CARD_PHONE = "+62 (812) 3456-7890"


async def test_payment_page_callbacks_follow_the_interface_table(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    merchant = await make_merchant(app)
    url = receiver.url("/card")
    customer = {"email": "siti@example.id", "fullName": "Siti Rahayu", "phone": CARD_PHONE, "ipAddress": "203.0.113.7"}
    bodies = [
        charge_body(number=APPROVED, callback_url=url, customerDetails=customer),  # SUCCESS
        # FAILED, then EXPIRED after an attempt; and EXPIRED never attempted (a BCACC order: acq "" all the same)
        charge_body(number=DECLINED, callback_url=url, expired_time=jakarta_in(3), customerDetails=customer),
        charge_body(mode="OPEN", number=None, channel="BCACC", callback_url=url, expired_time=jakarta_in(3)),
    ]
    for body in bodies:
        response = await post_charge(client, merchant, body)
        assert response.status_code == 200, response.text
        assert_no_null(response.json(), "charge answer")
    clock.advance(4)  # past the two orders' own expiry: the worker's scheduler expires them
    callbacks = [r.json() for r in await receiver.wait_for(4, path="/card", timeout=expiry_hang_guard())]
    seen = sorted((c["order_id"], c["transaction_status"]) for c in callbacks)
    success, declined, never = (b["orderId"] for b in bodies)
    assert seen == sorted([(success, "SUCCESS"), (declined, "FAILED"), (declined, "EXPIRED"), (never, "EXPIRED")])
    for payload in callbacks:
        where = f"payment page {payload['transaction_status']}"
        check(payload, PAYMENT_PAGE, where)
        assert_no_null(payload, where)
    by_order = {(c["order_id"], c["transaction_status"]): c for c in callbacks}
    assert by_order[(success, "SUCCESS")]["customer_details"]["phone"] == CARD_PHONE  # exactly as sent
    assert by_order[(declined, "FAILED")]["paid_date"] == ""
    assert by_order[(declined, "EXPIRED")]["acq"] == "BCA"  # the acquirer of its attempt
    unattempted = by_order[(never, "EXPIRED")]
    assert (unattempted["acq"], unattempted["paid_date"], unattempted["card_token"]) == ("", "", "")
    assert unattempted["selected_channels"] == [{"channel": "BCACC", "acq": "BCA"}]  # the channel's own


# --- BNPL ---------------------------------------------------------------------------------------

BNPL_PHONE = "0811111111111111"  # 16 digits: the interface's maximum length


async def test_bnpl_notifications_follow_the_decided_body(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    from tests.bnpl.test_flow import page_path

    merchant = await make_merchant(app)
    url = receiver.url("/bnpl")
    transactions = []
    for _ in range(3):
        body = checkout_body(url)
        body["customerDetails"]["phone"] = BNPL_PHONE
        body["sellers"][0]["address"]["phone"] = "(021) 555-0100"
        response = await post_signed(client, merchant, "/v1.0/bnpl/qr-checkout", body)
        assert response.status_code == 200, response.text
        assert_no_null(response.json(), "checkout answer")
        transactions.append(response.json())
    approved, rejected, expiring = transactions
    assert (await submit(client, page_path(approved), "approve-form", tenure=3)).status_code == 303
    assert (await submit(client, page_path(rejected), "reject-form")).status_code == 303
    async with app.state.database.unit_of_work() as session:
        await run(
            session,
            update(BnplTransaction).where(BnplTransaction.id == expiring["referenceNo"]).values(expires_at=clock.now()),
        )
    # The embedded worker's expiry job may take it first: either way one 05 notification follows.
    await expire_due_bnpl_transactions(app.state.database)
    notifications = [r.json() for r in await receiver.wait_for(3, path="/bnpl")]
    assert sorted(n["latestTransactionStatus"] for n in notifications) == ["00", "05", "06"]
    for payload in notifications:
        where = f"BNPL {payload['latestTransactionStatus']}"
        check(payload, BNPL, where)
        assert_no_null(payload, where)
    by_status = {n["latestTransactionStatus"]: n for n in notifications}
    assert by_status["00"]["tenure"] == 3
    assert by_status["05"]["tenure"] == by_status["06"]["tenure"] == 0  # no tenure chosen: 0, never null
    for tx in transactions:
        status = await post_signed(client, merchant, "/v1.0/bnpl/status", {"originalReferenceNo": tx["referenceNo"]})
        assert status.status_code == 200, status.text
        assert_no_null(status.json(), "status answer")
    # The phones are kept exactly as sent.
    async with app.state.database.unit_of_work(read_only=True) as session:
        stored = await fetch_value(
            session, select(BnplTransaction.details).where(BnplTransaction.id == approved["referenceNo"])
        )
    details = json.loads(stored)
    assert details["customerDetails"]["phone"] == BNPL_PHONE
    assert details["sellers"][0]["address"]["phone"] == "(021) 555-0100"
