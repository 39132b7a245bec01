"""Transfers (docs/decisions.md §11.4 to §11.6, §11.9): accepted with a hold, asked of the rail after the accepting
unit commits, refused in §11.6's order with the field named and nothing recorded; money never spent twice."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import func, select

from kasir.audit.service import Actor
from kasir.config import get_settings
from kasir.db import fetch_value
from kasir.kit.clock import clock
from kasir.payouts.jobs import check_unsettled_transfers
from kasir.payouts.models import PayoutTransfer
from kasir.payouts.service import payout_service
from kasir.processors.protocols import ProcessorUnavailable
from kasir.processors.registry import payout_rail
from tests.support import builders
from tests.support.builders import make_merchant
from tests.support.wire.payouts import (
    BALANCE,
    TRANSFER,
    TRANSFER_STATUS,
    TRANSFER_V10,
    TRANSFER_V11,
    disbursement_token,
    post_payout,
    status_body,
    transfer_body,
)
from tests.support.wire.snap import external_id


async def funded(app: FastAPI, amount: int = 1_000_000) -> builders.TestMerchant:
    merchant = await make_merchant(app)
    if amount:
        async with app.state.database.unit_of_work() as session:
            await payout_service.top_up(session, merchant.id, amount, "Saldo awal", Actor.cli())
    return merchant


async def balance(app: FastAPI, merchant: builders.TestMerchant) -> tuple[int, int, int]:
    """(ledger, hold, available), as the admin API says them."""
    async with app.state.database.unit_of_work(read_only=True) as session:
        view = await payout_service.balance(session, merchant.id)
    assert view.available == view.ledger - view.hold
    return view.ledger, view.hold, view.available


async def transfers_of(app: FastAPI, merchant: builders.TestMerchant) -> int:
    statement = select(func.count()).select_from(PayoutTransfer).where(PayoutTransfer.merchant_id == merchant.id)
    async with app.state.database.unit_of_work(read_only=True) as session:
        return int(await fetch_value(session, statement))


async def test_an_ordinary_account_is_paid_at_once_and_the_ledger_debited(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    merchant = await funded(app)
    token = await disbursement_token(client, merchant)
    body = transfer_body(amount="250000.00")
    answer = await post_payout(client, merchant, TRANSFER, body, token)
    assert answer.status_code == 200, answer.text
    got = answer.json()
    assert got["responseCode"] == "2001800"
    assert got["referenceNo"].startswith("DSB")
    assert len(got["referenceNo"]) == 23
    assert got["partnerReferenceNo"] == body["partnerReferenceNo"]
    assert got["amount"] == {"value": "250000.00", "currency": "IDR"}
    assert (got["beneficiaryAccountNo"], got["beneficiaryBankCode"]) == ("1234567890", "014")
    assert len(got["sourceAccountNo"]) == 16
    assert got["originatorInfos"] == body["originatorInfos"]
    assert got["additionalInfo"] == {"latestTransactionStatus": "00", "transactionStatusDesc": "Success"}
    assert await balance(app, merchant) == (750_000, 0, 750_000)


@pytest.mark.parametrize("path", [TRANSFER_V10, TRANSFER_V11])
async def test_v1_0_and_v1_1_take_a_transfer_without_originator_infos_v1_2_does_not(
    app: FastAPI, client: httpx.AsyncClient, path: str
) -> None:
    merchant = await funded(app)
    token = await disbursement_token(client, merchant)
    body = transfer_body()
    del body["originatorInfos"]
    older = await post_payout(client, merchant, path, body, token)
    assert older.status_code == 200, older.text
    assert "originatorInfos" not in older.json()
    newer = await post_payout(client, merchant, TRANSFER, {**body, "partnerReferenceNo": "P-v12"}, token)
    assert newer.status_code == 400, newer.text
    assert newer.json() == {"responseCode": "4001802", "responseMessage": "Invalid Mandatory Field originatorInfos"}


async def test_pending_accounts_end_after_the_delay_by_the_worker(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await funded(app)
    token = await disbursement_token(client, merchant)
    sent = await post_payout(client, merchant, TRANSFER, transfer_body("1111110002", amount="100000.00"), token)
    failed = await post_payout(client, merchant, TRANSFER, transfer_body("1111110003", amount="200000.00"), token)
    for answer in (sent, failed):
        assert answer.json()["additionalInfo"] == {"latestTransactionStatus": "03", "transactionStatusDesc": "Pending"}
    assert await balance(app, merchant) == (1_000_000, 300_000, 700_000)
    await check_unsettled_transfers(app.state.database)  # not due yet: nothing moves
    assert await balance(app, merchant) == (1_000_000, 300_000, 700_000)
    clock.advance(10)  # KASIR_SIMULATOR_PAYOUT_DELAY_SECONDS' default
    await check_unsettled_transfers(app.state.database)
    assert await balance(app, merchant) == (900_000, 0, 900_000)
    states = {}
    for answer in (sent, failed):
        status = await post_payout(
            client, merchant, TRANSFER_STATUS, status_body(reference_no=answer.json()["referenceNo"]), token
        )
        states[answer.json()["referenceNo"]] = status.json()
    assert states[sent.json()["referenceNo"]]["latestTransactionStatus"] == "00"
    rejected = states[failed.json()["referenceNo"]]
    assert (rejected["latestTransactionStatus"], rejected["transactionStatusDesc"]) == ("06", "Failed")
    assert rejected["additionalInfo"]["reason"] == "Rejected by the beneficiary bank"


def refusal(code: str, message: str) -> dict[str, str]:
    return {"responseCode": code, "responseMessage": message}


async def test_each_refusal_in_its_order_names_its_field_and_records_nothing(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    merchant = await funded(app, 100_000)
    token = await disbursement_token(client, merchant)
    first = transfer_body(partner_reference_no="P-1", amount="10000.00")
    assert (await post_payout(client, merchant, TRANSFER, first, token)).status_code == 200

    def but(**changes: Any) -> dict[str, Any]:
        return {**first, **changes}

    def money(value: str, currency: str = "IDR") -> dict[str, str]:
        return {"value": value, "currency": currency}

    fresh = {"partnerReferenceNo": "P-2"}
    unnamed = {k: v for k, v in first.items() if k != "beneficiaryAccountName"}
    phone = {"beneficiaryBankCode": "OVO", "beneficiaryAccountNo": "081234567890"}
    format_ = "Invalid Field Format "
    cases: list[tuple[dict[str, Any], dict[str, str]]] = [
        (but(amount=money("10000.50")), refusal("4001801", format_ + "amount.value")),
        (but(amount=money("10000.00", "USD")), refusal("4001801", format_ + "amount.currency")),
        (unnamed, refusal("4001802", "Invalid Mandatory Field beneficiaryAccountName")),
        (but(beneficiaryBankCode="14"), refusal("4001801", format_ + "beneficiaryBankCode")),
        (but(beneficiaryAccountNo="12345"), refusal("4001801", format_ + "beneficiaryAccountNo")),
        (but(beneficiaryBankCode="OVO"), refusal("4001801", format_ + "beneficiaryAccountNo")),
        (but(sourceAccountNo="0000000000000000"), refusal("4001801", format_ + "sourceAccountNo")),
        (but(feeType="ALL"), refusal("4001801", format_ + "feeType")),
        # already accepted, whatever the body
        (but(amount=money("99999999999.00")), refusal("4091801", "Duplicate partnerReferenceNo")),
        (but(**fresh, beneficiaryBankCode="999"), refusal("4041803", "Bank Not Supported By Switch")),
        (but(**fresh, amount=money("9999.00")), refusal("4041813", "Invalid Amount")),
        (but(**fresh, amount=money("250000001.00")), refusal("4031802", "Exceeds Transaction Amount Limit")),
        (but(**fresh, **phone, amount=money("20000001.00")), refusal("4031802", "Exceeds Transaction Amount Limit")),
        (but(**fresh, amount=money("90001.00")), refusal("4031814", "Insufficient Funds")),
        # the beneficiary comes last: a merchant short of money hears of its balance first
        (
            but(**fresh, beneficiaryAccountNo="1234560004", amount=money("90001.00")),
            refusal("4031814", "Insufficient Funds"),
        ),
        (but(**fresh, beneficiaryAccountNo="1234560004"), refusal("4041811", "Invalid Card/Account/Customer")),
        (but(**fresh, beneficiaryAccountNo="1234560005"), refusal("4031818", "Inactive Card/Account/Customer")),
    ]
    for body, expected in cases:
        answer = await post_payout(client, merchant, TRANSFER, body, token)
        assert answer.json() == expected, body
        assert answer.status_code == int(expected["responseCode"][:3])
    assert await transfers_of(app, merchant) == 1
    assert await balance(app, merchant) == (90_000, 0, 90_000)
    # the X-EXTERNAL-ID of a refused request was not kept: it serves again
    reused = external_id()
    unsupported = but(partnerReferenceNo="P-3", beneficiaryBankCode="999")
    refused = await post_payout(client, merchant, TRANSFER, unsupported, token, external=reused)
    assert refused.status_code == 404
    accepted = await post_payout(
        client, merchant, TRANSFER, {**first, "partnerReferenceNo": "P-3"}, token, external=reused
    )
    assert accepted.status_code == 200, accepted.text
    again = await post_payout(
        client, merchant, TRANSFER, {**first, "partnerReferenceNo": "P-4"}, token, external=reused
    )
    assert again.json() == refusal("4091800", "Conflict")


async def test_the_balance_inquiry_says_ledger_hold_and_available(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await funded(app, 500_000)
    token = await disbursement_token(client, merchant)
    await post_payout(client, merchant, TRANSFER, transfer_body("1111110002", amount="120000.00"), token)
    answer = await post_payout(client, merchant, BALANCE, {"partnerReferenceNo": "B-1", "balanceType": "Cash"}, token)
    assert answer.status_code == 200, answer.text
    got = answer.json()
    assert (got["responseCode"], got["partnerReferenceNo"], len(got["accountNo"])) == ("2001100", "B-1", 16)
    assert got["accountInfos"] == [
        {
            "balanceType": "cash",
            "amount": {"value": "380000.00", "currency": "IDR"},
            "floatAmount": {"value": "0.00", "currency": "IDR"},
            "holdAmount": {"value": "120000.00", "currency": "IDR"},
            "availableBalance": {"value": "380000.00", "currency": "IDR"},
            "ledgerBalance": {"value": "500000.00", "currency": "IDR"},
            "status": "0001",
        }
    ]
    wrong = await post_payout(client, merchant, BALANCE, {"balanceTypes": ["cash", "float"]}, token)
    assert wrong.json() == refusal("4001101", "Invalid Field Format balanceTypes")
    other = await post_payout(client, merchant, BALANCE, {"accountNo": "1"}, token)
    assert other.json() == refusal("4001101", "Invalid Field Format accountNo")


async def test_an_idempotency_key_replays_the_first_answer_and_refuses_another_body(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    merchant = await funded(app)
    token = await disbursement_token(client, merchant)
    body = transfer_body(amount="10000.00")
    first = await post_payout(client, merchant, TRANSFER, body, token, idempotency_key="k-1")
    assert first.status_code == 200, first.text
    # the same key and body on another version: the same answer, byte for byte (another X-EXTERNAL-ID)
    replay = await post_payout(client, merchant, TRANSFER_V11, body, token, idempotency_key="k-1")
    assert replay.content == first.content
    assert replay.headers["Idempotent-Replayed"] == "true"
    other = await post_payout(
        client, merchant, TRANSFER, {**body, "partnerReferenceNo": "X"}, token, idempotency_key="k-1"
    )
    assert other.status_code == 422, other.text
    assert other.json()["responseCode"] == "4221800"
    assert await transfers_of(app, merchant) == 1
    assert await balance(app, merchant) == (990_000, 0, 990_000)


async def test_a_rail_that_does_not_answer_leaves_the_transfer_initiated_until_the_worker_learns_it(
    app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    merchant = await funded(app)
    token = await disbursement_token(client, merchant)
    rail = payout_rail("014")
    asked: list[str] = []

    async def silent(order: Any) -> Any:
        asked.append(order.reference)
        raise ProcessorUnavailable()

    monkeypatch.setattr(rail, "transfer", silent)  # the rail is outside Kasir: it times out
    body = transfer_body(amount="10000.00")
    answer = await post_payout(client, merchant, TRANSFER, body, token, idempotency_key="k")
    assert answer.status_code == 200, answer.text
    assert answer.json()["additionalInfo"] == {"latestTransactionStatus": "01", "transactionStatusDesc": "Initiated"}
    assert await balance(app, merchant) == (1_000_000, 10_000, 990_000)
    monkeypatch.undo()
    clock.advance(30)
    await check_unsettled_transfers(app.state.database)  # every due transfer of the database, ours among them
    assert asked == [answer.json()["referenceNo"]]  # asked once; the worker asked `status`, which knew it
    assert await balance(app, merchant) == (990_000, 0, 990_000)
    # the key keeps the answer the request gave (01), not what the worker learnt after
    replay = await post_payout(client, merchant, TRANSFER, body, token, idempotency_key="k")
    assert replay.content == answer.content


async def test_fifty_concurrent_transfers_against_a_balance_covering_ten(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    merchant = await funded(app, 100_000)
    token = await disbursement_token(client, merchant)
    # "0002" stays pending (held) until the delay: the holds are what the balance must cover
    bodies = [transfer_body(f"99999{index:03d}0002", amount="10000.00") for index in range(50)]
    answers = await asyncio.gather(*(post_payout(client, merchant, TRANSFER, body, token) for body in bodies))
    codes = sorted(answer.json()["responseCode"] for answer in answers)
    assert codes.count("2001800") == 10, codes
    assert codes.count("4031814") == 40, codes
    assert await transfers_of(app, merchant) == 10
    assert await balance(app, merchant) == (100_000, 100_000, 0)
    clock.advance(10)
    await check_unsettled_transfers(app.state.database)
    assert await balance(app, merchant) == (0, 0, 0)


async def test_the_simulators_delay_is_the_setting(
    app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(get_settings(), "simulator_payout_delay_seconds", 60)
    merchant = await funded(app)
    token = await disbursement_token(client, merchant)
    answer = await post_payout(client, merchant, TRANSFER, transfer_body("7777770002", amount="10000.00"), token)
    reference = answer.json()["referenceNo"]

    async def status() -> str:
        body = status_body(reference_no=reference)
        return str(
            (await post_payout(client, merchant, TRANSFER_STATUS, body, token)).json()["latestTransactionStatus"]
        )

    clock.advance(59)
    await check_unsettled_transfers(app.state.database)
    assert await status() == "03"
    clock.advance(1)
    await check_unsettled_transfers(app.state.database)
    assert await status() == "00"


async def test_two_workers_finding_a_transfer_due_ask_the_rail_once(
    app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    merchant = await funded(app)
    token = await disbursement_token(client, merchant)
    answer = await post_payout(client, merchant, TRANSFER, transfer_body("8888880002", amount="10000.00"), token)
    reference = answer.json()["referenceNo"]
    rail = payout_rail("014")
    asked: list[str] = []
    status = rail.status

    async def counted(order: Any) -> Any:
        asked.append(order.reference)
        await asyncio.sleep(0)  # the other worker runs meanwhile
        return await status(order)

    monkeypatch.setattr(rail, "status", counted)
    clock.advance(10)
    await asyncio.gather(*(check_unsettled_transfers(app.state.database) for _ in range(2)))
    assert asked.count(reference) == 1
    assert await balance(app, merchant) == (990_000, 0, 990_000)


async def test_two_workers_checking_at_once_send_a_transfer_the_rail_never_received_once(
    app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by `make soak` (issue 46 item 6): `kasir serve`'s worker and a `kasir worker` both found a `01`
    transfer due, both heard UNKNOWN from the rail and both sent it. The check is claimed first: one sends."""
    from kasir.processors.protocols import PayoutAnswer, PayoutState

    merchant = await funded(app)
    token = await disbursement_token(client, merchant)
    rail = payout_rail("014")
    sent: list[str] = []

    async def silent(order: Any) -> Any:
        raise ProcessorUnavailable()

    monkeypatch.setattr(rail, "transfer", silent)  # the accepting process never reached the rail
    answer = await post_payout(client, merchant, TRANSFER, transfer_body(amount="10000.00"), token)
    reference = answer.json()["referenceNo"]
    assert answer.json()["additionalInfo"]["latestTransactionStatus"] == "01"

    async def unknown(order: Any) -> PayoutAnswer:
        state = PayoutState.SENT if order.reference in sent else PayoutState.UNKNOWN
        await asyncio.sleep(0.05)  # the answer travels back while the other worker asks too
        return PayoutAnswer(state)

    async def transfer(order: Any) -> PayoutAnswer:
        sent.append(order.reference)
        return PayoutAnswer(PayoutState.SENT, f"RAIL-{order.reference}")

    monkeypatch.setattr(rail, "status", unknown)
    monkeypatch.setattr(rail, "transfer", transfer)
    clock.advance(30)
    await asyncio.gather(check_unsettled_transfers(app.state.database), check_unsettled_transfers(app.state.database))
    assert sent.count(reference) == 1
    assert await balance(app, merchant) == (990_000, 0, 990_000)


