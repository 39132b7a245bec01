"""BNPL routes: interface.md endpoints 4 and 5, the status inquiry, the approval page (qrContent).

The approval page hands the customer to the configured lender (kasir.processors); the
simulator's Approve and Reject are its own routes. Without a lender the checkout answers
403xx01 Feature Not Allowed (kasir.processors.registry.ProductUnavailable).

Each SNAP route is served under `/v1.0/bnpl/...` (documented) and `/v1.1/bnpl/...` (the
interface's sample request); both reach the same handler. Each is `SnapSigned` (kasir.auth.snap):
the signature is verified before the route's unit of work opens; X-EXTERNAL-ID is claimed in it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from kasir.auth import PUBLIC, SnapSigned
from kasir.auth.snap import SNAP_HEADERS, claim_external_id
from kasir.bnpl.schemas import (
    BnplCalculationResponse,
    BnplCheckoutResponse,
    BnplStatusInquiryRequest,
    BnplStatusResponse,
    PaymentCalculationRequest,
    QrCheckoutRequest,
)
from kasir.bnpl.service import bnpl_service, option_body, page_url, parse_request, transaction_body
from kasir.db import ReadSession, Session
from kasir.errors import WireFormat, wire
from kasir.idempotency.service import KEY_HEADER, Keyed
from kasir.kit.clock import isoformat_seconds
from kasir.kit.qr import qr_png
from kasir.processors.pages import hand_over
from kasir.processors.registry import bnpl_lender, page_of, require
from kasir.snap.codes import (
    SERVICE_PAYMENT_CALCULATION,
    SERVICE_QR_CHECKOUT,
    SERVICE_STATUS_INQUIRY,
    SUCCESS_MESSAGE,
    success_code,
)
from kasir.snap.openapi import snap_errors, snap_header_params, snap_route

router = APIRouter(tags=["bnpl"])

VERSIONS = ("v1.0", "v1.1")


# The X-Idempotency-Key scope of the checkout: one operation under both version prefixes.
_CHECKOUT_SCOPE = "POST /v1.0/bnpl/qr-checkout"


def _snap_post(
    name: str, service_code: str, model: type[Any], answer: type[Any], summary: str, *, keyed: bool = False
) -> Callable[[Any], Any]:
    parameters = snap_header_params("Content-Type", *SNAP_HEADERS)
    if keyed:  # creates a payment: X-Idempotency-Key (kasir.idempotency)
        key = {"name": KEY_HEADER, "in": "header", "required": False, "schema": {"type": "string", "maxLength": 255}}
        parameters = [*parameters, key]
    extra = {**snap_route(service_code, model), "parameters": parameters}

    def register(handler: Any) -> Any:
        for version in VERSIONS:
            router.add_api_route(
                f"/{version}/bnpl/{name}",
                handler,
                methods=["POST"],
                summary=f"{summary} ({version})",
                openapi_extra=extra,
                responses={
                    200: {"model": answer, "description": "Successful"},
                    **snap_errors(400, 401, 404, 409, *((422,) if keyed else ()), 429, 500),
                },
                include_in_schema=True,
            )
        return handler

    return register


@_snap_post(
    "payment-calculation",
    SERVICE_PAYMENT_CALCULATION,
    PaymentCalculationRequest,
    BnplCalculationResponse,
    "BNPL payment calculation",
)
async def payment_calculation(request: Request, caller: SnapSigned) -> JSONResponse:
    async with request.app.state.database.unit_of_work() as session:
        await claim_external_id(session, caller)  # a reused X-EXTERNAL-ID is refused before the body is read
        calculation = parse_request(PaymentCalculationRequest, caller.body)
        options = await bnpl_service.calculate(session, caller, calculation)
    return JSONResponse(
        {
            "responseCode": success_code(SERVICE_PAYMENT_CALCULATION),
            "responseMessage": SUCCESS_MESSAGE,
            "payments": [option_body(option) for option in options],
        }
    )


@_snap_post("qr-checkout", SERVICE_QR_CHECKOUT, QrCheckoutRequest, BnplCheckoutResponse, "BNPL QR checkout", keyed=True)
async def qr_checkout(caller: SnapSigned, once: Keyed) -> Response:
    checkout = parse_request(QrCheckoutRequest, caller.body)
    await bnpl_service.check_callback_url(checkout)  # DNS: before the unit of work
    require("bnpl", None)

    async def checkout_in(session: Session) -> Response:
        await claim_external_id(session, caller)
        tx = await bnpl_service.checkout(session, caller, checkout)
        body = {"responseCode": success_code(SERVICE_QR_CHECKOUT), "responseMessage": SUCCESS_MESSAGE}
        return JSONResponse({**body, **transaction_body(tx)})

    return await once.run(caller.merchant_id, checkout_in, scope=_CHECKOUT_SCOPE)


@_snap_post("status", SERVICE_STATUS_INQUIRY, BnplStatusInquiryRequest, BnplStatusResponse, "BNPL status inquiry")
async def status_inquiry(request: Request, caller: SnapSigned) -> JSONResponse:
    async with request.app.state.database.unit_of_work() as session:
        await claim_external_id(session, caller)  # a reused X-EXTERNAL-ID is refused before the body is read
        inquiry = parse_request(BnplStatusInquiryRequest, caller.body)
        tx = await bnpl_service.inquire(session, caller.merchant_id, inquiry)
    body = {
        "responseCode": success_code(SERVICE_STATUS_INQUIRY),
        "responseMessage": SUCCESS_MESSAGE,
        "originalPartnerReferenceNo": tx.partner_reference_no,
        "originalReferenceNo": tx.id,
        **transaction_body(tx),
        "tenure": tx.tenure or 0,  # a number, never null (issue 26): 0 while no tenure is chosen
    }
    if tx.paid_at is not None:
        body["paidTime"] = isoformat_seconds(tx.paid_at)
    return JSONResponse(body)


# --- QR image and the staging approval page (qrContent) --------------------------------

_PLAIN = wire(WireFormat.PLAIN)


@router.get("/bnpl/qr/{reference_no}.png", openapi_extra=_PLAIN, include_in_schema=False, dependencies=[PUBLIC])
async def qr_image(reference_no: str, session: ReadSession) -> Response:
    tx = await bnpl_service.get(session, reference_no)
    return Response(qr_png(page_url(tx), border=2), media_type="image/png")


@router.get(
    "/bnpl/pages/{reference_no}",
    summary="BNPL approval (qrContent): the lender's approval page",
    openapi_extra=_PLAIN,
    include_in_schema=False,
    dependencies=[PUBLIC],
    response_class=HTMLResponse,
)
async def approval_page(reference_no: str, request: Request) -> Response:
    """Hands the customer to the lender's approval page (asked outside any unit of work: it is the
    network); the simulator's is its own page, with Approve and Reject."""
    page_of("bnpl")
    async with request.app.state.database.unit_of_work(read_only=True) as session:
        application = await bnpl_service.application(session, reference_no)
    return hand_over(await bnpl_lender().checkout(application))
