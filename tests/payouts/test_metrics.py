"""/metrics tells disbursement (issue 46 item 6): transfers by state, and the balances' ledger, hold and
available summed over every merchant, read from the database at scrape time."""

from __future__ import annotations

import re

import httpx
from fastapi import FastAPI

from tests.conftest import TEST_ADMIN_TOKEN
from tests.support.builders import make_merchant

ADMIN = {"Authorization": f"Bearer {TEST_ADMIN_TOKEN}"}
STATES = {"01": "initiated", "03": "pending", "00": "success", "06": "failed", "04": "refunded", "05": "canceled"}


async def scraped(client: httpx.AsyncClient) -> dict[str, float]:
    text = (await client.get("/metrics")).text
    found = re.findall(r"^(kasir_payout_[a-z_]+(?:\{[^}]*\})?) ([0-9.e+]+)$", text, re.M)
    return {name: float(value) for name, value in found}


async def test_the_balances_sums_and_every_transfer_state_are_on_metrics(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    before = await scraped(client)
    for status, state in STATES.items():  # every state is listed, even at 0
        assert f'kasir_payout_transfers{{state="{state}",status="{status}"}}' in before, sorted(before)
    merchant = await make_merchant(app)
    answer = await client.post(f"/admin/merchants/{merchant.id}/disbursement-balance/top-ups",
                               json={"amount": 2_000_000, "note": "metrics"}, headers=ADMIN)  # fmt: skip
    assert answer.status_code == 201
    after = await scraped(client)
    for name, moved in (("ledger", 2_000_000), ("available", 2_000_000), ("held", 0)):
        key = f"kasir_payout_balance_{name}_rupiah"
        assert after[key] - before[key] == moved, name


async def test_transfers_move_the_state_counts_and_the_held_sum(app: FastAPI, client: httpx.AsyncClient) -> None:
    from kasir.audit.service import Actor
    from kasir.payouts.service import payout_service
    from tests.support.wire.payouts import TRANSFER, disbursement_token, post_payout, transfer_body

    merchant = await make_merchant(app)
    async with app.state.database.unit_of_work() as session:
        await payout_service.top_up(session, merchant.id, 1_000_000, "metrics", Actor.cli())
    token = await disbursement_token(client, merchant)
    before = await scraped(client)
    sent = await post_payout(client, merchant, TRANSFER, transfer_body(amount="100000.00"), token)
    pending = await post_payout(client, merchant, TRANSFER, transfer_body("1234560002", amount="30000.00"), token)
    assert (sent.status_code, pending.status_code) == (200, 200)
    after = await scraped(client)

    def moved(name: str) -> float:
        return after[name] - before[name]

    assert moved('kasir_payout_transfers{state="success",status="00"}') == 1
    assert moved('kasir_payout_transfers{state="pending",status="03"}') == 1
    assert moved("kasir_payout_balance_held_rupiah") == 30_000
    assert moved("kasir_payout_balance_ledger_rupiah") == -100_000  # 00 debits the ledger
    assert moved("kasir_payout_balance_available_rupiah") == -130_000
