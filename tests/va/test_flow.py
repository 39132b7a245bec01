"""Virtual accounts (docs/decisions.md §9): each payment system's life over the API, its callbacks verified
with signatures computed here, and the refusals of §9.3 to §9.6."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import httpx
from fastapi import FastAPI
from sqlalchemy import func, select

from kasir.db import fetch_value
from kasir.kit.clock import clock, isoformat_millis, parse_aware
from kasir.va.jobs import expire_due_virtual_accounts
from kasir.va.models import VaPayment
from tests.support.builders import make_merchant
from tests.support.receiver import CallbackReceiver
from tests.support.wire.va import CREATE, cancel, check_callback, create, create_body, inquire, pay, post, ref
from tests.support.wire.wallet import assert_problem
from tests.support.worker import expiry_hang_guard


async def test_a_closed_va_is_paid_once_and_says_so_in_its_callback(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    merchant = await make_merchant(app)
    va = await create(client, merchant, receiver.url("/closed"), channel="bca", amount=50_000)
    assert va["payment_channel"] == "BCA"
    assert va["payment_method"] == "BANK_TRANSFER"
    assert va["transaction_status"] == "PENDING"
    assert va["transaction_id"].startswith("VA")
    assert len(va["transaction_id"]) == 22
    number = va["payment_details"]["va_number"]
    assert number.startswith("40416")
    assert len(number) == 14
    assert number.isdigit()
    assert va["payment_details"]["is_multi_use"] is False
    assert va["payment_history"] == []
    created = parse_aware(va["transaction_time"])
    assert parse_aware(va["payment_details"]["expired_time"]) - created == timedelta(hours=24)
    assert va["billing_address"] == {
        key: "" for key in ("full_name", "phone", "address", "city", "postal_code", "country")
    }

    paid = await pay(client, merchant, va)
    assert paid.status_code == 200, paid.text
    result = paid.json()["data"]
    assert result["transaction_status"] == "PAID"
    assert result["amount"] == 50_000
    assert result["va_number"] == number
    assert result["reference_id"].startswith("REF")
    assert len(result["reference_id"]) == 20

    [request] = await receiver.wait_for(1, path="/closed")
    payload = check_callback(request, merchant, va)
    assert payload["transaction_status"] == "PAID"
    assert payload["reference_id"] == result["reference_id"]
    assert payload["payment_details"]["total_amount"] == 50_000
    assert payload["payment_details"]["total_paid_amount"] == 50_000
    assert payload["payment_details"]["remaining_amount"] == 0
    assert payload["payment_details"]["paid_time"] == result["paid_time"]
    assert payload["response_code"] == "00"
    assert "sub_merchant_id" not in payload

    seen = await inquire(client, merchant, va)
    assert seen["transaction_status"] == "PAID"
    assert seen["payment_history"] == [
        {"reference_id": result["reference_id"], "amount": 50_000, "paid_time": result["paid_time"],
         "transaction_status": "PAID"},
    ]  # fmt: skip
    assert_problem(await pay(client, merchant, va), 409, "03", "PAID")
    assert_problem(await cancel(client, merchant, va), 409, "03")


async def test_a_partial_va_is_paid_in_three_and_refuses_what_the_remainder_does_not_allow(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    merchant = await make_merchant(app)
    va = await create(client, merchant, receiver.url("/partial"), channel="BRI", system="PARTIAL", amount=30_000)
    assert va["payment_details"]["va_number"].startswith("13033")
    assert va["payment_details"]["is_multi_use"] is True  # ignored, answered true
    assert va["payment_details"]["remaining_amount"] == 30_000
    assert_problem(await pay(client, merchant, va, 9_999), 409, "03", "10000")  # below the channel minimum
    assert_problem(await pay(client, merchant, va, 30_001), 409, "03", "remainder")
    for amount, status, remaining in ((10_000, "PARTIALLY_PAID", 20_000), (15_000, "PARTIALLY_PAID", 5_000)):
        answer = await pay(client, merchant, va, amount)
        assert answer.json()["data"]["transaction_status"] == status, answer.text
        assert (await inquire(client, merchant, va))["payment_details"]["remaining_amount"] == remaining
    assert_problem(
        await pay(client, merchant, va, 4_000), 409, "03"
    )  # the remainder is less than the minimum: all of it
    last = await pay(client, merchant, va, 5_000)
    assert last.json()["data"]["transaction_status"] == "PAID"
    requests = await receiver.wait_for(3, path="/partial")
    statuses = [check_callback(r, merchant, va)["transaction_status"] for r in requests]
    assert statuses == ["PARTIALLY_PAID", "PARTIALLY_PAID", "PAID"]
    totals = [r.json()["payment_details"]["total_amount"] for r in requests]
    assert totals == [10_000, 15_000, 5_000]
    history = (await inquire(client, merchant, va))["payment_history"]
    assert [entry["amount"] for entry in history] == [5_000, 15_000, 10_000]  # newest first
    assert_problem(await pay(client, merchant, va, 10_000), 409, "03")  # paid in full: closed


async def test_a_multi_use_va_takes_payment_after_payment_until_it_is_cancelled(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    merchant = await make_merchant(app)
    va = await create(client, merchant, receiver.url("/multi"), amount=25_000, multi_use=True)
    assert parse_aware(va["payment_details"]["expired_time"]) - parse_aware(va["transaction_time"]) == timedelta(
        days=3650
    )
    first = (await pay(client, merchant, va)).json()["data"]
    second = (await pay(client, merchant, va, 25_000)).json()["data"]
    assert first["transaction_status"] == second["transaction_status"] == "PAID"
    assert first["reference_id"] != second["reference_id"]
    assert_problem(await pay(client, merchant, va, 20_000), 409, "03", "exactly")
    cancelled = await cancel(client, merchant, va)
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["data"]["transaction_status"] == "CANCELLED"
    assert cancelled.json()["data"]["payment_details"]["total_paid_amount"] == 50_000
    requests = await receiver.wait_for(3, path="/multi")
    payloads = [check_callback(r, merchant, va) for r in requests]
    assert [p["transaction_status"] for p in payloads] == ["PAID", "PAID", "CANCELLED"]
    assert [p["reference_id"] for p in payloads] == [first["reference_id"], second["reference_id"], ""]
    assert payloads[2]["payment_details"]["total_amount"] == 0
    assert payloads[2]["payment_details"]["paid_time"] == ""
    assert_problem(await pay(client, merchant, va), 409, "03", "CANCELLED")


async def test_an_open_va_takes_what_the_channel_allows_and_stays_open(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    va = await create(client, merchant, channel="MANDIRI", system="open", amount=None)
    assert va["payment_system"] == "OPEN"
    assert va["payment_details"]["va_number"].startswith("89795")
    assert len(va["payment_details"]["va_number"]) == 19
    assert va["payment_details"]["amount"] == 0
    assert va["payment_details"]["is_multi_use"] is True
    assert_problem(await pay(client, merchant, va, 9_999), 409, "03")
    assert_problem(await pay(client, merchant, va), 400, "01", "amount")
    for amount in (10_000, 1_250_000):
        assert (await pay(client, merchant, va, amount)).json()["data"]["transaction_status"] == "PAID"
    assert (await inquire(client, merchant, va))["payment_details"]["total_paid_amount"] == 1_260_000


async def test_a_va_expires_by_itself_and_takes_nothing_after(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    merchant = await make_merchant(app)
    expiry = isoformat_millis(clock.now() + timedelta(seconds=65))
    va = await create(client, merchant, receiver.url("/expire"), expired_time=expiry)
    kept = await create(client, merchant, receiver.url("/kept"))
    clock.advance(66)
    assert_problem(await pay(client, merchant, va), 409, "03", "expired")  # before the worker records it
    assert (await inquire(client, merchant, va))["transaction_status"] == "EXPIRED"  # "for every purpose" (§9.3)
    [request] = await receiver.wait_for(1, path="/expire", timeout=expiry_hang_guard())
    payload = check_callback(request, merchant, va)
    assert payload["transaction_status"] == "EXPIRED"
    assert payload["reference_id"] == ""
    assert (await inquire(client, merchant, va))["transaction_status"] == "EXPIRED"
    assert (await inquire(client, merchant, kept))["transaction_status"] == "PENDING"
    assert await expire_due_virtual_accounts(app.state.database) == 0


async def test_two_cancels_give_one_cancelled_and_one_refusal(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    va = await create(client, merchant)
    first, second = await asyncio.gather(cancel(client, merchant, va), cancel(client, merchant, va))
    assert sorted([first.status_code, second.status_code]) == [200, 409], (first.text, second.text)


async def test_concurrent_payments_into_a_partial_va_never_take_more_than_its_amount(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    merchant = await make_merchant(app)
    va = await create(client, merchant, system="PARTIAL", amount=50_000)
    answers = await asyncio.gather(*(pay(client, merchant, va, 20_000) for _ in range(6)))
    assert sorted(a.status_code for a in answers) == [200, 200, 409, 409, 409, 409]
    seen = await inquire(client, merchant, va)
    assert seen["payment_details"]["total_paid_amount"] == 40_000
    assert seen["payment_details"]["remaining_amount"] == 10_000
    async with app.state.database.unit_of_work(read_only=True) as session:
        payments = await fetch_value(
            session, select(func.count()).select_from(VaPayment).where(VaPayment.va_id == va["transaction_id"])
        )
    assert payments == 2


async def test_a_chosen_number_is_padded_unique_among_open_vas_and_free_again_once_closed(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    merchant, other = await make_merchant(app), await make_merchant(app)
    va = await create(client, merchant, channel="BNI", va_number="12345")
    assert va["payment_details"]["va_number"] == "7136" + "000000012345"
    taken = await post(
        client, other, CREATE, create_body(channel="BNI", va_number=12345)
    )  # an integer, the same digits
    assert_problem(taken, 409, "03", "va_number")
    assert (await cancel(client, merchant, va)).status_code == 200
    again = await create(client, other, channel="BNI", va_number=12345)
    assert again["payment_details"]["va_number"] == va["payment_details"]["va_number"]
    alias = await create(client, other, channel="BCA-MCP", va_number="777")
    assert alias["payment_channel"] == "BCA-MCP"
    assert alias["payment_details"]["va_number"] == "40416000000777"


async def test_concurrent_creates_with_one_chosen_number_have_one_winner(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    merchants = [await make_merchant(app) for _ in range(4)]
    answers = await asyncio.gather(
        *(post(client, m, CREATE, create_body(channel="CIMB", va_number="424242")) for m in merchants)
    )
    assert sorted(a.status_code for a in answers) == [200, 409, 409, 409], [a.text for a in answers]


async def test_what_create_refuses_names_the_field(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    cases = [
        (create_body(channel="FINPAY"), "payment_channel"),
        (create_body(amount=9_999), "payment_details.amount"),
        (create_body(amount=None), "payment_details.amount"),
        (create_body(system="INVOICE"), "payment_system"),
        (create_body(channel="BCA", va_number="1234567890"), "va_number"),  # BCA: 9 free digits
        (create_body(amount=10_000.5), "amount"),
        (create_body(expired_time=isoformat_millis(clock.now() + timedelta(days=3651))), "expired_time"),
        (create_body(expired_time=isoformat_millis(clock.now() + timedelta(seconds=30))), "expired_time"),
        ({**create_body(), "currency": "USD"}, "currency"),
        ({**create_body(), "order_id": "x" * 26}, "order_id"),
        ({**create_body(), "item_details": [{"item_id": "A", "name": "a", "amount": 1_000, "qty": 2}]}, "amount"),
    ]
    for body, field in cases:
        response = await post(client, merchant, CREATE, body)
        assert_problem(response, 400, "01", field)
    reused = create_body()
    assert (await post(client, merchant, CREATE, reused)).status_code == 200
    assert_problem(await post(client, merchant, CREATE, {**reused, "order_id": "another"}), 409, "03", "external_id")


async def test_a_whole_amount_with_a_zero_fraction_is_whole_rupiah(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    va = await create(client, merchant, amount=10_000.0)
    assert va["payment_details"]["amount"] == 10_000
    assert isinstance(va["payment_details"]["amount"], int)


async def test_inquiry_names_one_va_of_the_merchant_by_all_three_references(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    merchant, other = await make_merchant(app), await make_merchant(app)
    va = await create(client, merchant)
    for body in (
        {**ref(va), "order_id": "another"},
        {**ref(va), "payment_channel": "BRI"},
        {**ref(va), "transaction_id": "VA" + "0" * 20},
    ):
        assert_problem(await post(client, merchant, "/va/inquiry", body), 404, "02")
    assert_problem(await post(client, other, "/va/inquiry", ref(va)), 404, "02")
    assert_problem(await post(client, merchant, "/va/inquiry", {**ref(va), "payment_method": "wallet"}), 400, "01")


async def test_a_sub_merchant_signs_the_callbacks_and_an_unknown_one_is_refused(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    from kasir.merchants.service import merchant_service

    merchant = await make_merchant(app)
    async with app.state.database.unit_of_work() as session:
        await merchant_service.add_sub_merchant(session, merchant.id, "SUB-1", "Toko Cabang")
    body = create_body(receiver.url("/sub"))
    assert_problem(
        await post(client, merchant, CREATE, body, **{"sub-merchant-id": "SUB-9"}), 403, "04", "sub-merchant"
    )
    answer = await post(client, merchant, CREATE, body, **{"sub-merchant-id": "SUB-1"})
    assert answer.status_code == 200, answer.text
    va = answer.json()["data"]
    assert (await pay(client, merchant, va)).status_code == 200
    [request] = await receiver.wait_for(1, path="/sub")
    assert check_callback(request, merchant, va, sub_merchant_id="SUB-1")["sub_merchant_id"] == "SUB-1"


async def test_external_id_is_one_namespace_across_vas_wallet_transactions_and_card_orders(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    """§9.2: external_id is unique per merchant among wallet transactions, card orders and VAs (reuse `03`)."""
    from tests.support.wire import wallet
    from tests.support.wire.card import charge_body, post_charge

    merchant = await make_merchant(app)
    paid_by_wallet = await wallet.create(client, merchant)
    reused = create_body()
    reused["external_id"] = paid_by_wallet["external_id"]
    assert_problem(await post(client, merchant, CREATE, reused), 409, "03", "external_id")
    charge = charge_body(callback_url="http://127.0.0.1:9/cb")
    assert (await post_charge(client, merchant, charge)).status_code == 200
    reused["external_id"] = charge["externalId"]
    assert_problem(await post(client, merchant, CREATE, reused), 409, "03", "external_id")

    va = await create(client, merchant)
    wallet_body = wallet.create_body("http://127.0.0.1:9/cb")
    wallet_body["external_id"] = va["external_id"]
    assert_problem(await wallet.post_wallet(client, merchant, wallet.CREATE, wallet_body), 409, "03", "external_id")
    card_body = charge_body(callback_url="http://127.0.0.1:9/cb")
    card_body["externalId"] = va["external_id"]
    refused = await post_charge(client, merchant, card_body)
    assert refused.status_code == 409, refused.text
    assert refused.json()["statusMessage"] == "DUPLICATE_ORDER"
    # Another merchant may use it.
    other = await make_merchant(app)
    mine = create_body()
    mine["external_id"] = va["external_id"]
    assert (await post(client, other, CREATE, mine)).status_code == 200


async def test_bni_takes_amounts_from_one_rupiah(app: FastAPI, client: httpx.AsyncClient) -> None:
    """§9.3: the channel minimum is 10,000, BNI's 1 (applied to every amount of the bank)."""
    merchant = await make_merchant(app)
    small = await create(client, merchant, channel="BNI", amount=1)
    assert small["payment_details"]["amount"] == 1
    assert (await pay(client, merchant, small)).status_code == 200
    open_va = await create(client, merchant, channel="BNI", system="OPEN", amount=None)
    assert (await pay(client, merchant, open_va, 5)).status_code == 200
    assert_problem(await post(client, merchant, CREATE, create_body(channel="BRI", amount=9_999)), 400, "01", "10000")
