"""Payment-link API (docs/decisions.md §10.1, §10.2): `POST /payment-page/payment` and
`GET /payment-page/payment/{transaction_id}`.

Create is `WalletSigned` (Basic + x-req-signature over external_id and order_id, `x-version: v3`) and
`Keyed` (X-Idempotency-Key), as the VA's create; an optional `sub-merchant-id` must be one of the
merchant's (`04`, 403) and signs the link's callbacks. The read is Basic only (no x-req-signature, no
x-version). Both answer `{response_code, response_message, data}` (the wallet family's codes, §4).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from kasir.auth import BasicAuthenticated, WalletSigned
from kasir.db import Session
from kasir.errors import WireFormat, wire
from kasir.idempotency.service import Keyed
from kasir.links.schemas import CreateLinkRequest, LinkAnswer, LinkCreatedAnswer, LinkErrorBody
from kasir.links.service import created_data, envelope, link_data, link_service
from kasir.va.endpoints import sub_merchant_of, va_route_openapi
from kasir.va.service import va_service
from kasir.wallet.endpoints import ERROR_RESPONSES as WALLET_ERRORS
from kasir.wallet.endpoints import database, parse

router = APIRouter(tags=["payment links"])

ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    **{status: {**answer, "model": LinkErrorBody} for status, answer in WALLET_ERRORS.items()},
    200: {"model": LinkCreatedAnswer, "description": "`00` Success: the payment link in `data`"},
    403: {"model": LinkErrorBody, "description": "`04`: sub-merchant-id is not one of the merchant's"},
}
_READ_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: answer for status, answer in ERROR_RESPONSES.items() if status not in (403, 409, 422)
} | {200: {"model": LinkAnswer, "description": "`00` Success: the payment link as it is now"}}
# Basic only: no x-req-signature, no x-version (the Authorization header is the merchantBasic scheme).
_BASIC_ONLY = wire(WireFormat.WALLET)


@router.post(
    "/payment-page/payment",
    summary="Create a payment link (the hosted checkout)",
    openapi_extra=va_route_openapi(CreateLinkRequest, keyed=True),
    responses=ERROR_RESPONSES,
)
async def create_link(request: Request, caller: WalletSigned, once: Keyed) -> Response:
    body = parse(CreateLinkRequest, caller.body)
    merchant = caller.merchant.merchant
    sub_merchant_id = sub_merchant_of(request)
    plan = link_service.plan(merchant, body, sub_merchant_id)
    await va_service.check_sub_merchant(database(request), merchant.id, sub_merchant_id)
    await link_service.check_callback_url(merchant, body.callback_url)  # DNS: before the unit of work

    async def create(session: Session) -> Response:
        link = await link_service.open(session, merchant, plan)
        return JSONResponse(envelope(created_data(link)))

    return await once.run(caller.merchant_id, create)


@router.get(
    "/payment-page/payment/{transaction_id}",
    summary="A payment link as it is now (the provider's order details)",
    openapi_extra=_BASIC_ONLY,
    responses=_READ_RESPONSES,
)
async def read_link(transaction_id: str, request: Request, caller: BasicAuthenticated) -> JSONResponse:
    async with database(request).unit_of_work(read_only=True) as session:
        link = await link_service.find(session, caller.merchant, transaction_id)
        return JSONResponse(envelope(link_data(link)))
