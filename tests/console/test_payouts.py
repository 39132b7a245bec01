"""The disbursement room in the console (issue 46 item 6): the merchant's balance and its top-ups (operators top up,
audited, through the admin API's service; merchant users see their own balance read-only)."""

from __future__ import annotations

import re

import httpx
from fastapi import FastAPI

from tests.conftest import TEST_ADMIN_TOKEN
from tests.console.helpers import closing, csrf_of, page_csrf, signed_in
from tests.support.builders import make_merchant
from tests.support.receiver import CallbackReceiver
from tests.support.worker import settled_callbacks

ADMIN = {"Authorization": f"Bearer {TEST_ADMIN_TOKEN}"}


def shown(html: str, element_id: str) -> str:
    found = re.search(rf'id="{element_id}">(?:<strong id="[^"]+">)?([^<]+)<', html)
    assert found, f"no #{element_id} on the page"
    return found.group(1).strip()


async def balance_of(client: httpx.AsyncClient, merchant_id: str) -> dict[str, int]:
    answer = await client.get(f"/admin/merchants/{merchant_id}/disbursement-balance", headers=ADMIN)
    assert answer.status_code == 200, answer.text
    return answer.json()


async def test_an_operator_tops_up_from_the_merchant_page_after_a_second_look_audited(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    merchant = await make_merchant(app)
    async with closing(await signed_in(app)) as operator:
        page = await operator.get(f"/console/merchants/{merchant.id}")
        assert page.status_code == 200, page.text
        assert shown(page.text, "balance-available") == "Rp 0"
        assert 'id="no-top-ups"' in page.text
        account_no = (await balance_of(client, merchant.id))["account_no"]
        assert shown(page.text, "balance-account") == account_no
        csrf = await page_csrf(operator, f"/console/merchants/{merchant.id}")
        form = {"csrf_token": csrf, "amount": "2500000", "note": "Saldo awal"}
        review = await operator.post(f"/console/merchants/{merchant.id}/top-up", data=form)
        assert review.status_code == 200, review.text
        assert shown(review.text, "review-amount") == "Rp 2.500.000"
        assert shown(review.text, "review-available") == "Rp 2.500.000"
        assert (await balance_of(client, merchant.id))["ledger"] == 0  # nothing moved before the confirmation
        done = await operator.post(f"/console/merchants/{merchant.id}/top-up", data={**form, "confirmed": "yes"})
        assert done.status_code == 303, done.text
        assert done.headers["location"].startswith(f"/console/merchants/{merchant.id}?done=topped_up")
        after = await operator.get(f"/console/merchants/{merchant.id}")
        assert shown(after.text, "balance-available") == "Rp 2.500.000"
        assert "Saldo awal" in after.text
        assert "Disbursement balance topped up" in (await operator.get(done.headers["location"])).text
    assert await balance_of(client, merchant.id) == {
        "merchant_id": merchant.id, "account_no": account_no, "available": 2_500_000, "hold": 0, "ledger": 2_500_000,
    }  # fmt: skip
    audited = (await client.get("/admin/audit", params={"merchant_id": merchant.id}, headers=ADMIN)).json()
    events = [e for e in audited["events"] if e["action"] == "disbursement.top_up"]
    assert len(events) == 1
    assert events[0]["actor"].startswith("console:")


async def test_a_top_up_without_csrf_blank_or_not_whole_rupiah_is_refused_and_moves_nothing(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    merchant = await make_merchant(app)
    async with closing(await signed_in(app)) as operator:
        csrf = await page_csrf(operator, f"/console/merchants/{merchant.id}")
        url = f"/console/merchants/{merchant.id}/top-up"
        for form, status in (
            ({"amount": "1000", "note": "x", "confirmed": "yes"}, 403),
            ({"csrf_token": csrf, "amount": "0", "note": "x", "confirmed": "yes"}, 400),
            ({"csrf_token": csrf, "amount": "10.5", "note": "x", "confirmed": "yes"}, 400),
            ({"csrf_token": csrf, "amount": "1000", "note": "  ", "confirmed": "yes"}, 400),
            ({"csrf_token": csrf, "amount": "1000", "confirmed": "yes"}, 400),
        ):
            answer = await operator.post(url, data=form)
            assert answer.status_code == status, (form, answer.text)
        unknown = await operator.post("/console/merchants/MCHNOSUCH/top-up", data={"csrf_token": csrf,
                                       "amount": "1000", "note": "x", "confirmed": "yes"})  # fmt: skip
        assert unknown.status_code == 404
    assert (await balance_of(client, merchant.id))["ledger"] == 0


async def test_merchant_users_see_their_own_balance_read_only_and_cannot_top_up(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    mine = await make_merchant(app)
    other = await make_merchant(app)
    for merchant, amount in ((mine, 700_000), (other, 900_000)):
        answer = await client.post(f"/admin/merchants/{merchant.id}/disbursement-balance/top-ups",
                                   json={"amount": amount, "note": f"for {merchant.id}"}, headers=ADMIN)  # fmt: skip
        assert answer.status_code == 201
    for role in ("merchant", "merchant_admin"):
        async with closing(await signed_in(app, role=role, merchant_id=mine.id)) as user:
            page = await user.get("/console/my-merchant")
            assert page.status_code == 200, page.text
            assert shown(page.text, "balance-available") == "Rp 700.000"
            assert f"for {mine.id}" in page.text
            assert other.id not in page.text
            assert 'id="top-up-form"' not in page.text
            csrf = await page_csrf(user, "/console/my-merchant")
            for target in (mine, other):
                form = {"csrf_token": csrf, "amount": "1", "note": "x", "confirmed": "yes"}
                refused = await user.post(f"/console/merchants/{target.id}/top-up", data=form)
                assert refused.status_code == 404, refused.text
    assert (await balance_of(client, mine.id))["ledger"] == 700_000
    assert (await balance_of(client, other.id))["ledger"] == 900_000


# --- the transfers' list, detail and CSV ---------------------------------------------------------------------

_SEQUENCE = iter(range(10**6))


async def add_transfer(
    app: FastAPI, merchant_id: str, *, status: str = "00", amount: int = 150_000, reason: str | None = None,
    account_no: str = "1234567890", callback_url: str | None = None, partner_reference_no: str | None = None,
) -> str:  # fmt: skip
    """A transfer row as the payouts room records one (the console only reads them); its referenceNo."""
    from datetime import timedelta

    from sqlalchemy import insert

    from kasir.db import run
    from kasir.kit.clock import clock
    from kasir.payouts.models import PayoutTransfer

    number = next(_SEQUENCE)
    reference = f"DSB{merchant_id[-6:]}{number:014d}"[:23]
    now = clock.now() + timedelta(milliseconds=number)
    final = status in ("00", "06", "04", "05")
    values = {
        "id": reference, "merchant_id": merchant_id, "partner_reference_no": partner_reference_no or f"PAYOUT-{number}",
        "external_id": str(10**9 + number), "amount": amount, "currency": "IDR",
        "held": 0 if final else amount, "beneficiary_account_no": account_no,
        "beneficiary_account_name": "BUDI SANTOSO", "beneficiary_bank_code": "014", "bank": "014",
        "beneficiary_bank_name": "BANK CENTRAL ASIA", "source_account_no": "8800000000000000", "fee_type": "OUR",
        "status": status, "reason": reason, "rail": "simulator", "rail_reference": f"SIM{number}",
        "callback_url": callback_url, "transaction_date": None, "remark": "gaji", "details": "{}",
        "created_at": now, "updated_at": now, "finished_at": now if final else None,
        "refunded_at": now if status == "04" else None, "next_check_at": None if final else now,
    }  # fmt: skip
    async with app.state.database.unit_of_work() as session:
        await run(session, insert(PayoutTransfer).values(**values))
    return reference


async def test_the_payouts_list_filters_finds_and_shows_each_state_to_operators(app: FastAPI) -> None:
    merchant = await make_merchant(app)
    sent = await add_transfer(app, merchant.id, status="00", partner_reference_no=f"SHOP-{merchant.id}")
    failed = await add_transfer(app, merchant.id, status="06", reason="Rejected by the beneficiary bank")
    pending = await add_transfer(app, merchant.id, status="03", account_no="1234560002")
    async with closing(await signed_in(app)) as operator:
        page = await operator.get("/console/payouts", params={"merchant": merchant.id})
        assert page.status_code == 200, page.text
        for reference in (sent, failed, pending):
            assert f'id="payout-{reference}"' in page.text
        assert "00 Success" in page.text
        assert "06 Failed" in page.text
        assert "Rejected by the beneficiary bank" in page.text
        assert 'id="balance-available"' in page.text  # the filtered merchant's balance
        only_failed = await operator.get("/console/payouts", params={"merchant": merchant.id, "status": "06"})
        assert f'id="payout-{failed}"' in only_failed.text
        assert f'id="payout-{sent}"' not in only_failed.text
        found = await operator.get("/console/payouts", params={"q": f"SHOP-{merchant.id}"})  # the merchant's own
        assert (found.status_code, found.headers["location"]) == (303, f"/console/payouts/{sent}")
        by_reference = await operator.get("/console/payouts", params={"q": pending})
        assert by_reference.status_code == 303
        assert by_reference.headers["location"] == f"/console/payouts/{pending}"
        assert (await operator.get("/console/payouts", params={"status": "99"})).status_code == 400
        nav = await operator.get("/console/overview")
        assert 'href="/console/payouts"' in nav.text


async def test_the_detail_shows_the_transfer_its_moves_and_its_notification_and_merchants_see_only_theirs(
    app: FastAPI,
) -> None:
    mine = await make_merchant(app)
    other = await make_merchant(app)
    failed = await add_transfer(app, mine.id, status="06", reason="Rejected by the beneficiary bank",
                                callback_url="http://127.0.0.1:9/payouts")  # fmt: skip
    theirs = await add_transfer(app, other.id, status="00")
    async with closing(await signed_in(app)) as operator:
        detail = await operator.get(f"/console/payouts/{failed}")
        assert detail.status_code == 200, detail.text
        assert shown(detail.text, "payout-status") == "06 Failed"
        assert shown(detail.text, "payout-reason") == "Rejected by the beneficiary bank"
        assert shown(detail.text, "payout-held") == "Rp 0"
        assert "http://127.0.0.1:9/payouts" in detail.text
        assert "06 Failed" in detail.text.split('id="timeline"')[1]
    async with closing(await signed_in(app, role="merchant", merchant_id=mine.id)) as user:
        listed = await user.get("/console/payouts")
        assert f'id="payout-{failed}"' in listed.text
        assert f'id="payout-{theirs}"' not in listed.text
        assert 'id="balance-available"' in listed.text  # its own balance, read-only
        assert 'id="top-up-form"' not in listed.text
        assert (await user.get(f"/console/payouts/{theirs}")).status_code == 404
        assert (await user.get("/console/payouts", params={"merchant": other.id})).text.count("payout-DSB") == 0
        assert (await user.get(f"/console/payouts/{failed}")).status_code == 200


async def test_the_payouts_csv_has_every_filtered_transfer_and_no_other_merchants(app: FastAPI) -> None:
    import csv
    import io

    mine = await make_merchant(app)
    other = await make_merchant(app)
    references = [await add_transfer(app, mine.id, status=s) for s in ("00", "06", "04", "01")]
    await add_transfer(app, other.id)
    async with closing(await signed_in(app, role="merchant", merchant_id=mine.id)) as user:
        answer = await user.get("/console/payouts.csv")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(answer.text)))
    assert sorted(r["reference_no"] for r in rows) == sorted(references)
    assert {r["merchant_id"] for r in rows} == {mine.id}
    by_reference = {r["reference_no"]: r for r in rows}
    assert (by_reference[references[2]]["status"], by_reference[references[2]]["status_description"]) == (
        "04", "Refunded",
    )  # fmt: skip
    assert by_reference[references[0]]["amount"] == "150000"
    assert by_reference[references[2]]["refunded_at"]
    assert by_reference[references[3]]["finished_at"] == ""


async def test_a_transfers_notification_is_on_its_page_and_on_the_callbacks_page_and_replays_there(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    from kasir.audit.service import Actor
    from kasir.payouts.service import payout_service
    from tests.support.wire.payouts import TRANSFER, disbursement_token, post_payout, transfer_body

    merchant = await make_merchant(app)
    async with app.state.database.unit_of_work() as session:
        await payout_service.top_up(session, merchant.id, 1_000_000, "Saldo awal", Actor.cli())
    token = await disbursement_token(client, merchant)
    answer = await post_payout(client, merchant, TRANSFER, transfer_body(callback_url=receiver.url("/payouts")), token)
    assert answer.status_code == 200, answer.text
    reference = answer.json()["referenceNo"]
    await receiver.wait_for(1, path="/payouts")
    await settled_callbacks(app, merchant.id)
    async with closing(await signed_in(app)) as operator:
        page = await operator.get(f"/console/payouts/{reference}")
        assert "00 Success" in page.text
        found = re.search(r'id="replay-original-(\d+)"', page.text)
        assert found, "no notification on the transfer's page"
        queue = await operator.get("/console/callbacks", params={"state": "delivered", "product": "payout"})
        assert f'href="/console/payouts/{reference}"' in queue.text
        replayed = await operator.post(f"/console/callbacks/{found.group(1)}/replay",
                                       data={"csrf_token": csrf_of(page.text), "target": "original"})  # fmt: skip
        assert replayed.status_code == 303, replayed.text
        assert replayed.headers["location"] == f"/console/payouts/{reference}?done=replayed"
        assert "Callback queued for delivery again" in (await operator.get(replayed.headers["location"])).text
