"""What the console, the admin API and the CLI do: refund, replay, simulate, export, rotation with grace, disable."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Sequence
from typing import Any

import httpx
from fastapi import FastAPI
from sqlalchemy import select

from kasir.audit.models import AuditEvent
from kasir.callbacks.models import Callback
from kasir.db import fetch
from kasir.kit.clock import clock
from tests.callbacks.helpers import give_up
from tests.console.helpers import closing, page_csrf, paid_wallet_payment, signed_in
from tests.support import builders
from tests.support.builders import make_merchant
from tests.support.cli import kasir_beside_app
from tests.support.wire import basic_auth
from tests.support.wire.wallet import INQUIRY, create, ref, wallet_headers

CALLBACK_URL = "http://127.0.0.1:9/cb"
ADMIN = {"Authorization": "Bearer test-admin-token"}


async def callbacks_of(app: FastAPI, transaction_id: str) -> Sequence[Any]:
    """(id, event, url, payload, replay_of) of the payment's callbacks, oldest first."""
    async with app.state.database.unit_of_work(read_only=True) as session:
        return await fetch(
            session,
            select(Callback.id, Callback.event, Callback.url, Callback.payload, Callback.replay_of)
            .where(Callback.transaction_ref == transaction_id)
            .order_by(Callback.id),
        )


async def audit_actions(app: FastAPI, target: str) -> list[str]:
    async with app.state.database.unit_of_work(read_only=True) as session:
        rows = await fetch(session, select(AuditEvent.action).where(AuditEvent.target_id == target))
    return [row.action for row in rows]


async def test_refund_void_and_simulate_from_the_console(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app, callback_url=CALLBACK_URL)
    tx = await paid_wallet_payment(client, merchant, CALLBACK_URL)
    pending = await create(client, merchant, CALLBACK_URL, channel="OVO")
    async with closing(await signed_in(app)) as browser:
        csrf = await page_csrf(browser)
        form = await browser.get(f"/console/payments/{tx['transaction_id']}")
        assert 'id="refund-amount"' in form.text
        assert re.search(r'<input id="refund-amount"[^>]*\svalue=', form.text) is None  # asks, never pre-filled
        assert "Left to refund: <strong>Rp 100.000</strong>" in form.text
        # The first post is the review: the amount, the payment and what remains after; nothing moves.
        review = await browser.post(
            f"/console/payments/{tx['transaction_id']}/refund",
            data={"amount": "30000", "reason": "one cup returned", "csrf_token": csrf},
        )
        assert review.status_code == 200
        assert 'id="review-amount">Rp 30.000<' in review.text
        assert 'id="review-remaining">Rp 70.000<' in review.text
        assert tx["transaction_id"] in review.text
        assert [c.event for c in await callbacks_of(app, tx["transaction_id"])] == ["PAID"]
        assert "payment.refund" not in await audit_actions(app, tx["transaction_id"])
        still = await client.post(INQUIRY, content=json.dumps(ref(tx)), headers=wallet_headers(merchant, ref(tx)))
        assert still.json()["transaction_status"] == "PAID"
        refunded = await browser.post(
            f"/console/payments/{tx['transaction_id']}/refund",
            data={"amount": "30000", "reason": "one cup returned", "confirmed": "yes", "csrf_token": csrf},
        )
        assert refunded.status_code == 303
        page = await browser.get(refunded.headers["location"])
        assert "Refund recorded" in page.text
        assert "REFUNDED" in page.text
        assert 'id="refunded-total">Rp 30.000<' in page.text
        assert "one cup returned" in page.text
        assert "Left to refund: <strong>Rp 70.000</strong>" in page.text
        too_much = await browser.post(
            f"/console/payments/{tx['transaction_id']}/refund", data={"amount": "999999", "csrf_token": csrf}
        )
        assert too_much.status_code == 409
        assert "refundable" in too_much.text
        confirmed_too_much = await browser.post(
            f"/console/payments/{tx['transaction_id']}/refund",
            data={"amount": "999999", "confirmed": "yes", "csrf_token": csrf},
        )
        assert confirmed_too_much.status_code == 409
        simulated = await browser.post(
            f"/console/payments/{pending['transaction_id']}/simulate", data={"outcome": "fail", "csrf_token": csrf}
        )
        assert simulated.status_code == 303
    events = [c.event for c in await callbacks_of(app, tx["transaction_id"])]
    assert events == ["PAID", "REFUNDED"]
    assert [c.event for c in await callbacks_of(app, pending["transaction_id"])] == ["failed"]
    inquiry = await client.post(INQUIRY, content=json.dumps(ref(tx)), headers=wallet_headers(merchant, ref(tx)))
    assert inquiry.json()["transaction_status"] == "REFUNDED"
    assert "payment.refund" in await audit_actions(app, tx["transaction_id"])


