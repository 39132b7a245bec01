"""Admin API of callbacks (Bearer KASIR_ADMIN_TOKEN), and /metrics."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Response
from fastapi.responses import PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from kasir.auth import ADMIN, PUBLIC
from kasir.callbacks.models import CallbackStatus
from kasir.callbacks.repository import callback_repository
from kasir.callbacks.schemas import CallbackList, CallbackView
from kasir.callbacks.service import callback_outbox
from kasir.db import ReadSession, WriteSession
from kasir.kit.ids import INT64_MAX
from kasir.ops.metrics import scrape_registry

router = APIRouter()
admin = APIRouter(prefix="/admin/callbacks", tags=["admin"], dependencies=[ADMIN])


@admin.get("", summary="List callbacks, newest first")
async def list_callbacks(
    session: ReadSession,
    status: Annotated[CallbackStatus | None, Query()] = None,
    merchant_id: Annotated[str | None, Query()] = None,
    transaction: Annotated[str | None, Query(description="The product's transaction id")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> CallbackList:
    rows = await callback_repository.search(
        session,
        status=status.value if status else None,
        merchant_id=merchant_id,
        transaction_ref=transaction,
        limit=limit,
    )
    return CallbackList(callbacks=[CallbackView.of(row) for row in rows])


@admin.get("/{callback_id}", summary="One callback with its payload and every attempt")
async def show_callback(callback_id: Annotated[int, Path(ge=1, le=INT64_MAX)], session: ReadSession) -> CallbackView:
    callback, attempts = await callback_outbox.show(session, callback_id)
    return CallbackView.of(callback, attempts, with_payload=True)


@admin.post("/{callback_id}/replay", status_code=201, summary="Deliver again: same payload, fresh signature headers")
async def replay_callback(callback_id: Annotated[int, Path(ge=1, le=INT64_MAX)], session: WriteSession) -> CallbackView:
    replay = await callback_outbox.replay(session, callback_id)
    return CallbackView.of(replay)


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
    return Response(generate_latest(scrape_registry(_pending)), media_type=CONTENT_TYPE_LATEST)
