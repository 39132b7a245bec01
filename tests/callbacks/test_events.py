"""One event, one id (docs/decisions.md §8): replays and recoveries are deliveries of the event, with its
X-Kasir-Callback-Id and attempt numbers that go on; a recovery sends only events still given up."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

from fastapi import FastAPI
from sqlalchemy import select

from kasir.audit.models import AuditEvent
from kasir.db import fetch
from kasir.kit.clock import clock
from kasir.payments.service import payments_service
from tests.callbacks.helpers import db, give_up, record, settle
from tests.conftest import TEST_ADMIN_TOKEN
from tests.support.builders import make_merchant
from tests.support.cli import kasir_beside_app
from tests.support.receiver import Answer
from tests.support.worker import settled_callbacks

ADMIN = {"Authorization": f"Bearer {TEST_ADMIN_TOKEN}"}


async def given_up(app: FastAPI, merchant_id: str) -> int:
    """The overview's "given up" for the merchant today."""
    async with app.state.database.unit_of_work(read_only=True) as session:
        return (await payments_service.overview(session, merchant_id, "today")).callbacks["given_up"]


async def test_one_event_keeps_its_id_through_a_replay_and_two_recoveries(app, client, receiver):
    merchant = await make_merchant(app)
    since = (clock.now() - timedelta(minutes=1)).isoformat()
    first_url = receiver.url("/first")
    receiver.answer(*[Answer(status=500)] * 9)  # the first three deliveries are refused to their last attempt
    event_id = await record(db(app), merchant_id=merchant.id, url=first_url, transaction_ref="TX-EVENT")
    await settle(app, event_id, "failed")
    assert await given_up(app, merchant.id) == 1

    single = await client.post(f"/admin/callbacks/{event_id}/replay", headers=ADMIN)
    assert single.status_code == 201, single.text
    assert (single.json()["event_id"], single.json()["replay_of"]) == (event_id, event_id)
    await settle(app, single.json()["id"], "failed")
    assert await given_up(app, merchant.id) == 1  # failed again: still one event given up

    recover = {"merchant_id": merchant.id, "since": since}
    review = await client.post("/admin/callbacks/recover", headers=ADMIN, json={**recover, "dry_run": True})
    assert review.status_code == 200, review.text
    assert review.json() == {
        "merchant_id": merchant.id,
        "since": review.json()["since"],
        "dry_run": True,
        "events": 1,
        "targets": [{"url": first_url, "events": 1}],  # no default URL: the event's own
        "event_ids": [event_id],
        "replays": [],
    }
    await settled_callbacks(app, merchant.id)
    assert len(receiver.requests) == 6  # a review sends nothing

    to_original = await client.post("/admin/callbacks/recover", headers=ADMIN, json=recover)
    assert to_original.status_code == 200, to_original.text
    [original_replay] = to_original.json()["replays"]
    await settle(app, original_replay, "failed")

    to_moved = await client.post(
        "/admin/callbacks/recover", headers=ADMIN, json={**recover, "url": receiver.url("/moved")}
    )
    assert to_moved.json()["targets"] == [{"url": receiver.url("/moved"), "events": 1}]
    [moved_replay] = to_moved.json()["replays"]
    await settle(app, moved_replay, "delivered")
    assert await given_up(app, merchant.id) == 0

    requests = await receiver.wait_for(10)
    assert [r.headers["x-kasir-callback-id"] for r in requests] == [str(event_id)] * 10
    assert [r.headers["x-kasir-attempt"] for r in requests] == [str(n) for n in range(1, 11)]
    assert [r.path for r in requests] == ["/first"] * 9 + ["/moved"]
    assert {r.body for r in requests} == {requests[0].body}  # the same payload, byte for byte

    # Each replay is a delivery of its own under the event, with its attempts.
    shown = (await client.get(f"/admin/callbacks/{moved_replay}", headers=ADMIN)).json()
    assert (shown["id"], shown["event_id"]) == (moved_replay, event_id)
    assert [a["number"] for a in shown["attempts"]] == [10]
    deliveries = [(d["id"], d["status"], [a["number"] for a in d["attempts"]]) for d in shown["deliveries"]]
    assert deliveries == [
        (event_id, "failed", [1, 2, 3]),
        (single.json()["id"], "failed", [4, 5, 6]),
        (original_replay, "failed", [7, 8, 9]),
        (moved_replay, "delivered", [10]),
    ]
    listed = (await client.get("/admin/callbacks", params={"event_id": event_id}, headers=ADMIN)).json()
    assert {c["id"] for c in listed["callbacks"]} == {d[0] for d in deliveries}
    assert {c["event_id"] for c in listed["callbacks"]} == {event_id}

    # Delivered now: a replay of a replay is still the event's, and goes on counting.
    again = (await client.post(f"/admin/callbacks/{original_replay}/replay", headers=ADMIN)).json()
    assert (again["event_id"], again["replay_of"]) == (event_id, original_replay)
    await settle(app, again["id"], "delivered")
    [last] = (await receiver.wait_for(11))[10:]
    assert (last.headers["x-kasir-callback-id"], last.headers["x-kasir-attempt"]) == (str(event_id), "11")


