"""Admin API of payments (Bearer KASIR_ADMIN_TOKEN): one list across wallet, BNPL, card and VA; callback replays."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request

from kasir.audit.service import Actor
from kasir.auth.admin import ADMIN
from kasir.callbacks.schemas import CallbackView
from kasir.db import ReadSession, WriteSession
from kasir.kit.ids import INT64_MAX
from kasir.payments.schemas import PaymentList, PaymentView, ReplayedList, ReplayGivenUpRequest, ReplayRequest
from kasir.payments.service import parse_filter, payment_actions, payments_service

router = APIRouter(prefix="/admin", tags=["admin"], dependencies=[ADMIN])


def actor(request: Request) -> Actor:
    return Actor.admin_api(request.client.host if request.client else None)


@router.get("/payments", summary="Payments of every product, newest first (keyset pages)")
async def list_payments(
    session: ReadSession,
    q: Annotated[
        str | None,
        Query(description="Any id: transaction, external, order, VA number, partnerReferenceNo, reference"),
    ] = None,
    product: Annotated[str | None, Query(description="wallet | bnpl | card | va | link")] = None,
    status: Annotated[
        str | None, Query(description="pending | paid | refunded | void | expired | failed | cancelled")
    ] = None,
    channel: Annotated[
        str | None, Query(description="DANA, QRIS, CARD, BNPL, a VA's bank or channel (BCA), LINK (every payment link)")
    ] = None,
    merchant_id: str | None = None,
    since: Annotated[str | None, Query(description="2026-11-24 (Asia/Jakarta) or ISO 8601 with offset")] = None,
    until: Annotated[str | None, Query(description="2026-11-24 (the whole day) or ISO 8601 with offset")] = None,
    cursor: str | None = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> PaymentList:
    where = parse_filter(
        scope=None,
        merchant_id=merchant_id,
        product=product,
        status=status,
        channel=channel,
        since=since,
        until=until,
        query=q,
    )
    page = await payments_service.list(session, where, cursor=cursor, limit=limit)
    return PaymentList(payments=[PaymentView.of(row) for row in page.rows], next_cursor=page.next_cursor)


@router.get("/payments/{payment_id}", summary="One payment of any product")
async def show_payment(payment_id: str, session: ReadSession) -> PaymentView:
    return PaymentView.of(await payments_service.get(session, None, payment_id))


@router.post(
    "/callbacks/{callback_id}/replay-to",
    status_code=201,
    summary="Deliver a callback again to its original URL, the merchant's current default URL or a URL given",
)
async def replay_to(
    callback_id: Annotated[int, Path(ge=1, le=INT64_MAX)], body: ReplayRequest, request: Request, session: WriteSession
) -> CallbackView:
    replay = await payment_actions.replay(session, None, callback_id, body.target, actor(request), url=body.url)
    return CallbackView.of(replay)


@router.post(
    "/callbacks/replay-given-up",
    status_code=201,
    summary="Deliver again every given-up callback of a merchant recorded since a time",
    responses={
        404: {
            "description": "No merchant with that merchant_id",
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/PlainErrorBody"}}},
        }
    },
)
async def replay_given_up(body: ReplayGivenUpRequest, request: Request, session: WriteSession) -> ReplayedList:
    replays = await payment_actions.replay_given_up(session, None, body.merchant_id, body.since, actor(request))
    return ReplayedList(replayed=[r.id for r in replays], of=[r.replay_of or 0 for r in replays])