async def test_void_confirms_first(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app, callback_url=CALLBACK_URL)
    tx = await paid_wallet_payment(client, merchant, CALLBACK_URL)
    async with closing(await signed_in(app)) as browser:
        csrf = await page_csrf(browser)
        review = await browser.post(f"/console/payments/{tx['transaction_id']}/void", data={"csrf_token": csrf})
        assert review.status_code == 200
        assert 'id="confirm-void"' in review.text
        assert [c.event for c in await callbacks_of(app, tx["transaction_id"])] == ["PAID"]
        assert "payment.void" not in await audit_actions(app, tx["transaction_id"])
        voided = await browser.post(
            f"/console/payments/{tx['transaction_id']}/void", data={"confirmed": "yes", "csrf_token": csrf}
        )
        assert voided.status_code == 303
    assert [c.event for c in await callbacks_of(app, tx["transaction_id"])] == ["PAID", "VOID"]
    inquiry = await client.post(INQUIRY, content=json.dumps(ref(tx)), headers=wallet_headers(merchant, ref(tx)))
    assert inquiry.json()["transaction_status"] == "VOID"
    assert "payment.void" in await audit_actions(app, tx["transaction_id"])


async def test_replay_to_the_original_or_the_current_url(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app, callback_url=CALLBACK_URL)
    tx = await paid_wallet_payment(client, merchant, "http://127.0.0.1:9/first")
    (paid,) = await callbacks_of(app, tx["transaction_id"])
    async with closing(await signed_in(app)) as browser:
        csrf = await page_csrf(browser)
        # No worker runs here: the callback is still pending, and a replay of it is refused until it settles.
        refused = await browser.post(
            f"/console/callbacks/{paid.id}/replay", data={"target": "original", "csrf_token": csrf}
        )
        assert refused.status_code == 409
        assert "still being delivered" in refused.text
        await give_up(app.state.database, paid.id)
        for target in ("original", "current"):
            response = await browser.post(
                f"/console/callbacks/{paid.id}/replay", data={"target": target, "csrf_token": csrf}
            )
            assert response.status_code == 303
            [replay] = [c for c in await callbacks_of(app, tx["transaction_id"]) if c.id > paid.id][-1:]
            await give_up(app.state.database, replay.id)  # settled, as a worker would leave it
    replays = [c for c in await callbacks_of(app, tx["transaction_id"]) if c.replay_of == paid.id]
    assert [c.url for c in replays] == ["http://127.0.0.1:9/first", CALLBACK_URL]
    assert all(c.payload == paid.payload for c in replays)
    assert (await audit_actions(app, str(paid.id))).count("callback.replay") == 2


async def test_csv_export_has_every_filtered_row(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app, callback_url=CALLBACK_URL)
    made = [await paid_wallet_payment(client, merchant, CALLBACK_URL) for _ in range(3)]
    async with closing(await signed_in(app)) as browser:
        response = await browser.get(f"/console/payments.csv?merchant={merchant.id}&status=paid")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.text)))
    assert {row["id"] for row in rows} == {tx["transaction_id"] for tx in made}
    assert {row["amount"] for row in rows} == {"100000"}
    assert {row["outcome"] for row in rows} == {"paid"}
    assert {(row["refunded_amount"], row["net_amount"]) for row in rows} == {("0", "100000")}


