"""Payment links everywhere a payment shows (issue 45 item 5): the list, its filters and its search on the console,
the admin API and `kasir payments find`; the detail page with the link, its attempts by method and its
callbacks; the CSV export; the overview's numbers; and the indexes all of them read."""

from __future__ import annotations

import csv
import io
import json
import re
import sqlite3
from typing import Any

import httpx
import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from fastapi import FastAPI
from sqlalchemy.engine import make_url

from kasir.config import Settings
from kasir.models import metadata
from kasir.payments.repository import payments_repository
from kasir.payments.service import parse_filter, payments_service
from kasir.va.service import va_service
from tests.card.test_pages import pay as pay_card
from tests.console.helpers import closing, csrf_of, paid_wallet_payment, signed_in
from tests.console.test_va import RecordingSession
from tests.links.test_flow import choose
from tests.ops.test_metrics import scrape, value
from tests.support import builders
from tests.support.builders import make_merchant
from tests.support.cli import kasir_beside_app
from tests.support.engine import engine_of
from tests.support.forms import page_forms, post_form
from tests.support.receiver import CallbackReceiver
from tests.support.wire.card import DECLINED
from tests.support.wire.links import create

CALLBACK_URL = "http://127.0.0.1:9/cb"
ADMIN = {"Authorization": "Bearer test-admin-token"}
CHANNELS = [{"channel": "CARD"}, {"channel": "DANA"}, {"channel": "QRIS"}, {"channel": "VA", "acq": "BCA"}]


async def open_link(client: httpx.AsyncClient, merchant: builders.TestMerchant, **kw: Any) -> dict[str, Any]:
    return await create(client, merchant, CALLBACK_URL, channels=CHANNELS, **kw)


def ids(answer: httpx.Response) -> list[str]:
    assert answer.status_code == 200, answer.text
    return [p["id"] for p in answer.json()["payments"]]