async def test_a_rails_notification_that_ends_a_transfer_nobody_recorded_answers_its_key(
    app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by `make soak` (issue 46 item 6): the accepting server died after the rail took the transfer and before
    it recorded the answer; the rail's notification then ended it, and the merchant's retries with the same
    X-Idempotency-Key were answered 409 (still running) for good: the key's answer was owed by whoever records the
    first answer, and the notification's path never gave it."""
    from kasir.payouts import transfers
    from kasir.payouts.processing import apply_payout_notification
    from kasir.payouts.repository import transfer_repository
    from kasir.processors.protocols import Event, Notification

    merchant = await funded(app)
    token = await disbursement_token(client, merchant)

    async def died(database: Any, transfer_id: str, answer: Any, rail: Any) -> Any:
        async with database.unit_of_work(read_only=True) as session:
            return await transfer_repository.get(session, transfer_id)  # nothing recorded: the process stopped

    monkeypatch.setattr(transfers, "record", died)
    body = transfer_body("1234560002", amount="10000.00")
    first = await post_payout(client, merchant, TRANSFER, body, token, idempotency_key="died")
    monkeypatch.undo()
    reference = first.json()["referenceNo"]
    async with app.state.database.unit_of_work() as session:
        await apply_payout_notification(
            session, Notification("payout", reference, Event.SENT, bank_reference="RAIL-1"), by="simulator", strict=True
        )
    again = await post_payout(client, merchant, TRANSFER, body, token, idempotency_key="died")
    assert again.status_code == 200, again.text
    assert again.headers.get("idempotent-replayed") == "true"
    assert again.json()["referenceNo"] == reference
    assert again.json()["additionalInfo"]["latestTransactionStatus"] == "00"
