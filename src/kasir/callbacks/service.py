"""The callback outbox: product rooms record callbacks here, in their own transaction.

    await callback_outbox.record(
        session, kind=CallbackKind.WALLET, merchant_id=tx.merchant_id, transaction_ref=tx.id,
        event="PAID", url=url, payload={...}, signed_ids=SignedIds(tx.id, tx.external_id, tx.order_id),
    )

Nothing is sent before the session commits; a rolled-back request leaves no callback. After
commit the delivery engine is woken at once (no polling delay on the happy path).

A recorded callback is an event (docs/decisions.md §8): one X-Kasir-Callback-Id for its whole
life. A replay, single or in a recovery, is another delivery of the event (a row whose `event_id`
is the event's), with the event's id and attempt numbers that go on from the event's last one.

    CallbackNotFound (404)
    CallbackStillDelivering (409)   a delivery of the event is pending or being sent
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kasir.audit.service import Actor, audit
from kasir.callbacks.models import CallbackKind, CallbackStatus
from kasir.callbacks.policies import POLICIES
from kasir.callbacks.repository import CallbackAttemptRow, CallbackRow, callback_repository
from kasir.callbacks.ssrf import check_callback_url
from kasir.config import get_settings
from kasir.db import Session, notify_after_commit
from kasir.errors import Conflict, NotFound
from kasir.kit.clock import clock
from kasir.merchants.service import merchant_service

# The channel the delivery workers listen on (kasir.db: Database.listen, notify_after_commit).
CALLBACKS_CHANNEL = "kasir_callbacks"

IN_FLIGHT = (CallbackStatus.PENDING.value, CallbackStatus.DELIVERING.value)


class CallbackNotFound(NotFound):
    pass


class CallbackStillDelivering(Conflict):
    pass


def encode_payload(payload: dict[str, Any]) -> str:
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class SignedIds:
    """What a callback's svc-signature is made of (§3.5): signed when each attempt is sent, with the hash
    key the merchant verifies with then (docs/decisions.md §8). BNPL: referenceNo, and partnerReferenceNo
    twice (issue 26)."""

    transaction_id: str
    external_id: str
    order_id: str
    sub_merchant_id: str | None = None

    def encoded(self) -> str:
        values = {"transaction_id": self.transaction_id, "external_id": self.external_id, "order_id": self.order_id}
        if self.sub_merchant_id:
            values["sub_merchant_id"] = self.sub_merchant_id
        return encode_payload(values)

    @classmethod
    def decoded(cls, text: str) -> SignedIds:
        values = json.loads(text)
        return cls(values["transaction_id"], values["external_id"], values["order_id"], values.get("sub_merchant_id"))


@dataclass(frozen=True, slots=True)
class Deliveries:
    """An event and every delivery of it, each with its attempts (oldest first)."""

    event_key: int
    deliveries: list[tuple[CallbackRow, list[CallbackAttemptRow]]]


@dataclass(frozen=True, slots=True)
class Recovery:
    """A bulk recovery's plan, or what it did: the given-up events and where each goes."""

    merchant_id: str
    since: datetime
    events: list[tuple[CallbackRow, str]]  # (the event's first row, the URL it goes to)
    replays: list[CallbackRow]  # empty for a review (dry run)

    def targets(self) -> list[tuple[str, int]]:
        """Each target URL with how many events go there, most first."""
        return Counter(url for _, url in self.events).most_common()