async def test_csv_export_adds_refunded_and_net_at_the_end(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app, callback_url=CALLBACK_URL)
    refunded = await paid_wallet_payment(client, merchant, CALLBACK_URL)
    pending = await create(client, merchant, CALLBACK_URL, channel="OVO")
    async with closing(await signed_in(app)) as browser:
        csrf = await page_csrf(browser)
        done = await browser.post(
            f"/console/payments/{refunded['transaction_id']}/refund",
            data={"amount": "25000", "confirmed": "yes", "csrf_token": csrf},
        )
        assert done.status_code == 303
        response = await browser.get(f"/console/payments.csv?merchant={merchant.id}")
    header, *lines = list(csv.reader(io.StringIO(response.text)))
    # The columns before stay where they were; the two new ones come last.
    assert header == [
        "product",
        "id",
        "merchant_id",
        "external_id",
        "order_id",
        "channel",
        "status",
        "outcome",
        "amount",
        "created_at",
        "paid_at",
        "refunded_amount",
        "net_amount",
        "va_number",  # VAs' (issue 44), after these: tests/console/test_va.py
        "payment_method",  # payment links' (issue 45): tests/console/test_links.py
    ]
    by_id = {line[1]: dict(zip(header, line, strict=True)) for line in lines}
    assert by_id[refunded["transaction_id"]]["status"] == "REFUNDED"
    assert (by_id[refunded["transaction_id"]]["refunded_amount"], by_id[refunded["transaction_id"]]["net_amount"]) == (
        "25000",
        "75000",
    )
    # Never paid: nothing refunded, nothing kept.
    assert (by_id[pending["transaction_id"]]["refunded_amount"], by_id[pending["transaction_id"]]["net_amount"]) == (
        "0",
        "0",
    )


async def test_admin_api_lists_searches_and_pages_payments(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app, callback_url=CALLBACK_URL)
    made = [await paid_wallet_payment(client, merchant, CALLBACK_URL) for _ in range(3)]
    first = await client.get(f"/admin/payments?merchant_id={merchant.id}&limit=2", headers=ADMIN)
    assert first.status_code == 200
    body = first.json()
    assert [p["id"] for p in body["payments"]] == [made[2]["transaction_id"], made[1]["transaction_id"]]
    second = await client.get(
        f"/admin/payments?merchant_id={merchant.id}&limit=2&cursor={body['next_cursor']}", headers=ADMIN
    )
    assert [p["id"] for p in second.json()["payments"]] == [made[0]["transaction_id"]]
    assert second.json()["next_cursor"] is None
    for key in ("transaction_id", "external_id", "order_id"):
        found = await client.get(f"/admin/payments?q={made[1][key]}", headers=ADMIN)
        assert made[1]["transaction_id"] in [p["id"] for p in found.json()["payments"]], key
    assert (await client.get("/admin/payments", headers={"Authorization": "Bearer wrong"})).status_code == 401
    assert (await client.get("/admin/payments?status=nonsense", headers=ADMIN)).status_code == 400


async def basic_ok(client: httpx.AsyncClient, merchant: builders.TestMerchant, secret: str) -> int:
    body = {"transaction_id": "none", "external_id": "none", "order_id": "none"}
    headers = wallet_headers(merchant, body)
    headers["Authorization"] = basic_auth(merchant.id, secret)
    response = await client.post(INQUIRY, content=json.dumps(body), headers=headers)
    return response.status_code  # 404: authenticated, no such transaction; 401: refused


