"""Virtual accounts everywhere a payment shows (issue 44 item 5): the list, its filters and its search (by VA
number too) on the console, the admin API and `kasir payments find`; the detail page with the VA's fields, its
payments and its callbacks; a staging payment and a cancel from the console, audited; the CSV export; the
overview's numbers; and the indexes all of them read."""

from __future__ import annotations

import csv
import io
import json
import re
import sqlite3
from collections.abc import Sequence
from typing import Any

import httpx
import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from fastapi import FastAPI
from sqlalchemy import select
from sqlalchemy.engine import make_url

from kasir.audit.models import AuditEvent
from kasir.callbacks.models import Callback
from kasir.config import Settings, get_settings
from kasir.db import Session, fetch
from kasir.models import metadata
from kasir.payments.repository import payments_repository
from kasir.payments.service import parse_filter, payments_service
from tests.console.helpers import closing, page_csrf, paid_wallet_payment, signed_in
from tests.support import builders
from tests.support.builders import make_merchant
from tests.support.cli import kasir_beside_app
from tests.support.engine import engine_of
from tests.support.wire.va import cancel, create, inquire, pay

CALLBACK_URL = "http://127.0.0.1:9/cb"
ADMIN = {"Authorization": "Bearer test-admin-token"}


async def paid_va(
    client: httpx.AsyncClient, merchant: builders.TestMerchant, paying: int | None = None, **kw: Any
) -> dict[str, Any]:
    """A VA made with `kw` (tests.support.wire.va.create_body) and paid `paying` (None: a CLOSED VA's amount)."""
    va = await create(client, merchant, CALLBACK_URL, **kw)
    paid = await pay(client, merchant, va, paying)
    assert paid.status_code == 200, paid.text
    return va


async def some_vas(client: httpx.AsyncClient, merchant: builders.TestMerchant) -> dict[str, dict[str, Any]]:
    """One VA of each state, oldest first: CLOSED paid (BCA), PARTIAL part-paid (BRI), OPEN waiting (BCA-MCP),
    and a CLOSED one cancelled (MANDIRI)."""
    made = {
        "paid": await paid_va(client, merchant, channel="BCA"),
        "partial": await paid_va(client, merchant, 100_000, channel="BRI", system="PARTIAL", amount=300_000),
        "open": await create(client, merchant, CALLBACK_URL, channel="BCA-MCP", system="OPEN", amount=None),
        "cancelled": await create(client, merchant, CALLBACK_URL, channel="MANDIRI", amount=75_000),
    }
    assert (await cancel(client, merchant, made["cancelled"])).status_code == 200
    return made


def ids(answer: httpx.Response) -> list[str]:
    assert answer.status_code == 200, answer.text
    return [p["id"] for p in answer.json()["payments"]]


def number(va: dict[str, Any]) -> str:
    return str(va["payment_details"]["va_number"])


