from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from kasir.callbacks.models import Callback, CallbackAttempt


class CallbackAttemptView(BaseModel):
    number: int
    worker: str
    started_at: datetime
    latency_ms: int
    http_status: int | None
    error: str | None
    response_excerpt: str | None
    accepted: bool

    @classmethod
    def of(cls, attempt: CallbackAttempt) -> CallbackAttemptView:
        return cls(
            number=attempt.number,
            worker=attempt.worker,
            started_at=attempt.started_at,
            latency_ms=attempt.latency_ms,
            http_status=attempt.http_status,
            error=attempt.error,
            response_excerpt=attempt.response_excerpt,
            accepted=attempt.accepted,
        )


class CallbackView(BaseModel):
    id: int
    merchant_id: str
    kind: str
    transaction_ref: str
    event: str
    url: str
    status: str
    attempts_made: int
    max_attempts: int
    next_attempt_at: datetime
    created_at: datetime
    delivered_at: datetime | None
    last_error: str | None
    replay_of: int | None
    payload: Any = None
    attempts: list[CallbackAttemptView] | None = None

    @classmethod
    def of(
        cls, callback: Callback, attempts: list[CallbackAttempt] | None = None, *, with_payload: bool = False
    ) -> CallbackView:
        return cls(
            id=callback.id,
            merchant_id=callback.merchant_id,
            kind=callback.kind,
            transaction_ref=callback.transaction_ref,
            event=callback.event,
            url=callback.url,
            status=callback.status,
            attempts_made=callback.attempts_made,
            max_attempts=callback.max_attempts,
            next_attempt_at=callback.next_attempt_at,
            created_at=callback.created_at,
            delivered_at=callback.delivered_at,
            last_error=callback.last_error,
            replay_of=callback.replay_of,
            payload=json.loads(callback.payload) if with_payload else None,
            attempts=[CallbackAttemptView.of(a) for a in attempts] if attempts is not None else None,
        )


class CallbackList(BaseModel):
    callbacks: list[CallbackView]
