"""Rotation grace covers callbacks (docs/decisions.md §8): while a rotated hash_key or client_secret is in its
grace window and the merchant has not confirmed the switch, callbacks are signed with the previous value; after
the confirmation or the grace's end, with the new one, decided at each attempt.

Two merchants' verifiers are played against every callback that arrives, over real HTTP: one verifying with
the old value, one with the new. Each must verify exactly the callbacks it should. Signatures are computed
here from the formulas of docs/decisions.md §3.3, §3.5 and §3.6."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from fastapi import FastAPI
from sqlalchemy import select

from kasir.audit.models import AuditEvent
from kasir.config import get_settings
from kasir.db import fetch
from kasir.kit.clock import clock
from tests.callbacks.helpers import db, settle
from tests.support import builders
from tests.support.builders import make_merchant
from tests.support.forms import submit
from tests.support.receiver import Answer, CallbackReceiver, ReceivedRequest
from tests.support.wire import x_req_signature
from tests.support.wire.callbacks import callback_signature, notify_signature
from tests.support.wire.dialect import DIRECT_V1, dialect_body, post_dialect
from tests.support.wire.snap import CHECKOUT, checkout_body, post_signed
from tests.support.wire.wallet import create, dummy_payment
from tests.support.worker import settled_callbacks

ADMIN = {"Authorization": "Bearer test-admin-token"}
GRACE = 600


def svc_verifies(request: ReceivedRequest, hash_key: str, external_id: str, order_id: str) -> bool:
    """A merchant's check of a wallet or payment-page callback with `hash_key` (§3.5; the wallet's query too)."""
    body = request.json()
    expected = callback_signature(body["transaction_id"], x_req_signature(hash_key, external_id, order_id))
    in_query = request.query.get("svc-signature", expected)  # the payment page's has no query parameter
    return request.headers["svc-signature"] == expected and in_query == expected


def notify_verifies(request: ReceivedRequest, client_secret: str, callback_url: str) -> bool:
    """A merchant's check of a BNPL notification with `client_secret` (§3.6)."""
    expected = notify_signature(client_secret, callback_url, request.body, request.headers["x-timestamp"])
    return request.headers["x-signature"] == expected


async def rotate(client: Any, merchant: builders.TestMerchant, kind: str) -> str:
    answer = await client.post(
        f"/admin/merchants/{merchant.id}/rotate", json={"kind": kind, "grace_seconds": GRACE}, headers=ADMIN
    )
    assert answer.status_code == 200, answer.text
    return str(answer.json()["new_value"])


async def confirm(client: Any, merchant: builders.TestMerchant, kind: str) -> None:
    answer = await client.post(f"/admin/merchants/{merchant.id}/confirm-rotation", json={"kind": kind}, headers=ADMIN)
    assert answer.status_code == 200, answer.text
    assert answer.json()["kind"] == kind


async def audited(app: FastAPI, merchant: builders.TestMerchant) -> list[str]:
    async with app.state.database.unit_of_work(read_only=True) as session:
        rows = await fetch(
            session, select(AuditEvent.action).where(AuditEvent.target_id == merchant.id).order_by(AuditEvent.id)
        )
    return [row.action for row in rows]


class Shop:
    """The merchant's side: pays wallet payments and card charges whose callbacks come to `receiver`, and
    tells which hash key verifies each callback that came."""

    def __init__(self, client: Any, merchant: builders.TestMerchant, receiver: CallbackReceiver) -> None:
        self.client, self.merchant, self.receiver = client, merchant, receiver
        self.orders: list[tuple[str, str, str]] = []  # (path, external_id, order_id), in the order paid

    async def wallet_paid(self) -> None:
        tx = await create(self.client, self.merchant, self.receiver.url("/wallet"))
        assert (await dummy_payment(self.client, self.merchant, tx)).status_code == 200
        self.orders.append(("/wallet", tx["external_id"], tx["order_id"]))

    async def card_paid(self) -> None:
        body = dialect_body(callback_url=self.receiver.url("/card"))
        answer = await post_dialect(self.client, self.merchant, DIRECT_V1, body)
        assert answer.json()["data"]["status"] == "SUCCESS", answer.text
        self.orders.append(("/card", body["external_id"], body["order_id"]))

    async def verified_with(self, old: str, new: str) -> list[str]:
        """For each callback received, in order: which value verifies it ("old" or "new"; never both)."""
        requests = await self.receiver.wait_for(len(self.orders))
        by_path: dict[str, list[ReceivedRequest]] = {}
        for request in requests:
            by_path.setdefault(request.path, []).append(request)
        seen: dict[str, int] = {}
        verdicts = []
        for path, external_id, order_id in self.orders:
            request = by_path[path][seen.setdefault(path, 0)]
            seen[path] += 1
            with_old = svc_verifies(request, old, external_id, order_id)
            with_new = svc_verifies(request, new, external_id, order_id)
            assert with_old != with_new, (path, with_old, with_new)
            verdicts.append("old" if with_old else "new")
        return verdicts


