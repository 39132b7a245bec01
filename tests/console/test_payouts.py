"""The disbursement room in the console (issue 46 item 6): the merchant's balance and its top-ups (operators top up,
audited, through the admin API's service; merchant users see their own balance read-only)."""

from __future__ import annotations

import re

import httpx
from fastapi import FastAPI

from tests.conftest import TEST_ADMIN_TOKEN
from tests.console.helpers import closing, page_csrf, signed_in
from tests.support.builders import make_merchant

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
