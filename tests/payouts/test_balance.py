"""The disbursement balance and the operator's top-ups (docs/decisions.md §11.2, §11.3)."""

from __future__ import annotations

import asyncio

import httpx
from fastapi import FastAPI

from tests.conftest import TEST_ADMIN_TOKEN
from tests.support.builders import make_merchant

ADMIN = {"Authorization": f"Bearer {TEST_ADMIN_TOKEN}"}


def top_ups(merchant_id: str) -> str:
    return f"/admin/merchants/{merchant_id}/disbursement-balance/top-ups"


async def test_a_merchant_has_a_disbursement_account_and_a_balance_topped_up_by_the_operator(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    merchant = await make_merchant(app)
    shown = (await client.get(f"/admin/merchants/{merchant.id}", headers=ADMIN)).json()
    account_no = shown["account_no"]
    assert len(account_no) == 16
    assert account_no.isdigit()
    balance = await client.get(f"/admin/merchants/{merchant.id}/disbursement-balance", headers=ADMIN)
    assert balance.json() == {"merchant_id": merchant.id, "account_no": account_no, "available": 0, "hold": 0,
                              "ledger": 0}  # fmt: skip
    first = await client.post(top_ups(merchant.id), json={"amount": 1_500_000, "note": "Saldo awal"}, headers=ADMIN)
    assert first.status_code == 201, first.text
    body = first.json()
    assert (body["merchant_id"], body["amount"], body["available"], body["hold"], body["ledger"]) == (
        merchant.id, 1_500_000, 1_500_000, 0, 1_500_000,
    )  # fmt: skip
    assert set(body) == {"top_up_id", "merchant_id", "amount", "available", "hold", "ledger", "created_at"}
    second = await client.post(top_ups(merchant.id), json={"amount": 500_000, "note": "Tambahan"}, headers=ADMIN)
    assert second.json()["ledger"] == 2_000_000
    assert second.json()["top_up_id"] != body["top_up_id"]
    audited = (await client.get("/admin/audit", params={"merchant_id": merchant.id}, headers=ADMIN)).json()
    events = [e for e in audited["events"] if e["action"] == "disbursement.top_up"]
    assert len(events) == 2


async def test_a_top_up_that_is_not_whole_positive_rupiah_with_a_note_is_refused(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    merchant = await make_merchant(app)
    for bad in ({"amount": 0, "note": "x"}, {"amount": 10.5, "note": "x"}, {"amount": "1000", "note": "x"},
                {"amount": 1000, "note": " "}, {"amount": 1000}, {"amount": 10**13, "note": "x"}):  # fmt: skip
        answer = await client.post(top_ups(merchant.id), json=bad, headers=ADMIN)
        assert answer.status_code == 400, (bad, answer.text)
    assert (await client.post(top_ups("MCHNOSUCH"), json={"amount": 1, "note": "x"}, headers=ADMIN)).status_code == 404
    assert (await client.post(top_ups(merchant.id), json={"amount": 1, "note": "x"})).status_code == 401
    balance = (await client.get(f"/admin/merchants/{merchant.id}/disbursement-balance", headers=ADMIN)).json()
    assert balance["ledger"] == 0


async def test_concurrent_top_ups_all_count(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    answers = await asyncio.gather(
        *(client.post(top_ups(merchant.id), json={"amount": 1_000 * (n + 1), "note": f"n{n}"}, headers=ADMIN)
          for n in range(12))
    )  # fmt: skip
    assert {a.status_code for a in answers} == {201}
    balance = (await client.get(f"/admin/merchants/{merchant.id}/disbursement-balance", headers=ADMIN)).json()
    assert balance["ledger"] == balance["available"] == 1_000 * sum(range(1, 13))