async def test_rotating_the_basic_secret_with_a_grace_period_then_disabling(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    merchant = await make_merchant(app, callback_url=CALLBACK_URL)
    old = merchant.credentials.secret
    assert await basic_ok(client, merchant, old) == 404
    rotated = await client.post(
        f"/admin/merchants/{merchant.id}/rotate", json={"kind": "secret", "grace_seconds": 600}, headers=ADMIN
    )
    assert rotated.status_code == 200, rotated.text
    new = rotated.json()["new_value"]
    assert new != old
    assert rotated.json()["old_accepted_until"]
    assert await basic_ok(client, merchant, new) == 404
    assert await basic_ok(client, merchant, old) == 404  # still in its grace period
    clock.advance(601)
    assert await basic_ok(client, merchant, old) == 401
    assert await basic_ok(client, merchant, new) == 404
    disabled = await client.post(f"/admin/merchants/{merchant.id}/disable", headers=ADMIN)
    assert disabled.json()["disabled"] is True
    refused = await client.post(
        INQUIRY, content=b"{}", headers={**wallet_headers(merchant, {}), "Authorization": basic_auth(merchant.id, new)}
    )
    assert refused.status_code == 401
    assert refused.json()["response_code"] == "04"
    await client.post(f"/admin/merchants/{merchant.id}/enable", headers=ADMIN)
    assert await basic_ok(client, merchant, new) == 404
    assert await audit_actions(app, merchant.id) == [
        "merchant.rotate.secret",
        "merchant.disable",
        "merchant.enable",
    ]


async def test_callback_url_change_follows_the_ssrf_rules(app: FastAPI, client: httpx.AsyncClient, monkeypatch) -> None:
    from kasir.config import get_settings

    merchant = await make_merchant(app, callback_url=CALLBACK_URL)
    changed = await client.post(
        f"/admin/merchants/{merchant.id}/callback-url", json={"callback_url": "http://127.0.0.1:9/new"}, headers=ADMIN
    )
    assert changed.json()["callback_url"] == "http://127.0.0.1:9/new"
    monkeypatch.setattr(get_settings(), "env", "production")
    refused = await client.post(
        f"/admin/merchants/{merchant.id}/callback-url", json={"callback_url": "https://127.0.0.1/x"}, headers=ADMIN
    )
    assert refused.status_code == 400


async def test_users_through_the_admin_api_and_the_cli(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    created = await client.post(
        "/admin/users",
        json={"email": "Ops.Admin@Example.id", "role": "merchant", "merchant_id": merchant.id},
        headers=ADMIN,
    )
    assert created.status_code == 201, created.text
    user = created.json()
    assert user["email"] == "ops.admin@example.id"
    assert len(user["password"]) >= 12
    assert (
        await client.post("/admin/users", json={"email": "x@example.id", "role": "merchant"}, headers=ADMIN)
    ).status_code == 400
    reset = await client.post(f"/admin/users/{user['id']}/reset-password", json={}, headers=ADMIN)
    assert reset.json()["password"] != user["password"]
    assert (await client.post(f"/admin/users/{user['id']}/disable", headers=ADMIN)).json()["disabled"] is True
    listed = await client.get("/admin/users", headers=ADMIN)
    assert "ops.admin@example.id" in [u["email"] for u in listed.json()["users"]]

    result = await kasir_beside_app("user", "create", "--email", "cli.user@example.id", "--role", "operator")
    assert result.exit_code == 0, result.output
    assert "password (shown once):" in result.output
    listed_cli = await kasir_beside_app("user", "list", "--json")
    assert "cli.user@example.id" in [u["email"] for u in json.loads(listed_cli.output)]
    duplicate = await kasir_beside_app("user", "create", "--email", "cli.user@example.id", "--role", "operator")
    assert duplicate.exit_code == 2


async def test_payments_find_and_list_on_the_cli(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app, callback_url=CALLBACK_URL)
    tx = await paid_wallet_payment(client, merchant, CALLBACK_URL)
    found = await kasir_beside_app("payments", "find", tx["order_id"], "--json")
    assert found.exit_code == 0, found.output
    assert [p["id"] for p in json.loads(found.output)["payments"]] == [tx["transaction_id"]]
    listed = await kasir_beside_app("payments", "list", "--merchant", merchant.id, "--status", "paid", "--json")
    assert [p["id"] for p in json.loads(listed.output)["payments"]] == [tx["transaction_id"]]
    missing = await kasir_beside_app("payments", "find", "NO-SUCH-ID")
    assert missing.exit_code == 1
