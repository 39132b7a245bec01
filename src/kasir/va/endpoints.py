"""VA routes (docs/decisions.md §9.1): `POST /va`, `/va/inquiry`, `/va/cancel`. The staging dummy payment is
the simulator's (kasir.simulator.endpoints); a deployment without a VA issuer answers `03`
(kasir.processors.registry.ProductUnavailable).

Every route is `WalletSigned` (Basic + x-req-signature over external_id and order_id, `x-version: v3`), as
the wallet's, and answers `{response_code, response_message, data}`. An optional `sub-merchant-id` must be
one of the merchant's (`04`, 403); on create it is recorded and signs the VA's callbacks. Create and cancel
are `Keyed` (X-Idempotency-Key). The issuer is asked for the number before the unit of work opens (it is
the network); the unit then writes the VA, whose unique constraints decide races.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel

from kasir.auth import WalletSigned
from kasir.db import Session
from kasir.idempotency.service import Keyed
from kasir.va.schemas import CreateVaRequest, VaAnswer, VaErrorBody, VaReference
from kasir.va.service import va_service
from kasir.wallet.endpoints import ERROR_RESPONSES as WALLET_ERRORS
from kasir.wallet.endpoints import database, parse, route_openapi

router = APIRouter(tags=["virtual accounts"])

SUB_MERCHANT_HEADER = "sub-merchant-id"
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    **{status: {**answer, "model": VaErrorBody} for status, answer in WALLET_ERRORS.items()},
    200: {"model": VaAnswer, "description": "`00` Success: the virtual account in `data`"},
    403: {"model": VaErrorBody, "description": "`04`: sub-merchant-id is not one of the merchant's"},
}


def sub_merchant_of(request: Request) -> str | None:
    """The request's `sub-merchant-id`, or None (the simulator's dummy payment reads it too)."""
    return (request.headers.get(SUB_MERCHANT_HEADER) or "").strip() or None


def va_route_openapi(model: type[BaseModel], *, keyed: bool) -> dict[str, Any]:
    """The wallet route's OpenAPI extra, and the optional `sub-merchant-id` (read from the request, not declared)."""
    extra = route_openapi(model, keyed=keyed)
    extra["parameters"] = [
        *extra["parameters"],
        {"name": SUB_MERCHANT_HEADER, "in": "header", "required": False, "schema": {"type": "string"},
         "description": "One of the merchant's sub-merchants (else `04`); on create it is recorded on the VA and "
         "signs its callbacks"},
    ]  # fmt: skip
    return extra


def _route(path: str, model: type[BaseModel], summary: str, *, keyed: bool) -> Any:
    return router.post(
        path, summary=summary, openapi_extra=va_route_openapi(model, keyed=keyed), responses=ERROR_RESPONSES
    )


@_route("/va", CreateVaRequest, "Create a virtual account", keyed=True)
async def create_va(request: Request, caller: WalletSigned, once: Keyed) -> Response:
    body = parse(CreateVaRequest, caller.body)
    merchant = caller.merchant.merchant
    sub_merchant_id = sub_merchant_of(request)
    plan = va_service.plan(merchant, body, sub_merchant_id)
    db = database(request)
    await va_service.check_sub_merchant(db, merchant.id, sub_merchant_id)
    await va_service.check_callback_url(merchant, body.callback_url)  # DNS: before the unit of work
    number = await va_service.number_for(db, plan)  # the issuer: before the unit of work

    async def create(session: Session) -> Response:
        va = await va_service.open(session, merchant, plan, number)
        return JSONResponse(await va_service.describe(session, va))

    return await once.run(caller.merchant_id, create)


@_route("/va/inquiry", VaReference, "The virtual account's state and its last payments", keyed=False)
async def inquiry(request: Request, caller: WalletSigned) -> JSONResponse:
    reference = parse(VaReference, caller.body)
    db = database(request)
    await va_service.check_sub_merchant(db, caller.merchant_id, sub_merchant_of(request))
    async with db.unit_of_work(read_only=True) as session:
        va = await va_service.find(session, caller.merchant.merchant, reference)
        return JSONResponse(await va_service.describe(session, va))


@_route("/va/cancel", VaReference, "Stop further payments into a virtual account", keyed=True)
async def cancel(request: Request, caller: WalletSigned, once: Keyed) -> Response:
    reference = parse(VaReference, caller.body)
    await va_service.check_sub_merchant(database(request), caller.merchant_id, sub_merchant_of(request))

    async def cancel_in(session: Session) -> Response:
        va = await va_service.find(session, caller.merchant.merchant, reference, lock=True)
        await va_service.cancel(session, va)
        return JSONResponse(await va_service.describe(session, va))

    return await once.run(caller.merchant_id, cancel_in)
