"""Wallet routes (docs/decisions.md §5): create-payment, create-qr, inquiry, refund, void, the QR image
and the checkout (payment_url). The dummy payment and the checkout page's Pay and Fail are the
simulator's (kasir.simulator); a deployment without a wallet issuer answers `03`
(kasir.processors.registry.ProductUnavailable).

Every API route is `WalletSigned` (Basic + x-req-signature, kasir.auth.wallet: its checks and
their codes), then checks any field against its type, length and rule (01 400).

The API routes open their unit of work themselves rather than through a function-scoped session
dependency (which costs more than their database work); it still ends (commits) before the
response is sent. The routes that create or move money are `Keyed`: their unit runs through the
idempotency room (X-Idempotency-Key, kasir.idempotency); a callback URL is checked (DNS in
production) before it opens. Inquiry only reads: its unit of work is read-only (on SQLite it
never waits for the write lock).
"""

from __future__ import annotations

from typing import Any, TypeVar

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from pydantic import BaseModel, ValidationError

from kasir.auth import PUBLIC, WalletSigned
from kasir.auth.wallet import API_VERSION
from kasir.db import Database, ReadSession, Session, WriteSession
from kasir.errors import NotFound, WireFormat, from_pydantic_errors, wire
from kasir.idempotency.service import KEY_HEADER, Keyed
from kasir.kit.qr import qr_png
from kasir.processors.calls import PendingCall
from kasir.processors.pages import hand_over
from kasir.processors.registry import page_of, require, wallet_issuer
from kasir.snap.openapi import snap_route
from kasir.wallet.schemas import (
    CreatePaymentRequest,
    InquiryRequest,
    RefundRequest,
    VoidRequest,
    WalletErrorBody,
    WalletTransactionResponse,
)
from kasir.wallet.service import wallet_service

router = APIRouter(tags=["wallet"])

Model = TypeVar("Model", bound=BaseModel)

# The page routes' unit of work, committed before the response is sent.
UnitOfWork = WriteSession


def database(request: Request) -> Database:
    """Whose `unit_of_work()` is the request's: committed when the block ends, rolled back when it raises."""
    db: Database = request.app.state.database
    return db


def parse(model: type[Model], body: dict[str, Any]) -> Model:
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        raise from_pydantic_errors(exc.errors()) from exc


_HEADERS = [
    {"name": "Authorization", "in": "header", "required": True, "schema": {"type": "string"},
     "description": "Basic base64(merchant_id:secret) or Basic base64(merchant_id:secret:hash_key)"},
    {"name": "x-req-signature", "in": "header", "required": True, "schema": {"type": "string"},
     "description": "lowercase hex sha256(hash_key + external_id + order_id)"},
    {"name": "x-version", "in": "header", "required": True, "schema": {"type": "string", "enum": [API_VERSION]}},
]  # fmt: skip
# Routes that create or move money also take X-Idempotency-Key (kasir.idempotency).
_KEYED_HEADERS = [
    *_HEADERS,
    {"name": KEY_HEADER, "in": "header", "required": False, "schema": {"type": "string", "maxLength": 255},
     "description": "Makes retries safe: the first complete answer is replayed (Idempotent-Replayed: true)"},
]  # fmt: skip
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"model": WalletTransactionResponse, "description": "`00` Success: the transaction"},
    400: {"model": WalletErrorBody, "description": "`01` Request Parameter Error: names the field and the rule"},
    401: {"model": WalletErrorBody, "description": "`04` Unauthorized Merchant"},
    404: {"model": WalletErrorBody, "description": "`02` Data Not Found"},
    409: {
        "model": WalletErrorBody,
        "description": "`03` Failed Request (the transaction's state refuses it; "
        "with Retry-After: a request with the same X-Idempotency-Key is still running)",
    },
    422: {"model": WalletErrorBody, "description": "`01`: X-Idempotency-Key reused with another body"},
    429: {
        "model": WalletErrorBody,
        "description": "`04`: too many failed authentications from this address; retry after Retry-After",
    },
    500: {
        "model": WalletErrorBody,
        "description": "`98` System Error (with Retry-After: the database or the processor is unavailable; "
        "retry after it)",
    },
}