async def test_a_recovery_skips_an_event_a_single_replay_delivered(app, client, receiver):
    merchant = await make_merchant(app, callback_url=receiver.url("/default"))
    since = (clock.now() - timedelta(minutes=1)).isoformat()
    receiver.answer(*[Answer(status=500)] * 6)
    replayed = await record(db(app), merchant_id=merchant.id, url=receiver.url("/old"), transaction_ref="TX-A")
    await settle(app, replayed, "failed")
    left = await record(db(app), merchant_id=merchant.id, url=receiver.url("/old"), transaction_ref="TX-B")
    await settle(app, left, "failed")
    assert await given_up(app, merchant.id) == 2

    single = (await client.post(f"/admin/callbacks/{replayed}/replay", headers=ADMIN)).json()
    await settle(app, single["id"], "delivered")
    assert await given_up(app, merchant.id) == 1

    # The merchant moved its endpoint: the URL as it is now is the new default.
    moved = await client.post(
        f"/admin/merchants/{merchant.id}/callback-url", json={"callback_url": receiver.url("/moved")}, headers=ADMIN
    )
    assert moved.status_code == 200
    recover = {"merchant_id": merchant.id, "since": since}
    review = (await client.post("/admin/callbacks/recover", headers=ADMIN, json={**recover, "dry_run": True})).json()
    assert (review["events"], review["event_ids"]) == (1, [left])
    assert review["targets"] == [{"url": receiver.url("/moved"), "events": 1}]

    done = (await client.post("/admin/callbacks/recover", headers=ADMIN, json=recover)).json()
    assert (done["event_ids"], len(done["replays"])) == ([left], 1)
    await settle(app, done["replays"][0], "delivered")
    await settled_callbacks(app, merchant.id)
    paths = [(r.headers["x-kasir-callback-id"], r.path) for r in receiver.requests]
    assert paths == [(str(replayed), "/old")] * 3 + [(str(left), "/old")] * 3 + [
        (str(replayed), "/old"),  # the single replay, to the URL of the callback replayed
        (str(left), "/moved"),  # the recovery: the event the single replay delivered is not sent again
    ]
    nothing = (await client.post("/admin/callbacks/recover", headers=ADMIN, json=recover)).json()
    assert (nothing["events"], nothing["replays"]) == (0, [])

    async with app.state.database.unit_of_work(read_only=True) as session:
        rows = await fetch(
            session, select(AuditEvent.action, AuditEvent.actor).where(AuditEvent.target_id == merchant.id)
        )
    recoveries = [row for row in rows if row.action == "callback.recover"]
    assert [row.actor for row in recoveries] == ["admin-api", "admin-api"]  # the real ones, not the reviews


async def test_recovery_refuses_an_unknown_merchant_and_a_naive_time(client):
    unknown = await client.post(
        "/admin/callbacks/recover", headers=ADMIN, json={"merchant_id": "MCH-NONE", "since": "2026-11-01T00:00:00Z"}
    )
    assert unknown.status_code == 404
    naive = await client.post(
        "/admin/callbacks/recover", headers=ADMIN, json={"merchant_id": "MCH-NONE", "since": "2026-11-01T00:00:00"}
    )
    assert naive.status_code == 400


async def test_cli_reviews_then_recovers_and_shows_the_event(app, receiver):
    merchant = await make_merchant(app)
    since = (clock.now() - timedelta(minutes=1)).isoformat()
    receiver.answer(*[Answer(status=500)] * 3)
    event_id = await record(db(app), merchant_id=merchant.id, url=receiver.url("/cli"), transaction_ref="TX-CLI-R")
    await settle(app, event_id, "failed")

    review = await kasir_beside_app("callbacks", "recover", "--merchant", merchant.id, "--since", since, "--dry-run")
    assert review.exit_code == 0, review.output
    assert f"1 events to {receiver.url('/cli')}" in review.output
    await settled_callbacks(app, merchant.id)
    assert len(receiver.requests) == 3

    done = await kasir_beside_app(
        "callbacks", "recover", "--merchant", merchant.id, "--since", since, "--yes", "--json"
    )
    assert done.exit_code == 0, done.output
    [replay_id] = json.loads(done.output)["replays"]
    await settle(app, replay_id, "delivered")
    [last] = (await receiver.wait_for(4))[3:]
    assert (last.headers["x-kasir-callback-id"], last.headers["x-kasir-attempt"]) == (str(event_id), "4")

    shown = json.loads((await kasir_beside_app("callbacks", "show", str(replay_id))).output)
    assert shown["event_id"] == event_id
    assert [[a["number"] for a in d["attempts"]] for d in shown["deliveries"]] == [[1, 2, 3], [4]]
    listed = await kasir_beside_app("callbacks", "list", "--merchant", merchant.id)
    rows = [[cell.strip() for cell in line.split("│")[1:3]] for line in listed.output.splitlines()]
    assert [str(replay_id), str(event_id)] in rows  # the columns id, event id
    again = await kasir_beside_app("callbacks", "recover", "--merchant", merchant.id, "--since", since, "--yes")
    assert "no given-up event" in again.output
    bad = await kasir_beside_app("callbacks", "recover", "--merchant", merchant.id, "--since", "yesterday")
    assert bad.exit_code != 0
    assert "--since must be an ISO 8601 time" in bad.output


async def test_two_replays_of_one_event_at_once_make_one_delivery(app, client):
    """The event's first row is locked while a replay is decided: of two at once, one is refused (409), so
    no two deliveries share attempt numbers."""
    merchant = await make_merchant(app)
    event_id = await record(db(app), merchant_id=merchant.id, url="http://127.0.0.1:9/cb", transaction_ref="TX-TWO")
    await give_up(db(app), event_id)
    answers = await asyncio.gather(
        *(client.post(f"/admin/callbacks/{event_id}/replay", headers=ADMIN) for _ in range(2))
    )
    assert sorted(answer.status_code for answer in answers) == [201, 409]
    listed = (await client.get("/admin/callbacks", params={"event_id": event_id}, headers=ADMIN)).json()
    assert [(c["id"] == event_id, c["status"]) for c in listed["callbacks"]] == [(False, "pending"), (True, "failed")]