async def test_hash_key_signs_callbacks_until_the_merchant_confirms(app, client, receiver):
    merchant = await make_merchant(app)
    shop = Shop(client, merchant, receiver)
    old = merchant.credentials.hash_key
    await shop.wallet_paid()
    new = await rotate(client, merchant, "hash_key")
    await shop.wallet_paid()
    await shop.card_paid()
    assert await shop.verified_with(old, new) == ["old", "old", "old"]

    # A callback recorded before the confirmation, retried after it: each attempt is signed as it goes out.
    receiver.answer(Answer(status=500))
    await shop.wallet_paid()
    [refused] = (await receiver.wait_for(4))[3:]
    assert svc_verifies(refused, old, *shop.orders[-1][1:])
    await confirm(client, merchant, "hash_key")
    shop.orders.insert(3, shop.orders[-1])  # its retry arrives after the refused attempt
    retried = await db_callback_of(app, merchant.id)
    await settle(app, retried, "delivered")
    await shop.wallet_paid()
    await shop.card_paid()
    verdicts = await shop.verified_with(old, new)
    assert verdicts == ["old", "old", "old", "old", "new", "new", "new"]
    assert await audited(app, merchant) == ["merchant.rotate.hash_key", "merchant.confirm.hash_key"]

    # Requests signed with the old hash key are still accepted until the grace ends: confirming changes callbacks.
    await shop.wallet_paid()
    assert (await shop.verified_with(old, new))[-1] == "new"


async def db_callback_of(app: FastAPI, merchant_id: str) -> int:
    """The merchant's newest callback."""
    from kasir.callbacks.models import Callback

    async with db(app).unit_of_work(read_only=True) as session:
        [row] = await fetch(
            session,
            select(Callback.id).where(Callback.merchant_id == merchant_id).order_by(Callback.id.desc()).limit(1),
        )
    return int(row.id)


async def test_hash_key_signs_callbacks_until_the_grace_ends(app, client, receiver):
    merchant = await make_merchant(app)
    shop = Shop(client, merchant, receiver)
    old = merchant.credentials.hash_key
    new = await rotate(client, merchant, "hash_key")
    await shop.wallet_paid()
    await shop.card_paid()
    assert await shop.verified_with(old, new) == ["old", "old"]
    # Recorded before the clock jumps: an attempt still unrecorded would outlive its lease by the jump and be
    # sent again, a copy the shop would take for the next payment's callback.
    await settled_callbacks(app, merchant.id)
    clock.advance(GRACE + 1)
    shop.merchant.credentials = replace(merchant.credentials, hash_key=new)  # the old one is refused now
    await shop.wallet_paid()
    await shop.card_paid()
    assert await shop.verified_with(old, new) == ["old", "old", "new", "new"]
    assert await audited(app, merchant) == ["merchant.rotate.hash_key"]


@pytest.mark.parametrize("switch", ["confirmed", "grace ended"])
async def test_client_secret_signs_bnpl_notifications_until_the_switch(app, client, receiver, switch):
    merchant = await make_merchant(app)
    old = merchant.credentials.client_secret
    url = receiver.url("/bnpl")
    new = await rotate(client, merchant, "client_secret")

    sent = 0

    async def notified() -> ReceivedRequest:
        nonlocal sent
        answer = await post_signed(client, merchant, CHECKOUT, checkout_body(url))
        assert answer.status_code == 200, answer.text
        page = str(answer.json()["qrContent"]).removeprefix(get_settings().public_url)
        assert (await submit(client, page, "reject-form")).status_code == 303  # a 06 notification
        sent += 1
        return (await receiver.wait_for(sent))[-1]

    during = await notified()
    assert (notify_verifies(during, old, url), notify_verifies(during, new, url)) == (True, False)
    if switch == "confirmed":
        await confirm(client, merchant, "client_secret")
    else:
        await settled_callbacks(app, merchant.id)  # nothing left to send again once the clock jumps past the lease
        clock.advance(GRACE + 1)
        merchant.credentials = replace(merchant.credentials, client_secret=new)
    after = await notified()
    assert (notify_verifies(after, old, url), notify_verifies(after, new, url)) == (False, True)
    expected = ["merchant.rotate.client_secret"] + (["merchant.confirm.client_secret"] if switch == "confirmed" else [])
    assert await audited(app, merchant) == expected
