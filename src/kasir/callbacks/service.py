"""The callback outbox: product rooms record callbacks here, in their own transaction.

    await callback_outbox.record(
        session, kind=CallbackKind.WALLET, merchant_id=tx.merchant_id, transaction_ref=tx.id,
        event="PAID", url=url, payload={...}, svc_signature=svc_signature(tx.id, x_req_sig),
    )

Nothing is sent before the session commits; a rolled-back request leaves no callback. After
commit the delivery engine is woken at once (no polling delay on the happy path).
"""

from __future__ import annotations

import json
from typing import Any

from kasir.callbacks.models import CallbackKind, CallbackStatus
from kasir.callbacks.policies import POLICIES
from kasir.callbacks.repository import CallbackAttemptRow, CallbackRow, callback_repository
from kasir.db import Session, notify_after_commit
from kasir.errors import NotFound
from kasir.kit.clock import clock

# The channel the delivery workers listen on (kasir.db: Database.listen, notify_after_commit).
CALLBACKS_CHANNEL = "kasir_callbacks"


class CallbackNotFound(NotFound):
    pass


def encode_payload(payload: dict[str, Any]) -> str:
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False)


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
        svc_signature: str | None = None,
    ) -> None:
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
            status=CallbackStatus.PENDING.value,
            attempts_made=0,
            max_attempts=POLICIES[kind].max_attempts,
            next_attempt_at=now,
            fence=0,
            created_at=now,
        )
        await notify_after_commit(session, CALLBACKS_CHANNEL)  # the delivery workers, woken at commit

    async def replay(self, session: Session, callback_id: int, *, url: str | None = None) -> CallbackRow:
        """A new delivery of the same payload, byte for byte, to `url` (else the original's); its signature
        headers are computed afresh when sent."""
        original = await callback_repository.get(session, callback_id)
        if original is None:
            raise CallbackNotFound(f"no callback {callback_id}")
        now = clock.now()
        replay = await callback_repository.add_replay(
            session,
            merchant_id=original.merchant_id,
            kind=original.kind,
            transaction_ref=original.transaction_ref,
            event=original.event,
            url=url or original.url,
            payload=original.payload,
            svc_signature=original.svc_signature,
            status=CallbackStatus.PENDING.value,
            attempts_made=0,
            max_attempts=POLICIES[CallbackKind(original.kind)].max_attempts,
            next_attempt_at=now,
            lease_owner=None,
            lease_expires_at=None,
            fence=0,
            replay_of=original.id,
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


callback_outbox = CallbackOutbox()