def route_openapi(model: type[BaseModel], *, keyed: bool) -> dict[str, Any]:
    """A wallet route's OpenAPI extra: the raw-body request schema (the body is read before it is
    validated: signature first), the wallet headers and wire format. The simulator's dummy payment
    is a wallet route too (kasir.simulator.endpoints)."""
    extra = snap_route("00", model)
    extra.pop("x-snap-service-code", None)
    extra.update(wire(WireFormat.WALLET))
    extra["parameters"] = _KEYED_HEADERS if keyed else _HEADERS
    return extra


def _route(path: str, model: type[BaseModel], summary: str, *, keyed: bool = True) -> Any:
    return router.post(
        path, summary=summary, openapi_extra=route_openapi(model, keyed=keyed), responses=ERROR_RESPONSES
    )


async def _create(caller: WalletSigned, once: Keyed, *, qr: bool) -> Response:
    payment = parse(CreatePaymentRequest, caller.body)
    merchant = caller.merchant.merchant
    await wallet_service.check_callback_url(merchant, payment.callback_url)  # DNS: before the unit of work
    require("wallet", payment.payment_channel)

    async def create(session: Session) -> Response:
        tx = await wallet_service.create_payment(session, merchant, payment, qr=qr)
        return JSONResponse(await wallet_service.describe(session, tx))

    return await once.run(caller.merchant_id, create)


@_route("/ewallet/v2/create-payment", CreatePaymentRequest, "Create a wallet payment (checkout page)")
async def create_payment(caller: WalletSigned, once: Keyed) -> Response:
    return await _create(caller, once, qr=False)


@_route("/ewallet/v2/create-qr", CreatePaymentRequest, "Create a dynamic QRIS payment")
async def create_qr(caller: WalletSigned, once: Keyed) -> Response:
    return await _create(caller, once, qr=True)


@_route("/ewallet/v2/inquiry", InquiryRequest, "Current state of a wallet transaction", keyed=False)
async def inquiry(request: Request, caller: WalletSigned) -> JSONResponse:
    reference = parse(InquiryRequest, caller.body)
    async with database(request).unit_of_work(read_only=True) as session:
        tx = await wallet_service.inquire(session, caller.merchant.merchant, reference)
        return JSONResponse(await wallet_service.describe(session, tx))


@_route("/ewallet/v2/refund", RefundRequest, "Refund a paid wallet transaction (partial allowed)")
async def refund(caller: WalletSigned, once: Keyed) -> Response:
    refund_request = parse(RefundRequest, caller.body)

    async def refund_in(session: Session) -> PendingCall:
        return await wallet_service.refund_payment(session, caller.merchant.merchant, refund_request)

    return await once.run(caller.merchant_id, refund_in)


@_route("/ewallet/v2/void", VoidRequest, "Void a wallet transaction paid today (Asia/Jakarta)")
async def void(caller: WalletSigned, once: Keyed) -> Response:
    void_request = parse(VoidRequest, caller.body)

    async def void_in(session: Session) -> PendingCall:
        return await wallet_service.void_payment(session, caller.merchant.merchant, void_request)

    return await once.run(caller.merchant_id, void_in)


# --- QR image and the staging checkout page (payment_url) ------------------------------

_PLAIN = wire(WireFormat.PLAIN)


@router.get("/ewallet/qr/{transaction_id}.png", openapi_extra=_PLAIN, include_in_schema=False, dependencies=[PUBLIC])
async def qr_image(transaction_id: str, session: ReadSession) -> Response:
    tx = await wallet_service.get(session, transaction_id)
    if tx.qr_string is None:
        raise NotFound("Not Found")
    return Response(qr_png(tx.qr_string), media_type="image/png")


@router.get(
    "/ewallet/pages/{transaction_id}",
    summary="Wallet checkout (payment_url): the issuer's checkout",
    openapi_extra=_PLAIN,
    include_in_schema=False,
    dependencies=[PUBLIC],
    response_class=HTMLResponse,
)
async def checkout_page(transaction_id: str, request: Request) -> Response:
    """Hands the customer to the issuer's checkout (asked outside any unit of work: it is the network);
    the simulator's is its own page, with Pay and Fail."""
    page_of("wallet")
    async with database(request).unit_of_work(read_only=True) as session:
        payment = await wallet_service.checkout(session, transaction_id)
    return hand_over(await wallet_issuer(payment.channel).create(payment))