class CallbackOutbox:
    async def record(
        self,
        session: Session,
        *,
        kind: CallbackKind,
        merchant_id: str,
        transaction_ref: str,
        event: str,
        url: str,
        payload: dict[str, Any],
        signed_ids: SignedIds | None = None,
        svc_signature: str | None = None,
    ) -> None:
        """`signed_ids`: signed at send time (every product); `svc_signature`: a fixed value, sent as it is."""
        now = clock.now()
        await callback_repository.add(
            session,
            merchant_id=merchant_id,
            kind=kind.value,
            transaction_ref=transaction_ref,
            event=event,
            url=url,
            payload=encode_payload(payload),
            svc_signature=svc_signature,
            signed_ids=None if signed_ids is None else signed_ids.encoded(),
            status=CallbackStatus.PENDING.value,
            attempts_made=0,
            max_attempts=POLICIES[kind].max_attempts,
            next_attempt_at=now,
            fence=0,
            attempt_offset=0,
            created_at=now,
        )
        await notify_after_commit(session, CALLBACKS_CHANNEL)  # the delivery workers, woken at commit

    async def replay(self, session: Session, callback_id: int, *, url: str | None = None) -> CallbackRow:
        """Another delivery of the callback's event: the same payload, byte for byte, to `url` (else the URL
        of the callback replayed), under the event's X-Kasir-Callback-Id; signature headers computed when sent.
        Refused (409) while a delivery of the event is pending or being sent."""
        replayed = await callback_repository.get(session, callback_id)
        if replayed is None:
            raise CallbackNotFound(f"no callback {callback_id}")
        replay = await self._deliver_again(session, replayed, url or replayed.url)
        assert replay is not None
        return replay

    async def _deliver_again(
        self, session: Session, replayed: CallbackRow, url: str, *, given_up_only: bool = False
    ) -> CallbackRow | None:
        """The new delivery; None when `given_up_only` and a delivery of the event was delivered meanwhile."""
        event = await callback_repository.lock_event(session, replayed.event_key)
        assert event is not None  # an event's first row is never deleted
        deliveries = await callback_repository.deliveries(session, event.id)
        for delivery in deliveries:
            if delivery.status in IN_FLIGHT:
                raise CallbackStillDelivering(
                    f"callback {replayed.id} is still being delivered (callback {delivery.id} of its event is"
                    f" {delivery.status}): replay it once it is delivered or given up"
                )
            if given_up_only and delivery.status == CallbackStatus.DELIVERED.value:
                return None
        now = clock.now()
        replay = await callback_repository.add_replay(
            session,
            merchant_id=event.merchant_id,
            kind=event.kind,
            transaction_ref=event.transaction_ref,
            event=event.event,
            url=url,
            payload=event.payload,
            svc_signature=event.svc_signature,
            signed_ids=event.signed_ids,
            status=CallbackStatus.PENDING.value,
            attempts_made=0,
            max_attempts=POLICIES[CallbackKind(event.kind)].max_attempts,
            next_attempt_at=now,
            lease_owner=None,
            lease_expires_at=None,
            fence=0,
            replay_of=replayed.id,
            event_id=event.id,
            # Attempt numbers go on from the event's highest: never one the merchant has seen for it.
            attempt_offset=max(d.attempt_offset + d.attempts_made for d in deliveries),
            created_at=now,
            delivered_at=None,
            last_error=None,
        )
        await notify_after_commit(session, CALLBACKS_CHANNEL)
        return replay

    async def show(self, session: Session, callback_id: int) -> tuple[CallbackRow, list[CallbackAttemptRow]]:
        callback = await callback_repository.get(session, callback_id)
        if callback is None:
            raise CallbackNotFound(f"no callback {callback_id}")
        return callback, await callback_repository.attempts(session, callback_id)

    async def event(self, session: Session, callback_id: int) -> Deliveries:
        """The event of callback `callback_id`: every delivery of it with its attempts."""
        callback = await callback_repository.get(session, callback_id)
        if callback is None:
            raise CallbackNotFound(f"no callback {callback_id}")
        deliveries = await callback_repository.deliveries(session, callback.event_key)
        attempts = await callback_repository.attempts_of(session, [d.id for d in deliveries])
        by_delivery: dict[int, list[CallbackAttemptRow]] = {}
        for attempt in attempts:
            by_delivery.setdefault(attempt.callback_id, []).append(attempt)
        return Deliveries(callback.event_key, [(d, by_delivery.get(d.id, [])) for d in deliveries])

    # --- bulk recovery (Svix's "recover"): the given-up events of a merchant, delivered again ----------------

    async def recover(
        self,
        session: Session,
        merchant_id: str,
        since: datetime,
        *,
        url: str | None = None,
        dry_run: bool = False,
        actor: Actor | None = None,
        original_urls: bool = False,
    ) -> Recovery:
        """Deliver again every event of the merchant recorded since `since` and given up (none of its deliveries
        delivered, none in flight): to `url` when given (checked as every callback URL is, before the first
        statement: in production the check resolves the host), else to the URL as it is now (the merchant's
        default callback URL for kinds that use it, else the event's); `original_urls`: to the event's URL.
        A dry run answers the plan and sends nothing; a real one is audited."""
        if url is not None:
            await check_callback_url(url, production=get_settings().is_production, field="url")
        merchant = await merchant_service.get(session, merchant_id)
        events = [
            (event, url or (event.url if original_urls else current_url(event, merchant.callback_url)))
            for event in await callback_repository.given_up(session, merchant.id, since)
        ]
        recovery = Recovery(merchant.id, since, events, [])
        if dry_run:
            return recovery
        for event, target in events:
            # Listed unlocked: another replay or recovery may have taken the event since (in flight, or delivered).
            try:
                replay = await self._deliver_again(session, event, target, given_up_only=True)
            except CallbackStillDelivering:
                continue
            if replay is not None:
                recovery.replays.append(replay)
        if actor is not None:
            await audit.record(
                session,
                actor,
                "callback.recover",
                target_type="merchant",
                target_id=merchant.id,
                merchant_id=merchant.id,
                after={
                    "since": since.isoformat(),
                    "url": url,
                    "targets": dict(recovery.targets()),
                    "events": [event.id for event, _ in events],
                    "replays": [replay.id for replay in recovery.replays],
                },
            )
        return recovery


# Kinds whose requests fall back to the merchant's default callback URL (wallet, payment page); a BNPL
# checkout always names its own.
USES_DEFAULT_URL = frozenset({CallbackKind.WALLET.value, CallbackKind.PAYMENT_PAGE.value, CallbackKind.VA.value})


def current_url(event: CallbackRow, default_url: str | None) -> str:
    """Where the event goes now: the merchant's default callback URL for a kind that uses it, else its own."""
    if event.kind in USES_DEFAULT_URL and default_url:
        return default_url
    return event.url


callback_outbox = CallbackOutbox()
