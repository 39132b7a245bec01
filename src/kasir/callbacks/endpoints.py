"""Admin API of callbacks (Bearer KASIR_ADMIN_TOKEN), and /metrics."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request, Response
from fastapi.responses import PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from kasir.audit.service import Actor
from kasir.auth import ADMIN, PUBLIC
from kasir.callbacks.models import CallbackStatus
from kasir.callbacks.repository import callback_repository
from kasir.callbacks.schemas import CallbackList, CallbackView, RecoverAnswer, RecoverRequest
from kasir.callbacks.service import callback_outbox
from kasir.db import ReadSession, WriteSession
from kasir.kit.ids import INT64_MAX
from kasir.ops.metrics import scrape_registry
from kasir.payouts.metrics import payout_gauges

router = APIRouter()
admin = APIRouter(prefix="/admin/callbacks", tags=["admin"], dependencies=[ADMIN])


@admin.get("", summary="List callbacks, newest first")
async def list_callbacks(
    session: ReadSession,
    status: Annotated[CallbackStatus | None, Query()] = None,
    merchant_id: Annotated[str | None, Query()] = None,
    transaction: Annotated[str | None, Query(description="The product's transaction id")] = None,
    event_id: Annotated[int | None, Query(ge=1, le=INT64_MAX, description="Every delivery of this event")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> CallbackList:
    rows = await callback_repository.search(
        session,
        status=status.value if status else None,
        merchant_id=merchant_id,
        transaction_ref=transaction,
        event_key=event_id,
        limit=limit,
    )
    return CallbackList(callbacks=[CallbackView.of(row) for row in rows])


@admin.get("/{callback_id}", summary="One callback with its payload and every attempt, and every delivery of its event")
async def show_callback(callback_id: Annotated[int, Path(ge=1, le=INT64_MAX)], session: ReadSession) -> CallbackView:
    callback, attempts = await callback_outbox.show(session, callback_id)
    event = await callback_outbox.event(session, callback_id)
    return CallbackView.of(callback, attempts, with_payload=True, event=event)


_STILL_DELIVERING: dict[int | str, dict[str, Any]] = {
    409: {
        "description": "A delivery of the callback's event is still pending or being sent",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/PlainErrorBody"}}},
    }
}


@admin.post(
    "/{callback_id}/replay",
    status_code=201,
    summary="Deliver the event again: same payload and X-Kasir-Callback-Id, fresh signature headers",
    responses=_STILL_DELIVERING,
)
async def replay_callback(callback_id: Annotated[int, Path(ge=1, le=INT64_MAX)], session: WriteSession) -> CallbackView:
    replay = await callback_outbox.replay(session, callback_id)
    return CallbackView.of(replay)


@admin.post(
    "/recover",
    summary="Deliver again a merchant's given-up events since a time (`dry_run`: review how many and where first)",
    responses={
        404: {
            "description": "No merchant with that merchant_id",
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/PlainErrorBody"}}},
        }
    },
)
async def recover(body: RecoverRequest, request: Request, session: WriteSession) -> RecoverAnswer:
    recovery = await callback_outbox.recover(
        session,
        body.merchant_id,
        body.since,
        url=body.url or None,
        dry_run=body.dry_run,
        actor=Actor.admin_api(request.client.host if request.client else None),
    )
    return RecoverAnswer.of(recovery, dry_run=body.dry_run)


router.include_router(admin)


class _PendingCallbacks(Collector):
    """Gauge read from the database at scrape time (set by the /metrics endpoint)."""

    counts: dict[str, int] = {}

    def collect(self) -> list[GaugeMetricFamily]:
        gauge = GaugeMetricFamily("kasir_callbacks", "Callbacks by status", labels=["status"])
        for status in CallbackStatus:
            gauge.add_metric([status.value], self.counts.get(status.value, 0))
        return [gauge]


_pending = _PendingCallbacks()


# response_class: documented as text/plain (Prometheus's text format), not FastAPI's default JSON.
@router.get(
    "/metrics",
    tags=["operations"],
    summary="Prometheus metrics",
    response_class=PlainTextResponse,
    dependencies=[PUBLIC],
)
async def metrics(session: ReadSession) -> Response:
    _pending.counts = await callback_repository.count_by_status(session)
    await payout_gauges.read(session)
    return Response(generate_latest(scrape_registry(_pending, payout_gauges)), media_type=CONTENT_TYPE_LATEST)