async def test_links_are_listed_filtered_and_found_by_any_id_on_the_admin_api(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    merchant = await make_merchant(app, callback_url=CALLBACK_URL)
    wallet = await paid_wallet_payment(client, merchant, CALLBACK_URL)
    link = await open_link(client, merchant, amount=120_000)

    everything = ids(await client.get(f"/admin/payments?merchant_id={merchant.id}", headers=ADMIN))
    assert everything == [link["transaction_id"], wallet["transaction_id"]]  # newest first, across products
    only_links = await client.get(f"/admin/payments?merchant_id={merchant.id}&product=link", headers=ADMIN)
    [view] = only_links.json()["payments"]
    assert (view["id"], view["product"], view["status"], view["outcome"]) == (
        link["transaction_id"],
        "link",
        "PENDING",
        "pending",
    )
    # Not paid: its channel is LINK, not a method it was offered; how it was paid, nothing yet.
    assert (view["channel"], view["amount"], view["payment_method"]) == ("LINK", "120000", None)
    assert (view["external_id"], view["order_id"]) == (link["external_id"], link["order_id"])
    pending = f"/admin/payments?merchant_id={merchant.id}&status=pending&channel=link"
    assert ids(await client.get(pending, headers=ADMIN)) == [link["transaction_id"]]
    for channel in ("DANA", "CARD"):  # offered, not paid with
        by_channel = f"/admin/payments?merchant_id={merchant.id}&product=link&channel={channel}"
        assert ids(await client.get(by_channel, headers=ADMIN)) == []
    paid = f"/admin/payments?merchant_id={merchant.id}&product=link&status=paid"
    assert ids(await client.get(paid, headers=ADMIN)) == []
    for quoted in (link["transaction_id"], link["external_id"], link["order_id"]):
        assert link["transaction_id"] in ids(await client.get(f"/admin/payments?q={quoted}", headers=ADMIN)), quoted
    single = await client.get(f"/admin/payments/{link['transaction_id']}", headers=ADMIN)
    assert single.json()["product"] == "link"
    assert wallet["transaction_id"] in ids(await client.get(f"/admin/payments?q={wallet['order_id']}", headers=ADMIN))
    other = (await client.get(f"/admin/payments/{wallet['transaction_id']}", headers=ADMIN)).json()
    assert other["payment_method"] is None  # an added field: null for other products


async def test_the_console_lists_and_finds_links_and_kasir_payments_find_does_too(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    merchant = await make_merchant(app, callback_url=CALLBACK_URL)
    link = await open_link(client, merchant)
    async with closing(await signed_in(app, role="merchant", merchant_id=merchant.id)) as browser:
        listed = await browser.get("/console/payments?product=link")
        assert listed.status_code == 200, listed.text
        assert '<option value="link" selected>link</option>' in listed.text  # the product filter offers links
        rows = {
            found: row for row in listed.text.split("<tr>") for found in re.findall(r"/console/payments/(PPL\w+)", row)
        }
        assert '<td data-label="Channel">LINK</td>' in rows[link["transaction_id"]]
        # Searching an id that names one payment opens it.
        found = await browser.get(f"/console/payments?q={link['order_id']}")
        assert (found.status_code, found.headers["location"]) == (303, f"/console/payments/{link['transaction_id']}")
    found_cli = await kasir_beside_app("payments", "find", link["external_id"], "--json")
    assert found_cli.exit_code == 0, found_cli.output
    [shown] = json.loads(found_cli.output)["payments"]
    assert (shown["id"], shown["product"], shown["channel"]) == (link["transaction_id"], "link", "LINK")
    listed_cli = await kasir_beside_app("payments", "list", "--product", "link", "--merchant", merchant.id, "--json")
    assert [p["id"] for p in json.loads(listed_cli.output)["payments"]] == [link["transaction_id"]]


async def test_the_detail_page_shows_the_link_its_methods_and_the_customers_page(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    merchant = await make_merchant(app, callback_url=CALLBACK_URL)
    item = {"item_id": "KOPI-1", "name": "Kopi beans", "amount": 25_000, "qty": 2, "description": "1 kg"}
    link = await open_link(client, merchant, item_details=[item], additional_data="meja 7")
    async with closing(await signed_in(app)) as browser:
        page = await browser.get(f"/console/payments/{link['transaction_id']}")
    assert page.status_code == 200, page.text
    html = page.text
    assert "Rp50.000" in html or "Rp 50.000" in html
    fields = html[html.index('id="payment-fields"') :]
    offered = "CARD (CARD), DANA (DANA), QRIS (QRIS), VA (BCA)"
    for shown in (link["external_id"], link["order_id"], "Two coffees", offered, "0 of 3", "meja 7", "Budi Santoso"):
        assert shown in fields, shown
    assert "Kopi beans" in html[html.index('id="items"') :]
    assert 'id="no-link-attempts"' in html  # no method chosen yet
    page_link = re.search(r'id="link-page">The customer pays at <a href="([^"]+)"', html)
    assert page_link is not None
    assert page_link.group(1) == link["payment_url"]
    assert "No action applies" not in html


async def test_the_csv_export_says_how_a_link_was_paid_at_the_end(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app, callback_url=CALLBACK_URL)
    wallet = await paid_wallet_payment(client, merchant, CALLBACK_URL)
    link = await open_link(client, merchant, amount=75_000)
    async with closing(await signed_in(app)) as browser:
        response = await browser.get(f"/console/payments.csv?merchant={merchant.id}")
        only_links = await browser.get(f"/console/payments.csv?merchant={merchant.id}&product=link")
    header, *lines = list(csv.reader(io.StringIO(response.text)))
    assert header[13:] == ["va_number", "payment_method"]  # added at the end: every column before stays
    rows = {line[1]: dict(zip(header, line, strict=True)) for line in lines}
    row = rows[link["transaction_id"]]
    assert (row["product"], row["channel"], row["status"], row["outcome"], row["amount"]) == (
        "link",
        "LINK",
        "PENDING",
        "pending",
        "75000",
    )
    assert (row["net_amount"], row["payment_method"], row["paid_at"]) == ("0", "", "")
    assert rows[wallet["transaction_id"]]["payment_method"] == ""
    _, *link_lines = list(csv.reader(io.StringIO(only_links.text)))
    assert [line[1] for line in link_lines] == [link["transaction_id"]]


async def test_the_overview_counts_links(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app, callback_url=CALLBACK_URL)
    await open_link(client, merchant, amount=60_000)
    await open_link(client, merchant, amount=40_000)
    async with app.state.database.unit_of_work(read_only=True) as session:
        overview = await payments_service.overview(session, merchant.id, "today")
    assert (overview.count("link"), overview.count("link", "pending")) == (2, 2)
    assert overview.net_volume("link") == 0  # nothing paid yet
    assert overview.success_rate("link") is None
    async with closing(await signed_in(app)) as browser:
        page = await browser.get(f"/console/overview?merchant={merchant.id}")
    assert page.status_code == 200, page.text
    assert "Payment link" in page.text


async def test_the_link_indexes_of_the_models_are_the_migrations(app: FastAPI) -> None:
    async with engine_of(app.state.database) as engine, engine.connect() as connection:
        diffs = await connection.run_sync(
            lambda sync: compare_metadata(MigrationContext.configure(sync, opts={"compare_type": False}), metadata)
        )
    assert [d for d in diffs if "payment_link" in repr(d) or "_overview" in repr(d)] == []


@pytest.mark.parametrize(
    ("wanted", "index"),
    [
        ({"query": "external"}, "ix_payment_link_external"),
        ({"query": "order"}, "ix_payment_link_order"),
        ({"status": "pending"}, "ix_payment_link_status_created"),
        ({}, "ix_payment_link_created"),
    ],
)
async def test_the_link_list_and_search_walk_an_index(
    settings: Settings, app: FastAPI, client: httpx.AsyncClient, wanted: dict[str, str], index: str
) -> None:
    url = make_url(settings.resolved_database_url)
    if not url.drivername.startswith("sqlite"):
        pytest.skip("SQLite's query plans")
    merchant = await make_merchant(app, callback_url=CALLBACK_URL)
    link = await open_link(client, merchant)
    quoted = {"external": link["external_id"], "order": link["order_id"]}
    where = parse_filter(
        scope=None, product="link", status=wanted.get("status"), query=quoted.get(wanted.get("query", ""))
    )
    async with app.state.database.unit_of_work(read_only=True) as session:
        recording = RecordingSession(session)
        page = await payments_repository.page(recording, where, after=None, limit=50)  # type: ignore[arg-type]
    assert link["transaction_id"] in [row.id for row in page]
    [(sql, values)] = recording.sent
    with sqlite3.connect(url.database or "") as connection:
        plan = [row[3] for row in connection.execute(f"EXPLAIN QUERY PLAN {sql}", values)]
    assert any(f"INDEX {index}" in step for step in plan), plan
    assert not [step for step in plan if re.fullmatch(r"SCAN (payment_link|link_attempt|virtual_account)", step)], plan
    if "query" not in wanted:
        assert not [step for step in plan if "TEMP B-TREE FOR ORDER BY" in step], plan


@pytest.mark.parametrize("table", ["payment_link", "wallet_transaction", "card_order", "virtual_account"])
async def test_the_overview_reads_links_and_the_rooms_they_use_from_their_indexes_alone(
    settings: Settings, app: FastAPI, client: httpx.AsyncClient, table: str
) -> None:
    # The link's attempts are left out of their own products' numbers by link_id, which each overview index
    # carries (migration 0026): still read from the index alone.
    url = make_url(settings.resolved_database_url)
    if not url.drivername.startswith("sqlite"):
        pytest.skip("SQLite's query plans")
    merchant = await make_merchant(app, callback_url=CALLBACK_URL)
    await open_link(client, merchant)
    async with app.state.database.unit_of_work(read_only=True) as session:
        recording = RecordingSession(session)
        # Every merchant's (an operator's overview): one merchant's reads its rows by the merchant's index.
        await payments_service.overview(recording, None, "today")  # type: ignore[arg-type]
    sql, values = next((sql, values) for sql, values in recording.sent if "UNION ALL" in sql)
    with sqlite3.connect(url.database or "") as connection:
        plan = [row[3] for row in connection.execute(f"EXPLAIN QUERY PLAN {sql}", values)]
    steps = [step for step in plan if re.search(rf"\b{table}\b", step)]
    assert steps, plan
    assert all(f"COVERING INDEX ix_{table}_overview" in step for step in steps), plan


async def paid_by_dana_after_a_va_and_a_declined_card(
    client: httpx.AsyncClient, merchant: builders.TestMerchant, callback_url: str
) -> tuple[dict[str, Any], dict[str, str]]:
    """A link whose customer chose the BCA VA, was declined by card, then paid by DANA; the attempts' ids."""
    link = await create(client, merchant, callback_url, channels=CHANNELS, amount=90_000)
    va_page = await choose(client, link, "VA")
    va_id = (await page_forms(client, va_page))["pay-form"].fields["va"]
    order_page = await choose(client, link, "CARD")
    assert (await pay_card(client, order_page, DECLINED)).status_code == 200
    checkout = await choose(client, link, "DANA", wallet_id="081298765432")
    assert (await post_form(client, (await page_forms(client, checkout))["pay-form"])).status_code == 303
    attempts = {"va": va_id, "card": order_page.rsplit("/", 1)[1], "wallet": checkout.rsplit("/", 1)[1]}
    return link, attempts


async def test_a_paid_links_attempts_are_the_links_in_the_list_the_search_and_the_numbers(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    merchant = await make_merchant(app, callback_url=CALLBACK_URL)
    link, attempts = await paid_by_dana_after_a_va_and_a_declined_card(client, merchant, receiver.url("/paid"))
    await receiver.wait_for(2, path="/paid")  # FAILED (the card), SUCCESS (DANA)
    listed = (await client.get(f"/admin/payments?merchant_id={merchant.id}", headers=ADMIN)).json()["payments"]
    # One payment: the link. Its VA, card order and wallet transaction are its attempts, not payments of their own.
    [view] = listed
    assert (view["id"], view["product"], view["status"], view["outcome"]) == (
        link["transaction_id"],
        "link",
        "SUCCESS",
        "paid",
    )
    assert (view["channel"], view["payment_method"], view["amount"]) == ("DANA", "WALLET", "90000")
    assert view["paid_at"]
    for product in ("wallet", "card", "va"):
        only = f"/admin/payments?merchant_id={merchant.id}&product={product}"
        assert ids(await client.get(only, headers=ADMIN)) == [], product
        assert (await client.get(f"/admin/payments/{attempts[product]}", headers=ADMIN)).status_code == 404
    by_dana = f"/admin/payments?merchant_id={merchant.id}&channel=DANA"
    assert ids(await client.get(by_dana, headers=ADMIN)) == [link["transaction_id"]]
    # Whatever id the customer quotes (the VA's number, the wallet transaction's, the card order's): the link.
    async with app.state.database.unit_of_work(read_only=True) as session:
        va_number = (await va_service.get(session, attempts["va"])).va_number
    for quoted in (*attempts.values(), va_number, " ".join([va_number[:5], va_number[5:]])):
        assert ids(await client.get("/admin/payments", params={"q": quoted}, headers=ADMIN)) == [
            link["transaction_id"]
        ], quoted
    found_cli = await kasir_beside_app("payments", "find", attempts["wallet"], "--json")
    assert [p["id"] for p in json.loads(found_cli.output)["payments"]] == [link["transaction_id"]]

    async with app.state.database.unit_of_work(read_only=True) as session:
        overview = await payments_service.overview(session, merchant.id, "today")
    assert [(t.product, t.outcome, t.count) for t in overview.totals] == [("link", "paid", 1)]
    assert overview.net_volume() == overview.net_volume("link") == 90_000  # counted once, as the link
    assert overview.success_rate("link") == 1.0

    async with closing(await signed_in(app)) as browser:
        exported = await browser.get(f"/console/payments.csv?merchant={merchant.id}")
    header, *lines = list(csv.reader(io.StringIO(exported.text)))
    [row] = [dict(zip(header, line, strict=True)) for line in lines]
    assert (row["id"], row["channel"], row["outcome"], row["net_amount"], row["payment_method"]) == (
        link["transaction_id"],
        "DANA",
        "paid",
        "90000",
        "WALLET",
    )


async def test_the_detail_page_shows_each_attempt_by_method_and_the_links_callbacks_to_replay(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    merchant = await make_merchant(app, callback_url=CALLBACK_URL)
    link, attempts = await paid_by_dana_after_a_va_and_a_declined_card(client, merchant, receiver.url("/seen"))
    failed, success = await receiver.wait_for(2, path="/seen")
    async with closing(await signed_in(app)) as browser:
        page = await browser.get(f"/console/payments/{link['transaction_id']}")
        assert page.status_code == 200, page.text
        html = page.text
        table = html[html.index('id="link-attempts"') : html.index("</table>", html.index('id="link-attempts"'))]
        rows = table.split("<tr>")[2:]
        assert len(rows) == 3
        # In the order chosen: the VA and the card (its order declined once, then open until DANA paid), closed
        # silently when DANA paid; DANA.
        chosen = [
            ("VA", attempts["va"], "CLOSED", ""),
            ("CARD", attempts["card"], "CLOSED", "Card declined by the issuer"),
            ("DANA", attempts["wallet"], "PAID", ""),
        ]
        for row, (channel, inner, outcome, reason) in zip(rows, chosen, strict=True):
            assert f'<td data-label="Method">{channel}' in row, row
            assert inner in row
            assert f">{outcome}</span>" in row, row
            assert reason in row
        fields = html[html.index('id="payment-fields"') :]
        assert "Paid by" in fields
        assert "WALLET · DANA<" in fields  # each word once: not WALLET · DANA · DANA
        assert "4 methods offered" in html[html.index("Created") :]  # the timeline's first entry
        assert "1 of 3" in fields  # the declined card
        assert "The customer's page (it takes no more payments):" in html
        # Its callbacks, each with its replay form; a replay goes out as the same event.
        replay_forms = re.findall(r'action="(/console/callbacks/\d+/replay)"', html)
        assert len(replay_forms) == 2, replay_forms
        replayed = await browser.post(replay_forms[-1], data={"csrf_token": csrf_of(html), "target": "original"})
        assert replayed.status_code in (200, 303), replayed.text
    again = (await receiver.wait_for(3, path="/seen"))[2]
    assert again.headers["x-kasir-callback-id"] == success.headers["x-kasir-callback-id"]
    assert again.json()["transaction_status"] == "SUCCESS"


async def test_metrics_count_the_link_and_its_attempts_each_by_its_product(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    merchant = await make_merchant(app, callback_url=CALLBACK_URL)
    before = await scrape(client)
    await paid_by_dana_after_a_va_and_a_declined_card(client, merchant, receiver.url("/counted"))
    await receiver.wait_for(2, path="/counted")
    after = await scrape(client)

    def moved(name: str, product: str, status: str) -> float:
        return value(after, name, product=product, status=status) - value(before, name, product=product, status=status)

    # The link, the merchant's order: created PENDING, settled SUCCESS once.
    assert moved("kasir_payments_created_total", "link", "PENDING") == 1
    assert moved("kasir_payments_settled_total", "link", "SUCCESS") == 1
    # Its attempts, as their products' processing (docs/operator/observability.md): the DANA transaction paid.
    assert moved("kasir_payments_created_total", "wallet", "PENDING") == 1
    assert moved("kasir_payments_settled_total", "wallet", "PAID") == 1
    assert moved("kasir_payments_created_total", "card", "PENDING") == 1
    assert moved("kasir_payments_created_total", "va", "PENDING") == 1
