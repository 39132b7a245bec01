"""Admin API, CLI and metrics of callbacks."""

from __future__ import annotations

import json

import pytest

from kasir.callbacks.models import CallbackKind
from tests.callbacks.helpers import db, record, wait_attempts, wait_status
from tests.conftest import TEST_ADMIN_TOKEN
from tests.support.builders import make_merchant
from tests.support.cli import kasir_beside_app
from tests.support.receiver import Answer
from tests.support.wire.callbacks import notify_signature

ADMIN = {"Authorization": f"Bearer {TEST_ADMIN_TOKEN}"}


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": TEST_ADMIN_TOKEN}])
async def test_admin_requires_the_admin_token(client, headers):
    response = await client.get("/admin/callbacks", headers=headers)
    assert response.status_code == 401
    assert TEST_ADMIN_TOKEN not in response.text


async def test_list_show_and_replay(app, client, receiver):
    receiver.answer(Answer(status=500))
    merchant = await make_merchant(app)
    failed_first = await record(db(app), merchant_id=merchant.id, url=receiver.url(), transaction_ref="TX-ADMIN")
    await wait_attempts(db(app), failed_first, 1)

    listed = (await client.get("/admin/callbacks", params={"merchant_id": merchant.id}, headers=ADMIN)).json()
    assert [c["id"] for c in listed["callbacks"]] == [failed_first]
    by_status = (
        await client.get("/admin/callbacks", params={"status": "pending", "merchant_id": merchant.id}, headers=ADMIN)
    ).json()
    assert len(by_status["callbacks"]) == 1
    by_tx = (await client.get("/admin/callbacks", params={"transaction": "TX-ADMIN"}, headers=ADMIN)).json()
    assert by_tx["callbacks"][0]["transaction_ref"] == "TX-ADMIN"

    shown = (await client.get(f"/admin/callbacks/{failed_first}", headers=ADMIN)).json()
    assert shown["payload"] == {"transaction_id": "TX-ADMIN", "event": "PAID"}
    assert shown["attempts"][0]["http_status"] == 500
    assert shown["attempts"][0]["latency_ms"] >= 0

    # Not while the event is still being delivered (its retry is due in 10 s): 409, and no new delivery.
    refused = await client.post(f"/admin/callbacks/{failed_first}/replay", headers=ADMIN)
    assert refused.status_code == 409
    assert "still being delivered" in refused.json()["message"]
    from kasir.kit.clock import clock

    clock.advance(11.5)
    await wait_status(db(app), failed_first, "delivered")
    replay = await client.post(f"/admin/callbacks/{failed_first}/replay", headers=ADMIN)
    assert replay.status_code == 201
    replay_id = replay.json()["id"]
    assert replay.json()["replay_of"] == failed_first
    assert replay.json()["event_id"] == failed_first
    await wait_status(db(app), replay_id, "delivered")
    bodies = [r.body for r in receiver.requests]
    assert bodies[-1] == bodies[0]  # same payload, byte for byte

    missing = await client.get("/admin/callbacks/999999999", headers=ADMIN)
    assert missing.status_code == 404


async def test_replayed_bnpl_notification_is_signed_afresh(app, client, receiver):
    from kasir.kit.clock import clock

    merchant = await make_merchant(app)
    url = receiver.url("/n")
    original = await record(db(app), merchant_id=merchant.id, url=url, kind=CallbackKind.BNPL, svc_signature=None)
    await wait_status(db(app), original, "delivered")
    clock.advance(120)
    replay = (await client.post(f"/admin/callbacks/{original}/replay", headers=ADMIN)).json()
    await wait_status(db(app), replay["id"], "delivered")
    first, second = await receiver.wait_for(2)
    assert first.headers["x-timestamp"] != second.headers["x-timestamp"]
    for request in (first, second):
        expected = notify_signature(
            merchant.credentials.client_secret, url, request.body, request.headers["x-timestamp"]
        )
        assert request.headers["x-signature"] == expected


async def test_cli_list_show_replay(app, receiver):
    merchant = await make_merchant(app)
    callback_id = await record(db(app), merchant_id=merchant.id, url=receiver.url(), transaction_ref="TX-CLI")
    await wait_status(db(app), callback_id, "delivered")
    listed = await kasir_beside_app("callbacks", "list", "--merchant", merchant.id, "--json")
    assert listed.exit_code == 0, listed.output
    assert json.loads(listed.output)[0]["id"] == callback_id
    shown = await kasir_beside_app("callbacks", "show", str(callback_id))
    assert json.loads(shown.output)["attempts"][0]["accepted"] is True
    replayed = await kasir_beside_app("callbacks", "replay", str(callback_id))
    assert replayed.exit_code == 0
    await receiver.wait_for(2)
    assert (await kasir_beside_app("callbacks", "show", "999999999")).exit_code == 2


async def test_metrics(app, client, receiver):
    merchant = await make_merchant(app)
    callback_id = await record(db(app), merchant_id=merchant.id, url=receiver.url())
    await wait_status(db(app), callback_id, "delivered")
    text = (await client.get("/metrics")).text
    assert 'kasir_callbacks_sent_total{kind="wallet"}' in text
    assert "kasir_callbacks_failed_total" in text
    assert "kasir_callbacks_retried_total" in text
    assert 'kasir_callbacks{status="pending"}' in text
    assert "kasir_callback_delivery_seconds_bucket" in text


async def test_replay_to_a_url_given(app, client, receiver):
    receiver.answer(Answer(status=500))
    merchant = await make_merchant(app)
    original = await record(db(app), merchant_id=merchant.id, url=receiver.url("/old"), transaction_ref="TX-TO")
    await wait_attempts(db(app), original, 1)
    missing = await client.post(f"/admin/callbacks/{original}/replay-to", headers=ADMIN, json={"target": "url"})
    assert missing.status_code == 400
    assert missing.json()["message"] == "url is required"
    to_new = {"target": "url", "url": receiver.url("/new")}
    still_delivering = await client.post(f"/admin/callbacks/{original}/replay-to", headers=ADMIN, json=to_new)
    assert still_delivering.status_code == 409
    from kasir.kit.clock import clock

    clock.advance(11.5)  # its retry is due: delivered
    await wait_status(db(app), original, "delivered")
    answer = await client.post(f"/admin/callbacks/{original}/replay-to", headers=ADMIN, json=to_new)
    assert answer.status_code == 201, answer.text
    replay = answer.json()
    assert (replay["url"], replay["replay_of"], replay["event_id"]) == (receiver.url("/new"), original, original)
    await wait_status(db(app), replay["id"], "delivered")
    assert [r.path for r in receiver.requests] == ["/old", "/old", "/new"]
