"""Readable lists and overview (issue 41 item 7): merchant names beside ids, BNPL states in words,
amounts in rupiah, dates on one line, paid volume net of voids and refunds, delivered events, a daily trend."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select, update

from kasir.bnpl.states import DESCRIPTIONS, BnplStatus
from kasir.callbacks.models import Callback
from kasir.db import fetch, run
from kasir.kit.clock import clock
from kasir.merchants.service import merchant_service
from kasir.payments.repository import payments_repository
from kasir.payments.service import payments_service
from kasir.wallet.models import WalletTransaction
from tests.console.helpers import closing, page_csrf, paid_wallet_payment, signed_in
from tests.support.builders import make_merchant
from tests.support.wire.snap import CHECKOUT, checkout_body, item, post_signed

CALLBACK_URL = "http://127.0.0.1:9/cb"


async def paid_for(client: httpx.AsyncClient, merchant: Any, amount: int) -> dict[str, Any]:
    items = [{"item_id": "KOPI", "name": "Kopi", "amount": amount, "qty": 1}]
    return await paid_wallet_payment(client, merchant, CALLBACK_URL, amount=amount, items=items)


async def bnpl_checkout(client: httpx.AsyncClient, merchant: Any, **kw: Any) -> str:
    response = await post_signed(client, merchant, CHECKOUT, checkout_body(CALLBACK_URL, **kw))
    assert response.status_code == 200, response.text
    return str(response.json()["referenceNo"])


def cells(html: str, label: str) -> list[str]:
    """Every table cell of the column `label` (its data-label), as written."""
    return re.findall(rf'<td data-label="{label}"[^>]*>.*?</td>', html, flags=re.S)


async def test_lists_name_each_merchant_beside_its_id_with_one_lookup_a_page(
    app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    merchant = await make_merchant(app, callback_url=CALLBACK_URL)
    other = await make_merchant(app, callback_url=CALLBACK_URL)
    paid = [await paid_wallet_payment(client, shop, CALLBACK_URL) for shop in (merchant, other, merchant)]
    lookups: list[list[str | None]] = []
    looked_up = payments_repository.merchant_names

    async def counted(session: Any, ids: Any) -> dict[str, str]:
        lookups.append(list(ids))
        return await looked_up(session, lookups[-1])

    async def one_by_one(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("a merchant read per row")

    monkeypatch.setattr(payments_repository, "merchant_names", counted)
    async with closing(await signed_in(app)) as browser:
        monkeypatch.setattr(merchant_service, "get", one_by_one)
        page = await browser.get("/console/payments")
        monkeypatch.undo()
        monkeypatch.setattr(payments_repository, "merchant_names", counted)
        assert page.status_code == 200, page.text
        assert len(lookups) == 1  # one query for the whole page, however many rows and merchants
        merchants = " ".join(cells(page.text, "Merchant"))
        for shop in (merchant, other):
            assert f'<span class="name">{shop.credentials.name}</span> <span class="mono muted">{shop.id}</span>' in (
                merchants
            )
        callbacks = await browser.get(f"/console/callbacks?state=pending&merchant={merchant.id}")
        assert f'<span class="name">{merchant.credentials.name}</span>' in " ".join(cells(callbacks.text, "Merchant"))
        refunded = await browser.post(
            f"/console/payments/{paid[0]['transaction_id']}/refund",
            data={"amount": "1000", "confirmed": "yes", "csrf_token": await page_csrf(browser)},
        )
        assert refunded.status_code == 303
        audit = await browser.get(f"/console/audit?merchant={merchant.id}")
        assert audit.status_code == 200
        assert f'<span class="name">{merchant.credentials.name}</span>' in " ".join(cells(audit.text, "Target"))
        assert len(lookups) == 2  # the callbacks page names them from its filter's list, read already


async def test_bnpl_states_show_as_words_with_the_code_beside(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app, callback_url=CALLBACK_URL)
    reference_no = await bnpl_checkout(client, merchant, items=[item("50000.00", 2)])
    async with closing(await signed_in(app, role="merchant", merchant_id=merchant.id)) as browser:
        listed = await browser.get("/console/payments?product=bnpl")
        [status] = cells(listed.text, "Status")
        assert 'title="BNPL status code 01">Initiated</span> <span class="code mono muted">01</span>' in status
    async with closing(await signed_in(app)) as operator:
        csrf = await page_csrf(operator)
        paid = await operator.post(
            f"/console/payments/{reference_no}/simulate", data={"outcome": "pay", "csrf_token": csrf}
        )
        assert paid.status_code == 303, paid.text
        page = await operator.get(f"/console/payments/{reference_no}")
        assert re.search(r'id="payment-status" title="BNPL status code 00">Success</span>', page.text)
        assert "Success (code 00)" in page.text  # the Status field
        assert re.search(r"#\d+ <span title=\"BNPL status code 00\">Success</span>", page.text)  # its callback
        assert "Callback Success (00) recorded" in page.text  # the timeline
        callbacks = await operator.get(f"/console/callbacks?state=pending&merchant={merchant.id}&product=bnpl")
        [event] = cells(callbacks.text, "Event")
        assert '<span title="BNPL status code 00">Success</span>' in event
    # The words are BNPL's own (kasir.bnpl.states), not a second mapping.
    assert DESCRIPTIONS[BnplStatus.SUCCESS] == "Success"


async def test_amounts_are_rupiah_everywhere(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app, callback_url=CALLBACK_URL)
    reference_no = await bnpl_checkout(client, merchant, items=[item("50000.00", 2)])
    tx = await paid_wallet_payment(client, merchant, CALLBACK_URL)
    async with closing(await signed_in(app)) as browser:
        page = await browser.get(f"/console/payments/{reference_no}")
        [items] = re.findall(r'<table class="list compact" id="items">.*?</table>', page.text, flags=re.S)
        assert "Rp 50.000" in items
        assert "50000.00" not in page.text
        csrf = await page_csrf(browser)
        done = await browser.post(
            f"/console/payments/{tx['transaction_id']}/refund",
            data={"amount": "25000", "confirmed": "yes", "csrf_token": csrf},
        )
        assert done.status_code == 303
        audit = await browser.get(f"/console/audit?merchant={merchant.id}&action=payment.refund")
        [change] = cells(audit.text, "Change")
        assert "refund_amount</span>: <del>—</del> → Rp 25.000" in change
        assert "<del>Rp 0</del> → Rp 25.000" in change  # refunded_amount


async def test_dates_in_lists_stay_on_one_line(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app, callback_url=CALLBACK_URL)
    await paid_wallet_payment(client, merchant, CALLBACK_URL)
    async with closing(await signed_in(app)) as browser:
        pages = {
            "/console/payments": ("Created",),
            f"/console/callbacks?state=pending&merchant={merchant.id}": ("Created",),
            "/console/audit": ("When",),
            "/console/merchants": ("Created",),
        }
        for path, labels in pages.items():
            html = (await browser.get(path)).text
            for label in labels:
                found = re.findall(rf'<td data-label="{label}"( class="[^"]*")?>', html)
                assert found, (path, label)
                assert all("when" in classes for classes in found), (path, label)
        css = (await browser.get("/console/static/console.css")).text
        assert re.search(r"^\.when \{ white-space: nowrap; \}", css, flags=re.M)


async def test_paid_volume_is_net_of_voids_and_refunds(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app, callback_url=CALLBACK_URL)
    await paid_for(client, merchant, 100_000)
    voided = await paid_for(client, merchant, 50_000)
    refunded = await paid_for(client, merchant, 80_000)
    async with closing(await signed_in(app)) as operator:
        csrf = await page_csrf(operator)
        for path, data in (
            (f"/console/payments/{voided['transaction_id']}/void", {}),
            (f"/console/payments/{refunded['transaction_id']}/refund", {"amount": "30000"}),
        ):
            done = await operator.post(path, data={**data, "confirmed": "yes", "csrf_token": csrf})
            assert done.status_code == 303, done.text
    async with closing(await signed_in(app, role="merchant", merchant_id=merchant.id)) as browser:
        page = await browser.get("/console/overview")
    # 100,000 paid + 80,000 paid less 30,000 refunded; the voided 50,000 not at all.
    assert 'id="stat-volume">Rp 150.000<' in page.text
    assert 'id="stat-count">3<' in page.text
    [volume] = re.findall(r'<figure class="chart" id="chart-volume">.*?</figure>', page.text, flags=re.S)
    assert ">Rp 150.000</text>" in volume


async def test_delivered_counts_events_not_deliveries(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app, callback_url=CALLBACK_URL)
    delivered_twice = await paid_wallet_payment(client, merchant, CALLBACK_URL)
    delivered_by_replay = await paid_wallet_payment(client, merchant, CALLBACK_URL)
    # The first: delivered, then an operator replay delivered again; the second: given up, then delivered
    # by its replay. Two events delivered, four deliveries.
    [first] = await callback_ids(app, delivered_twice["transaction_id"])
    [second] = await callback_ids(app, delivered_by_replay["transaction_id"])
    await set_status(app, {first: "delivered", second: "failed"})
    async with closing(await signed_in(app)) as operator:
        csrf = await page_csrf(operator)
        for event_id in (first, second):
            replayed = await operator.post(f"/console/callbacks/{event_id}/replay", data={"csrf_token": csrf})
            assert replayed.status_code == 303, replayed.text
    [_, first_replay] = await callback_ids(app, delivered_twice["transaction_id"])
    [_, second_replay] = await callback_ids(app, delivered_by_replay["transaction_id"])
    await set_status(app, {first_replay: "delivered", second_replay: "delivered"})
    async with closing(await signed_in(app, role="merchant", merchant_id=merchant.id)) as browser:
        page = await browser.get("/console/overview")
    assert 'id="stat-delivered">2<' in page.text
    assert 'id="stat-given-up">0<' in page.text
    [chart] = re.findall(r'<figure class="chart" id="chart-callbacks">.*?</figure>', page.text, flags=re.S)
    assert re.search(r'class="label">Delivered</text>.*?class="value">2</text>', chart, flags=re.S)


async def set_status(app: FastAPI, statuses: dict[int, str]) -> None:
    async with app.state.database.unit_of_work() as session:
        for callback_id, status in statuses.items():
            delivered_at = clock.now() if status == "delivered" else None
            await run(
                session,
                update(Callback).where(Callback.id == callback_id).values(status=status, delivered_at=delivered_at),
            )


async def callback_ids(app: FastAPI, transaction_id: str) -> list[int]:
    async with app.state.database.unit_of_work(read_only=True) as session:
        rows = await fetch(
            session, select(Callback.id).where(Callback.transaction_ref == transaction_id).order_by(Callback.id)
        )
    return [row.id for row in rows]


async def test_daily_trend_for_7_and_30_days(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app, callback_url=CALLBACK_URL)
    today = await paid_for(client, merchant, 100_000)
    yesterday = await paid_for(client, merchant, 40_000)
    weeks_ago = await paid_for(client, merchant, 70_000)
    async with closing(await signed_in(app)) as operator:
        csrf = await page_csrf(operator)
        done = await operator.post(
            f"/console/payments/{today['transaction_id']}/refund",
            data={"amount": "10000", "confirmed": "yes", "csrf_token": csrf},
        )
        assert done.status_code == 303
    midnight = clock.local_now().replace(hour=0, minute=0, second=0, microsecond=0)
    async with app.state.database.unit_of_work() as session:
        for tx, moment in ((yesterday, midnight - timedelta(hours=1)), (weeks_ago, midnight - timedelta(days=20))):
            await run(
                session,
                update(WalletTransaction).where(WalletTransaction.id == tx["transaction_id"]).values(created_at=moment),
            )
    async with app.state.database.unit_of_work(read_only=True) as session:
        week = (await payments_service.overview(session, merchant.id, "today", 7)).trend
        month = (await payments_service.overview(session, merchant.id, "today", 30)).trend
    assert [d.day for d in week] == [midnight - timedelta(days=n) for n in range(6, -1, -1)]
    assert [(d.count, int(d.net)) for d in week[-2:]] == [(1, 40_000), (1, 90_000)]
    assert sum(d.count for d in week) == 2
    assert len(month) == 30
    assert (month[-21].count, int(month[-21].net)) == (1, 70_000)
    async with closing(await signed_in(app, role="merchant", merchant_id=merchant.id)) as browser:
        seven = await browser.get("/console/overview")
        thirty = await browser.get("/console/overview?days=30")
        assert (await browser.get("/console/overview?days=9")).status_code == 400
    assert re.search(r'id="trend-7"\s+aria-current="page"', seven.text)
    assert re.search(r'id="trend-30"\s+aria-current="page"', thirty.text)
    [volumes] = re.findall(r'<figure class="chart" id="chart-trend-volume">.*?</figure>', seven.text, flags=re.S)
    assert volumes.count('class="label"') == 7
    assert ">Rp 90.000</text>" in volumes
    assert ">Rp 40.000</text>" in volumes
    [counts] = re.findall(r'<figure class="chart" id="chart-trend-count">.*?</figure>', thirty.text, flags=re.S)
    assert counts.count('class="label"') == 30
    [volumes] = re.findall(r'<figure class="chart" id="chart-trend-volume">.*?</figure>', thirty.text, flags=re.S)
    assert ">Rp 70.000</text>" in volumes