async def test_vas_are_listed_filtered_and_found_by_any_id_on_the_admin_api(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    merchant = await make_merchant(app, callback_url=CALLBACK_URL)
    wallet = await paid_wallet_payment(client, merchant, CALLBACK_URL)
    vas = await some_vas(client, merchant)
    of = f"/admin/payments?merchant_id={merchant.id}"
    newest_first = [vas[k]["transaction_id"] for k in ("cancelled", "open", "partial", "paid")]
    assert ids(await client.get(of, headers=ADMIN)) == [*newest_first, wallet["transaction_id"]]
    assert ids(await client.get(f"{of}&product=va", headers=ADMIN)) == newest_first
    assert ids(await client.get(f"{of}&product=va&status=paid", headers=ADMIN)) == [vas["paid"]["transaction_id"]]
    pending = await client.get(f"{of}&product=va&status=pending", headers=ADMIN)
    assert ids(pending) == [vas["open"]["transaction_id"], vas["partial"]["transaction_id"]]
    cancelled = await client.get(f"{of}&status=cancelled", headers=ADMIN)
    assert ids(cancelled) == [vas["cancelled"]["transaction_id"]]
    # A bank finds its aliases' VAs too (BCA-MCP is numbered as BCA); the alias finds its own only.
    bca = [vas["open"]["transaction_id"], vas["paid"]["transaction_id"]]
    assert ids(await client.get(f"{of}&channel=bca", headers=ADMIN)) == bca
    assert ids(await client.get(f"{of}&channel=BCA-MCP", headers=ADMIN)) == [vas["open"]["transaction_id"]]

    partial = vas["partial"]
    [view] = (await client.get(f"/admin/payments?q={partial['transaction_id']}", headers=ADMIN)).json()["payments"]
    assert view["product"] == "va"
    assert (view["channel"], view["status"], view["outcome"]) == ("BRI", "PARTIALLY_PAID", "pending")
    assert (view["amount"], view["paid_amount"], view["va_number"]) == ("300000", "100000", number(partial))
    assert view["paid_at"] is not None
    # Any id a merchant or a customer quotes; a number as a customer reads it out, spaces and all.
    spaced = " ".join(re.findall(".{1,4}", number(partial)))
    for quoted in (partial["external_id"], partial["order_id"], number(partial), spaced):
        found = await client.get("/admin/payments", params={"q": quoted}, headers=ADMIN)
        assert partial["transaction_id"] in ids(found), quoted
    assert ids(await client.get("/admin/payments", params={"q": number(partial)[:-1]}, headers=ADMIN)) == []
    assert (await client.get(f"{of}&product=nonsense", headers=ADMIN)).status_code == 400
    one = (await client.get(f"/admin/payments/{vas['cancelled']['transaction_id']}", headers=ADMIN)).json()
    assert (one["status"], one["outcome"], one["paid_amount"], one["paid_at"]) == ("CANCELLED", "cancelled", "0", None)
    other = (await client.get(f"/admin/payments/{wallet['transaction_id']}", headers=ADMIN)).json()
    assert (other["va_number"], other["paid_amount"]) == (None, None)  # added fields: null for other products


async def test_the_console_lists_and_finds_vas_and_kasir_payments_find_does_too(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    merchant = await make_merchant(app, callback_url=CALLBACK_URL)
    va = await paid_va(client, merchant, channel="BNI", amount=120_000)
    open_va = await paid_va(client, merchant, 30_000, channel="CIMB", system="OPEN", amount=None)
    async with closing(await signed_in(app, role="merchant", merchant_id=merchant.id)) as browser:
        listed = await browser.get("/console/payments?product=va")
        assert listed.status_code == 200, listed.text
        assert '<option value="va" selected>va</option>' in listed.text
        assert '<option value="cancelled"' in listed.text
        rows = {
            found: row for row in listed.text.split("<tr>") for found in re.findall(r"/console/payments/(VA\w+)", row)
        }
        assert f'BNI <span class="mono muted va-number">{number(va)}</span>' in rows[va["transaction_id"]]
        [amount] = re.findall(r'<td data-label="Amount"[^>]*>(.*?)</td>', rows[va["transaction_id"]], re.S)
        assert amount == "<span>Rp 120.000</span>"  # paid what it asks: said once
        # An OPEN VA asks no amount: what came in shows instead of a misleading Rp 0.
        [amount] = re.findall(r'<td data-label="Amount"[^>]*>(.*?)</td>', rows[open_va["transaction_id"]], re.S)
        assert amount == '<span>any amount<br><span class="muted va-paid">paid Rp 30.000</span></span>'
        # Searching a VA number that names one payment opens it.
        found = await browser.get(f"/console/payments?q={number(va)}")
        assert (found.status_code, found.headers["location"]) == (303, f"/console/payments/{va['transaction_id']}")
    found_cli = await kasir_beside_app("payments", "find", number(va), "--json")
    assert found_cli.exit_code == 0, found_cli.output
    [shown] = json.loads(found_cli.output)["payments"]
    assert (shown["id"], shown["product"], shown["va_number"]) == (va["transaction_id"], "va", number(va))
    table = await kasir_beside_app("payments", "find", va["order_id"])
    assert va["transaction_id"] in table.output
    listed_cli = await kasir_beside_app("payments", "list", "--merchant", merchant.id, "--product", "va", "--json")
    assert [p["id"] for p in json.loads(listed_cli.output)["payments"]] == [
        open_va["transaction_id"],
        va["transaction_id"],
    ]


async def test_the_detail_page_shows_the_va_its_payments_and_its_callbacks(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    merchant = await make_merchant(app, callback_url=CALLBACK_URL)
    wallet = await paid_wallet_payment(client, merchant, CALLBACK_URL)
    va = await create(client, merchant, CALLBACK_URL, channel="BCA-MCP", system="PARTIAL", amount=300_000)
    first = await pay(client, merchant, va, 100_000)
    second = await pay(client, merchant, va, 50_000)
    references = [first.json()["data"]["reference_id"], second.json()["data"]["reference_id"]]
    async with closing(await signed_in(app)) as browser:
        page = await browser.get(f"/console/payments/{va['transaction_id']}")
        queue = await browser.get(f"/console/callbacks?state=pending&merchant={merchant.id}&product=va")
        wallet_queue = await browser.get(f"/console/callbacks?state=pending&merchant={merchant.id}&product=wallet")
    assert page.status_code == 200, page.text
    # The callbacks queue filters VA callbacks as the others'.
    assert queue.text.count(f'<a href="/console/payments/{va["transaction_id"]}">') == 2
    assert '<option value="va" selected>va</option>' in queue.text
    assert va["transaction_id"] not in wallet_queue.text
    assert wallet["transaction_id"] in wallet_queue.text
    assert wallet["transaction_id"] not in queue.text
    assert re.search(r'id="payment-status">PARTIALLY_PAID</span>', page.text)
    fields = dict(
        re.findall(
            r"<dt>([^<]+)</dt><dd>([^<]*)</dd>", re.search(r'id="payment-fields">(.*?)</dl>', page.text, re.S)[1]
        )
    )
    assert fields["VA number"] == number(va)
    assert (fields["Channel"], fields["Bank"]) == ("BCA-MCP", "Bank Central Asia (BCA)")
    assert (fields["Payment system"], fields["Multi-use"]) == ("PARTIAL", "yes")
    assert (fields["Amount"], fields["Paid total"], fields["Remaining"]) == ("Rp 300.000", "Rp 150.000", "Rp 150.000")
    assert fields["Expires"].endswith("+07:00")
    assert fields["Billing name"] == "Toko Kasir"
    assert "Last payment" in fields
    [table] = re.findall(r'<table class="list compact" id="va-payments">.*?</table>', page.text, flags=re.S)
    rows = re.findall(
        r"<tr><td data-label=\"#\">(\d)</td>.*?<span class=\"mono\">(\w+)</span>.*?>(Rp [\d.]+)</td>", table
    )
    assert rows == [("1", references[0], "Rp 100.000"), ("2", references[1], "Rp 50.000")]
    # Its callbacks, as every product's detail shows them: one per payment, each with the request to be sent.
    callbacks = re.findall(r'<article class="callback" id="callback-(\d+)">\s*<header>\s*<h3>#\d+ (\w+)', page.text)
    assert [event for _id, event in callbacks] == ["PARTIALLY_PAID", "PARTIALLY_PAID"]
    assert f'"va_number":"{number(va)}"' in page.text.replace("&#34;", '"')
    assert page.text.count("Callback PARTIALLY_PAID recorded") == 2  # the timeline
    assert 'id="cancel-va"' in page.text
    assert 'id="va-pay-amount" name="amount" type="number" min="10000" max="150000"' in page.text


async def audit_of(app: FastAPI, target: str) -> list[tuple[str, Any, Any]]:
    async with app.state.database.unit_of_work(read_only=True) as session:
        rows = await fetch(
            session,
            select(AuditEvent.action, AuditEvent.before, AuditEvent.after)
            .where(AuditEvent.target_id == target)
            .order_by(AuditEvent.id),
        )
    return [(row.action, row.before, row.after) for row in rows]


async def events_of(app: FastAPI, va_id: str) -> list[str]:
    async with app.state.database.unit_of_work(read_only=True) as session:
        rows = await fetch(
            session, select(Callback.event).where(Callback.transaction_ref == va_id).order_by(Callback.id)
        )
    return [row.event for row in rows]


async def test_staging_pays_a_va_from_the_console_as_the_dummy_payment_does_audited(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    merchant = await make_merchant(app, callback_url=CALLBACK_URL)
    partial = await create(client, merchant, CALLBACK_URL, system="PARTIAL", amount=300_000)
    closed = await create(client, merchant, CALLBACK_URL, amount=50_000)
    open_va = await create(client, merchant, CALLBACK_URL, system="OPEN", amount=None)
    async with closing(await signed_in(app, role="merchant", merchant_id=merchant.id)) as browser:
        csrf = await page_csrf(browser)
        page = await browser.get(f"/console/payments/{closed['transaction_id']}")
        assert 'id="va-pay-amount"' not in page.text  # CLOSED pays its amount, nothing to ask
        assert "Simulate a payment of Rp 50.000" in page.text

        def simulate(va: dict[str, Any], **form: str) -> Any:
            return browser.post(
                f"/console/payments/{va['transaction_id']}/simulate",
                data={"outcome": "pay", "csrf_token": csrf, **form},
            )

        done = await simulate(partial, amount="100000")
        assert (done.status_code, done.headers["location"]) == (
            303,
            f"/console/payments/{partial['transaction_id']}?done=simulated",
        )
        too_much = await simulate(partial, amount="250000")  # more than the remainder (§9.3): 03, nothing moves
        assert too_much.status_code == 409, too_much.text
        assert (await simulate(open_va)).status_code == 400  # OPEN: the amount is the payer's, asked for
        assert (await simulate(open_va, amount="12.5")).status_code == 400
        assert (await simulate(open_va, amount="25000")).status_code == 303
        assert (await simulate(closed)).status_code == 303
        assert (await simulate(closed)).status_code == 409  # a closed PAID VA takes nothing
        page = await browser.get(f"/console/payments/{closed['transaction_id']}")
        assert 'id="simulate-pay"' not in page.text
        assert 'id="cancel-va"' not in page.text
        assert "No action applies to this payment in its state." in page.text
    seen = await inquire(client, merchant, partial)
    assert (seen["transaction_status"], seen["payment_details"]["total_paid_amount"]) == ("PARTIALLY_PAID", 100_000)
    assert (await inquire(client, merchant, open_va))["payment_details"]["total_paid_amount"] == 25_000
    assert (await inquire(client, merchant, closed))["transaction_status"] == "PAID"
    assert await events_of(app, partial["transaction_id"]) == ["PARTIALLY_PAID"]
    assert await events_of(app, closed["transaction_id"]) == ["PAID"]
    [(action, before, after)] = await audit_of(app, partial["transaction_id"])
    assert action == "payment.simulate.pay"
    assert json.loads(before) == {"status": "PENDING", "total_paid_amount": 0}
    assert json.loads(after) == {"status": "PARTIALLY_PAID", "total_paid_amount": 100_000, "amount": 100_000}


async def test_cancel_from_the_console_asks_first_then_cancels_once_audited(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    merchant = await make_merchant(app, callback_url=CALLBACK_URL)
    va = await paid_va(client, merchant, 20_000, system="OPEN", amount=None)  # multi-use: PAID and still open
    stranger = await make_merchant(app, callback_url=CALLBACK_URL)
    async with closing(await signed_in(app, role="merchant", merchant_id=stranger.id)) as theirs:
        csrf = await page_csrf(theirs)
        for path, form in (("cancel", {}), ("cancel", {"confirmed": "yes"}), ("simulate", {"outcome": "pay"})):
            refused = await theirs.post(
                f"/console/payments/{va['transaction_id']}/{path}", data={**form, "csrf_token": csrf}
            )
            assert refused.status_code == 404, (path, form)  # as if it did not exist
    async with closing(await signed_in(app, role="merchant", merchant_id=merchant.id)) as browser:
        page = await browser.get(f"/console/payments/{va['transaction_id']}")
        assert 'id="cancel-va"' in page.text
        csrf = await page_csrf(browser)
        without_token = await browser.post(f"/console/payments/{va['transaction_id']}/cancel", data={})
        assert without_token.status_code == 403
        review = await browser.post(f"/console/payments/{va['transaction_id']}/cancel", data={"csrf_token": csrf})
        assert review.status_code == 200
        assert 'id="confirm-cancel"' in review.text
        assert number(va) in review.text
        assert "<dt>Paid so far</dt><dd><strong>Rp 20.000</strong></dd>" in review.text  # OPEN: of no amount
        assert await events_of(app, va["transaction_id"]) == ["PAID"]  # the review moves nothing
        done = await browser.post(
            f"/console/payments/{va['transaction_id']}/cancel", data={"confirmed": "yes", "csrf_token": csrf}
        )
        assert done.status_code == 303
        page = await browser.get(done.headers["location"])
        assert "Virtual account cancelled" in page.text
        assert re.search(r'id="payment-status">CANCELLED</span>', page.text)
        again = await browser.post(
            f"/console/payments/{va['transaction_id']}/cancel", data={"confirmed": "yes", "csrf_token": csrf}
        )
        assert again.status_code == 409
        review_again = await browser.post(f"/console/payments/{va['transaction_id']}/cancel", data={"csrf_token": csrf})
        assert review_again.status_code == 409
    assert (await inquire(client, merchant, va))["transaction_status"] == "CANCELLED"
    assert await events_of(app, va["transaction_id"]) == ["PAID", "CANCELLED"]
    cancels = [(json.loads(b), json.loads(a)) for action, b, a in await audit_of(app, va["transaction_id"])]
    assert cancels == [({"status": "PAID"}, {"status": "CANCELLED"})]


async def test_production_has_no_simulated_va_payment_but_cancels(
    app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    merchant = await make_merchant(app, callback_url=CALLBACK_URL)
    va = await create(client, merchant, CALLBACK_URL, amount=50_000)
    async with closing(await signed_in(app)) as browser:
        csrf = await page_csrf(browser)
        monkeypatch.setattr(get_settings(), "env", "production")
        page = await browser.get(f"/console/payments/{va['transaction_id']}")
        assert 'id="va-pay-form"' not in page.text
        assert 'id="cancel-va"' in page.text
        simulated = await browser.post(
            f"/console/payments/{va['transaction_id']}/simulate", data={"outcome": "pay", "csrf_token": csrf}
        )
        assert simulated.status_code == 404
    assert await events_of(app, va["transaction_id"]) == []


async def test_the_csv_export_has_vas_with_their_number_and_what_came_in(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    merchant = await make_merchant(app, callback_url=CALLBACK_URL)
    wallet = await paid_wallet_payment(client, merchant, CALLBACK_URL)
    vas = await some_vas(client, merchant)
    async with closing(await signed_in(app)) as browser:
        response = await browser.get(f"/console/payments.csv?merchant={merchant.id}")
        only_vas = await browser.get(f"/console/payments.csv?merchant={merchant.id}&product=va&status=pending")
    header, *lines = list(csv.reader(io.StringIO(response.text)))
    # Added at the end: every column before stays where it was.
    assert header[:13] == [
        "product", "id", "merchant_id", "external_id", "order_id", "channel", "status", "outcome", "amount",
        "created_at", "paid_at", "refunded_amount", "net_amount",
    ]  # fmt: skip
    assert header[13:] == ["va_number", "payment_method"]  # a payment link's, after it (issue 45)
    rows = {line[1]: dict(zip(header, line, strict=True)) for line in lines}
    assert rows[wallet["transaction_id"]]["va_number"] == ""
    partial = rows[vas["partial"]["transaction_id"]]
    assert (partial["product"], partial["channel"], partial["status"], partial["outcome"]) == (
        "va",
        "BRI",
        "PARTIALLY_PAID",
        "pending",
    )
    assert (partial["amount"], partial["net_amount"], partial["refunded_amount"]) == ("300000", "100000", "0")
    assert (partial["va_number"], partial["external_id"]) == (number(vas["partial"]), vas["partial"]["external_id"])
    assert partial["paid_at"].endswith("+07:00")
    paid = rows[vas["paid"]["transaction_id"]]
    assert (paid["outcome"], paid["amount"], paid["net_amount"]) == ("paid", "50000", "50000")
    cancelled = rows[vas["cancelled"]["transaction_id"]]
    assert (cancelled["outcome"], cancelled["net_amount"], cancelled["paid_at"]) == ("cancelled", "0", "")
    [_, *pending] = list(csv.reader(io.StringIO(only_vas.text)))
    assert {line[1] for line in pending} == {vas["partial"]["transaction_id"], vas["open"]["transaction_id"]}


async def test_the_overview_counts_vas_and_what_came_into_them(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app, callback_url=CALLBACK_URL)
    await paid_wallet_payment(client, merchant, CALLBACK_URL)  # Rp 100.000
    vas = await some_vas(client, merchant)  # Rp 50.000 into the CLOSED one, Rp 100.000 into the PARTIAL one
    # Money paid into a VA that is cancelled afterwards stays paid (§9.5).
    assert (await pay(client, merchant, vas["open"], 30_000)).status_code == 200
    assert (await cancel(client, merchant, vas["open"])).status_code == 200
    async with app.state.database.unit_of_work(read_only=True) as session:
        overview = await payments_service.overview(session, merchant.id, "today")
    assert overview.count("va") == 4
    assert (overview.count("va", "paid"), overview.count("va", "pending"), overview.count("va", "cancelled")) == (
        1,
        1,
        2,
    )
    assert overview.net_volume("va") == 180_000
    assert overview.net_volume() == 280_000
    assert overview.success_rate("va") == pytest.approx(1 / 3)  # paid of paid, expired, failed and cancelled
    assert overview.trend[-1].count == 5
    assert overview.trend[-1].net == 280_000
    async with closing(await signed_in(app, role="merchant", merchant_id=merchant.id)) as browser:
        page = await browser.get("/console/overview")
    assert 'id="stat-count">5<' in page.text
    assert 'id="stat-volume">Rp 280.000<' in page.text
    [volume] = re.findall(r'<figure class="chart" id="chart-volume">.*?</figure>', page.text, flags=re.S)
    assert re.search(r'class="label">VA</text>.*?class="value">Rp 180.000</text>', volume, flags=re.S)
    [status] = re.findall(r'<figure class="chart" id="chart-status">.*?</figure>', page.text, flags=re.S)
    assert "cancelled" in status  # in the legend, in a colour of its own


# --- the indexes ----------------------------------------------------------------------------------------------


async def test_the_va_indexes_of_the_models_are_the_migrations(app: FastAPI) -> None:
    async with engine_of(app.state.database) as engine, engine.connect() as connection:
        diffs = await connection.run_sync(
            lambda sync: compare_metadata(MigrationContext.configure(sync, opts={"compare_type": False}), metadata)
        )
    assert [d for d in diffs if "virtual_account" in repr(d) or "va_payment" in repr(d)] == []


class RecordingSession:
    """A unit's session whose statements are recorded as they are sent (tests/card/test_query_plans.py)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.sent: list[tuple[str, Sequence[Any]]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.session, name)

    async def fetch_rows(self, sql: str, values: Sequence[Any], *, first: bool = False) -> Sequence[Sequence[Any]]:
        self.sent.append((sql, values))
        return await self.session.fetch_rows(sql, values, first=first)


@pytest.mark.parametrize(
    ("wanted", "index"),
    [
        ({"query": "external"}, "ix_virtual_account_external"),
        ({"query": "order"}, "ix_virtual_account_order"),
        ({"query": "number"}, "ix_virtual_account_va_number"),
        ({"status": "paid"}, "ix_virtual_account_status_created"),
        ({}, "ix_virtual_account_created"),
    ],
)
async def test_the_va_list_and_search_walk_an_index(
    settings: Settings, app: FastAPI, client: httpx.AsyncClient, wanted: dict[str, str], index: str
) -> None:
    url = make_url(settings.resolved_database_url)
    if not url.drivername.startswith("sqlite"):
        pytest.skip("SQLite's query plans")
    merchant = await make_merchant(app, callback_url=CALLBACK_URL)
    va = await paid_va(client, merchant)
    quoted = {"external": va["external_id"], "order": va["order_id"], "number": number(va)}
    where = parse_filter(
        scope=None, product="va", status=wanted.get("status"), query=quoted.get(wanted.get("query", ""))
    )
    async with app.state.database.unit_of_work(read_only=True) as session:
        recording = RecordingSession(session)
        page = await payments_repository.page(recording, where, after=None, limit=50)  # type: ignore[arg-type]
    assert va["transaction_id"] in [row.id for row in page]
    [(sql, values)] = recording.sent
    with sqlite3.connect(url.database or "") as connection:
        plan = [row[3] for row in connection.execute(f"EXPLAIN QUERY PLAN {sql}", values)]
    # The VAs through `index`, never every row; their latest payment through the payments' own index; and a
    # page of the list in the index's order, without sorting all the rows that match.
    assert any(f"INDEX {index}" in step for step in plan), plan
    assert not [step for step in plan if re.fullmatch(r"SCAN (virtual_account|va_payment)", step)], plan
    if "query" not in wanted:
        assert not [step for step in plan if "TEMP B-TREE FOR ORDER BY" in step], plan


async def test_the_overview_reads_vas_from_its_index_alone(
    settings: Settings, app: FastAPI, client: httpx.AsyncClient
) -> None:
    url = make_url(settings.resolved_database_url)
    if not url.drivername.startswith("sqlite"):
        pytest.skip("SQLite's query plans")
    merchant = await make_merchant(app, callback_url=CALLBACK_URL)
    await paid_va(client, merchant)
    async with app.state.database.unit_of_work(read_only=True) as session:
        recording = RecordingSession(session)
        # Every merchant's (an operator's overview): one merchant's reads its rows by the merchant's index.
        await payments_service.overview(recording, None, "today")  # type: ignore[arg-type]
    [(sql, values)] = [(sql, values) for sql, values in recording.sent if "virtual_account" in sql]
    with sqlite3.connect(url.database or "") as connection:
        plan = [row[3] for row in connection.execute(f"EXPLAIN QUERY PLAN {sql}", values)]
    steps = [step for step in plan if "virtual_account" in step]
    assert steps, plan
    assert all("COVERING INDEX ix_virtual_account_overview" in step for step in steps), plan
