"""Account inquiry (§11.5), status inquiry, history list and detail (§11.7) of docs/decisions.md."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest
from fastapi import FastAPI

from kasir.audit.service import Actor
from kasir.kit.clock import clock, isoformat_seconds
from kasir.payouts.jobs import check_unsettled_transfers
from kasir.payouts.service import payout_service
from kasir.processors.protocols import ProcessorUnavailable
from kasir.processors.registry import payout_rail
from tests.support import builders
from tests.support.builders import make_merchant
from tests.support.wire.payouts import (
    ACCOUNT_INQUIRY,
    HISTORY_DETAIL,
    HISTORY_LIST,
    TRANSFER,
    TRANSFER_STATUS,
    disbursement_token,
    inquiry_body,
    post_payout,
    status_body,
    transfer_body,
)


async def funded(app: FastAPI, amount: int = 1_000_000, note: str = "Saldo awal") -> builders.TestMerchant:
    merchant = await make_merchant(app)
    async with app.state.database.unit_of_work() as session:
        await payout_service.top_up(session, merchant.id, amount, note, Actor.cli())
    return merchant


@pytest.mark.parametrize(
    ("account", "bank", "name", "bank_name"),
    [
        ("1234567890", "014", "BUDI SANTOSO", "BANK CENTRAL ASIA"),
        ("9876540002", "0080123", "SITI RAHAYU", "BANK MANDIRI"),
        ("081200000003", "DANA", "AGUS WIJAYA", "DANA"),
    ],
)
async def test_an_account_inquiry_names_the_holder(
    app: FastAPI, client: httpx.AsyncClient, account: str, bank: str, name: str, bank_name: str
) -> None:
    merchant = await make_merchant(app)
    token = await disbursement_token(client, merchant)
    answer = await post_payout(client, merchant, ACCOUNT_INQUIRY, inquiry_body(account, bank), token)
    assert answer.status_code == 200, answer.text
    got = answer.json()
    assert got["responseCode"] == "2001600"
    assert got["referenceNo"].startswith("AIQ")
    assert len(got["referenceNo"]) == 23
    assert (got["beneficiaryAccountName"], got["beneficiaryAccountNo"], got["beneficiaryBankCode"]) == (
        name,
        account,
        bank,
    )
    assert (got["beneficiaryBankName"], got["currency"], got["partnerReferenceNo"]) == (bank_name, "IDR", "AIQ-1")


@pytest.mark.parametrize(
    ("body", "code", "message"),
    [
        (inquiry_body("1234560004"), "4041611", "Invalid Card/Account/Customer"),
        (inquiry_body("1234560005"), "4031618", "Inactive Card/Account/Customer"),
        (inquiry_body(bank_code="777"), "4041603", "Bank Not Supported By Switch"),
        (inquiry_body("12ab"), "4001601", "Invalid Field Format beneficiaryAccountNo"),
        ({"beneficiaryAccountNo": "1234567890"}, "4001602", "Invalid Mandatory Field beneficiaryBankCode"),
    ],
)
async def test_an_account_inquiry_refuses_with_the_case(
    app: FastAPI, client: httpx.AsyncClient, body: dict[str, str], code: str, message: str
) -> None:
    merchant = await make_merchant(app)
    token = await disbursement_token(client, merchant)
    answer = await post_payout(client, merchant, ACCOUNT_INQUIRY, body, token)
    assert answer.json() == {"responseCode": code, "responseMessage": message}
    assert answer.status_code == int(code[:3])


async def test_a_rail_silent_before_acceptance_is_503_and_nothing_is_recorded(
    app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    merchant = await funded(app)
    token = await disbursement_token(client, merchant)

    async def silent(bank: str, account: str) -> None:
        raise ProcessorUnavailable()

    monkeypatch.setattr(payout_rail("014"), "account_inquiry", silent)
    body = transfer_body()
    refused = await post_payout(client, merchant, TRANSFER, body, token, idempotency_key="k")
    assert refused.status_code == 503, refused.text
    assert refused.json()["responseCode"] == "5031800"
    assert refused.headers["Retry-After"]
    inquiry = await post_payout(client, merchant, ACCOUNT_INQUIRY, inquiry_body(), token)
    assert inquiry.json()["responseCode"] == "5031600"
    monkeypatch.undo()
    # nothing was kept with the key: its retry runs afresh
    retried = await post_payout(client, merchant, TRANSFER, body, token, idempotency_key="k")
    assert retried.json()["responseCode"] == "2001800", retried.text


async def test_status_by_either_reference(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await funded(app)
    token = await disbursement_token(client, merchant)
    body = transfer_body("5555550002", amount="75000.00")
    accepted = (await post_payout(client, merchant, TRANSFER, body, token, external="4242424242")).json()
    reference, partner = accepted["referenceNo"], body["partnerReferenceNo"]
    both = {"reference_no": reference, "partner_reference_no": partner}
    for by in ({"reference_no": reference}, {"partner_reference_no": partner}, both):
        answer = await post_payout(client, merchant, TRANSFER_STATUS, status_body(**by), token)
        assert answer.status_code == 200, answer.text
        got = answer.json()
        assert got == {
            "responseCode": "2003600",
            "responseMessage": "Successful",
            "originalReferenceNo": reference,
            "originalPartnerReferenceNo": partner,
            "originalExternalId": "4242424242",
            "serviceCode": "18",
            "transactionDate": "2026-11-28T10:00:00+07:00",
            "amount": {"value": "75000.00", "currency": "IDR"},
            "beneficiaryAccountNo": "5555550002",
            "beneficiaryBankCode": "014",
            "currency": "IDR",
            "previousResponseCode": "2001800",
            "referenceNumber": got["referenceNumber"],
            "sourceAccountNo": accepted["sourceAccountNo"],
            "latestTransactionStatus": "03",
            "transactionStatusDesc": "Pending",
            "additionalInfo": {"beneficiaryAccountName": "Budi Santoso"},
        }


@pytest.mark.parametrize(
    ("body", "code", "message"),
    [
        ({"originalReferenceNo": "DSB1"}, "4003602", "Invalid Mandatory Field serviceCode"),
        ({"serviceCode": "17", "originalReferenceNo": "DSB1"}, "4003601", "Invalid Field Format serviceCode"),
        ({"serviceCode": "18"}, "4003602", "Invalid Mandatory Field originalPartnerReferenceNo"),
        ({"serviceCode": "18", "originalReferenceNo": "DSBNOSUCH"}, "4043601", "Transaction Not Found"),
    ],
)
async def test_status_refusals(
    app: FastAPI, client: httpx.AsyncClient, body: dict[str, str], code: str, message: str
) -> None:
    merchant = await make_merchant(app)
    token = await disbursement_token(client, merchant)
    answer = await post_payout(client, merchant, TRANSFER_STATUS, body, token)
    assert answer.json() == {"responseCode": code, "responseMessage": message}


async def test_status_references_of_two_transfers_or_another_merchants_are_not_found(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    merchant, other = await funded(app), await funded(app)
    token, other_token = await disbursement_token(client, merchant), await disbursement_token(client, other)
    one, two = transfer_body(), transfer_body()
    first = (await post_payout(client, merchant, TRANSFER, one, token)).json()
    await post_payout(client, merchant, TRANSFER, two, token)
    mixed = status_body(reference_no=first["referenceNo"], partner_reference_no=two["partnerReferenceNo"])
    assert (await post_payout(client, merchant, TRANSFER_STATUS, mixed, token)).json()["responseCode"] == "4043601"
    theirs = status_body(reference_no=first["referenceNo"])
    assert (await post_payout(client, other, TRANSFER_STATUS, theirs, other_token)).status_code == 404


async def test_history_lists_transfers_returns_and_top_ups_newest_first_in_pages(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    merchant = await funded(app, 1_000_000, "Saldo awal")
    token = await disbursement_token(client, merchant)
    bodies = []
    for account in ("1111111111", "2222220002", "3333330003"):
        clock.advance(1)
        body = transfer_body(account, amount="10000.00")
        bodies.append(body)
        assert (await post_payout(client, merchant, TRANSFER, body, token)).status_code == 200
    clock.advance(10)
    await check_unsettled_transfers(app.state.database)
    listing = await post_payout(client, merchant, HISTORY_LIST, {"partnerReferenceNo": "H-1"}, token)
    assert listing.status_code == 200, listing.text
    got = listing.json()
    assert (got["responseCode"], got["partnerReferenceNo"]) == ("2001200", "H-1")
    entries = got["detailData"]
    assert [(e["type"], e["status"]) for e in entries] == [
        ("SEND_MONEY", "CLOSED"),
        ("SEND_MONEY", "SUCCESS"),
        ("SEND_MONEY", "SUCCESS"),
        ("TOP_UP", "SUCCESS"),
    ]
    assert [e["additionalInfo"]["partnerReferenceNo"] for e in entries[:3]] == [
        b["partnerReferenceNo"] for b in reversed(bodies)
    ]
    assert entries[0]["additionalInfo"]["latestTransactionStatus"] == "06"
    assert entries[0]["remark"] == "Gaji November"
    assert entries[0]["amount"] == {"value": "10000.00", "currency": "IDR"}
    assert (entries[3]["remark"], entries[3]["amount"]["value"]) == ("Saldo awal", "1000000.00")
    page = await post_payout(client, merchant, HISTORY_LIST, {"pageSize": 3, "pageNumber": 1}, token)
    assert [e["type"] for e in page.json()["detailData"]] == ["TOP_UP"]
    only = {"filter": {"originalPartnerReferenceNo": bodies[1]["partnerReferenceNo"]}}
    filtered = (await post_payout(client, merchant, HISTORY_LIST, only, token)).json()["detailData"]
    assert [e["additionalInfo"]["partnerReferenceNo"] for e in filtered] == [bodies[1]["partnerReferenceNo"]]
    # before today's window: nothing
    yesterday = isoformat_seconds(clock.now() - timedelta(days=2))
    earlier = {"fromDateTime": yesterday, "toDateTime": isoformat_seconds(clock.now() - timedelta(days=1, hours=1))}
    assert (await post_payout(client, merchant, HISTORY_LIST, earlier, token)).json()["detailData"] == []


@pytest.mark.parametrize(
    ("window", "field"),
    [
        ({"fromDateTime": "2026-11-01T00:00:00+07:00", "toDateTime": "2026-10-01T00:00:00+07:00"}, "toDateTime"),
        ({"fromDateTime": "2026-09-01T00:00:00+07:00", "toDateTime": "2026-10-03T00:00:00+07:00"}, "fromDateTime"),
        ({"pageSize": 100}, "pageSize"),
        ({"pageNumber": -1}, "pageNumber"),
        ({"fromDateTime": "2026-09-01 00:00"}, "fromDateTime"),
    ],
)
async def test_history_refuses_a_reversed_or_long_window_and_bad_paging(
    app: FastAPI, client: httpx.AsyncClient, window: dict[str, object], field: str
) -> None:
    merchant = await make_merchant(app)
    token = await disbursement_token(client, merchant)
    answer = await post_payout(client, merchant, HISTORY_LIST, window, token)
    assert answer.json() == {"responseCode": "4001201", "responseMessage": f"Invalid Field Format {field}"}


async def test_history_detail_of_a_transfer(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await funded(app)
    token = await disbursement_token(client, merchant)
    body = transfer_body("4444440003", amount="15000.00")
    accepted = (await post_payout(client, merchant, TRANSFER, body, token)).json()
    clock.advance(10)
    await check_unsettled_transfers(app.state.database)
    answer = await post_payout(
        client, merchant, HISTORY_DETAIL, {"originalPartnerReferenceNo": body["partnerReferenceNo"]}, token
    )
    assert answer.status_code == 200, answer.text
    got = answer.json()
    assert got["responseCode"] == "2001300"
    assert (got["referenceNo"], got["partnerReferenceNo"]) == (accepted["referenceNo"], body["partnerReferenceNo"])
    assert (got["status"], got["type"], got["remark"]) == ("CLOSED", "SEND_MONEY", "Gaji November")
    assert got["amount"] == {"value": "15000.00", "currency": "IDR"}
    assert "cancelledTime" in got
    assert "refundAmount" not in got
    assert got["additionalInfo"]["transactionStatusDesc"] == "Failed"
    unknown = await post_payout(client, merchant, HISTORY_DETAIL, {"originalPartnerReferenceNo": "NOPE"}, token)
    assert unknown.json() == {"responseCode": "4041301", "responseMessage": "Transaction Not Found"}
