"""Wallet routes (docs/decisions.md §5): create-payment, create-qr, inquiry, refund, void, the QR image
and the checkout (payment_url). The dummy payment and the checkout page's Pay and Fail are the
simulator's (kasir.simulator); a deployment without a wallet issuer answers `03`
(kasir.processors.registry.ProductUnavailable).

Every API route checks, in order (each failure in the wallet format, docs/decisions.md §4):

    x-version missing / not v3                        01  400
    Content-Type not application/json                 01  400
    Authorization not valid Basic credentials         04  401
    x-req-signature missing                           04  401 (as a wrong one, issue 26)
    body not a JSON object, external_id / order_id
      missing (they are signed)                       01  400
    x-req-signature ≠ sha256(hash_key + external_id + order_id)   04  401
    too many failed authentications (Basic or
      x-req-signature) from this address          04  429 Retry-After (kasir.ratelimit)
    any field against its type, length and rule       01  400

The API routes verify the request and open their unit of work themselves instead of through
FastAPI dependencies: create-payment and inquiry run on every payment, and a dependency tree
with a function-scoped session costs more than their database work. The unit of work still
ends (commits) before the response is sent. The routes that create or move money run it
through the idempotency room (X-Idempotency-Key, kasir.idempotency); a callback URL is checked
(DNS in production) before it opens. Inquiry only reads: its unit of work is read-only (on
SQLite it never waits for the write lock).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from pydantic import BaseModel, ValidationError

from kasir.callbacks.signing import x_req_signature
from kasir.db import Database, ReadSession, Session, WriteSession
from kasir.errors import (
    BadRequest,
    InvalidFieldFormat,
    InvalidMandatoryField,
    NotFound,
    Unauthorized,
    WireFormat,
    from_pydantic_errors,
    wire,
)
from kasir.idempotency.service import KEY_HEADER, idempotency_key, run_once
from kasir.kit.crypto import constant_time_equals
from kasir.kit.qr import qr_png
from kasir.merchants.basic_auth import BasicCaller, authenticate_basic_in
from kasir.merchants.service import CredentialKind
from kasir.processors.calls import PendingCall
from kasir.processors.pages import hand_over
from kasir.processors.registry import page_of, require, wallet_issuer
from kasir.ratelimit.service import rate_limits, source_address
from kasir.snap.headers import parse_json_body
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
API_VERSION = "v3"  # interface.md: x-version v3 on a v2 path

# The page routes' unit of work, committed before the response is sent (see bnpl/security.py).
UnitOfWork = WriteSession


@dataclass(frozen=True, slots=True)
class WalletCaller:
    """A verified wallet request: the merchant, its JSON body (an object), and the body's bytes."""

    merchant: BasicCaller
    body: dict[str, Any]
    raw: bytes


def _signed_field(body: dict[str, Any], name: str) -> str:
    value = body.get(name)
    if value is None or (isinstance(value, str) and not value.strip()):
        raise InvalidMandatoryField(name)
    if not isinstance(value, str):
        raise InvalidFieldFormat(name, "must be a string")
    return value


async def verify_wallet_request(request: Request) -> WalletCaller:
    headers = request.headers
    version = headers.get("x-version")
    if version is None or not version.strip():
        raise InvalidMandatoryField("x-version")
    if version.strip() != API_VERSION:
        raise InvalidFieldFormat("x-version", f"must be {API_VERSION}")
    content_type = headers.get("content-type", "")
    if content_type.split(";", 1)[0].strip().lower() != "application/json":
        raise InvalidFieldFormat("Content-Type", "must be application/json")
    # A cached merchant needs no database; otherwise a read-only unit of work of its own.
    address = source_address(request)
    caller = await authenticate_basic_in(database(request), headers.get("authorization"), address=address)
    signature = headers.get("x-req-signature")
    if signature is None or not signature.strip():
        # The same code as a wrong signature (README), not counted as a failed proof of identity.
        raise Unauthorized("x-req-signature is missing", field="x-req-signature")
    raw = await request.body()
    body = parse_json_body(raw)
    if not isinstance(body, dict):
        raise BadRequest("body must be a JSON object", field="body")
    external_id, order_id = _signed_field(body, "external_id"), _signed_field(body, "order_id")
    if not _signed_by_a_hash_key(caller, signature.strip(), external_id, order_id):
        await rate_limits.failed_authentication(database(request), address, caller.merchant.id)
        raise Unauthorized("x-req-signature does not match sha256(hash_key + external_id + order_id)")
    return WalletCaller(caller, body, raw)


def _signed_by_a_hash_key(caller: BasicCaller, signature: str, external_id: str, order_id: str) -> bool:
    """The current hash key, or one replaced within its grace period (the console's rotation)."""
    hash_keys = [caller.secrets.hash_key, *caller.secrets.previous(CredentialKind.HASH_KEY)]
    return any(constant_time_equals(signature, x_req_signature(key, external_id, order_id)) for key in hash_keys)


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
    503: {"model": WalletErrorBody, "description": "`98`: the database is unavailable; retry after Retry-After"},
    500: {"model": WalletErrorBody, "description": "`98` System Error"},
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


async def _create(request: Request, *, qr: bool) -> Response:
    caller = await verify_wallet_request(request)
    key = idempotency_key(request)
    payment = parse(CreatePaymentRequest, caller.body)
    merchant = caller.merchant.merchant
    await wallet_service.check_callback_url(merchant, payment.callback_url)  # DNS: before the unit of work
    require("wallet", payment.payment_channel)

    async def create(session: Session) -> Response:
        tx = await wallet_service.create_payment(session, merchant, payment, qr=qr)
        return JSONResponse(await wallet_service.describe(session, tx))

    return await _run_once(request, key, caller, create)


@_route("/ewallet/v2/create-payment", CreatePaymentRequest, "Create a wallet payment (checkout page)")
async def create_payment(request: Request) -> Response:
    return await _create(request, qr=False)


@_route("/ewallet/v2/create-qr", CreatePaymentRequest, "Create a dynamic QRIS payment")
async def create_qr(request: Request) -> Response:
    return await _create(request, qr=True)


@_route("/ewallet/v2/inquiry", InquiryRequest, "Current state of a wallet transaction", keyed=False)
async def inquiry(request: Request) -> JSONResponse:
    caller = await verify_wallet_request(request)
    reference = parse(InquiryRequest, caller.body)
    async with database(request).unit_of_work(read_only=True) as session:
        tx = await wallet_service.inquire(session, caller.merchant.merchant, reference)
        return JSONResponse(await wallet_service.describe(session, tx))


@_route("/ewallet/v2/refund", RefundRequest, "Refund a paid wallet transaction (partial allowed)")
async def refund(request: Request) -> Response:
    caller = await verify_wallet_request(request)
    key = idempotency_key(request)
    refund_request = parse(RefundRequest, caller.body)

    async def refund_in(session: Session) -> PendingCall:
        return await wallet_service.refund_payment(session, caller.merchant.merchant, refund_request)

    return await _run_once(request, key, caller, refund_in)


@_route("/ewallet/v2/void", VoidRequest, "Void a wallet transaction paid today (Asia/Jakarta)")
async def void(request: Request) -> Response:
    caller = await verify_wallet_request(request)
    key = idempotency_key(request)
    void_request = parse(VoidRequest, caller.body)

    async def void_in(session: Session) -> PendingCall:
        return await wallet_service.void_payment(session, caller.merchant.merchant, void_request)

    return await _run_once(request, key, caller, void_in)


async def _run_once(
    request: Request,
    key: str | None,
    caller: WalletCaller,
    handler: Callable[[Session], Awaitable[Response | PendingCall]],
) -> Response:
    """The route's unit of work, once per X-Idempotency-Key (kasir.idempotency), scoped by its path."""
    scope = f"POST {request.scope['path']}"  # the route's own path (static): request.url would parse it all
    merchant_id = caller.merchant.merchant.id
    return await run_once(
        request, database(request), key, merchant_id=merchant_id, scope=scope, body=caller.raw, handler=handler
    )


# --- QR image and the staging checkout page (payment_url) ------------------------------

_PLAIN = wire(WireFormat.PLAIN)


@router.get("/ewallet/qr/{transaction_id}.png", openapi_extra=_PLAIN, include_in_schema=False)
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
    response_class=HTMLResponse,
)
async def checkout_page(transaction_id: str, request: Request) -> Response:
    """Hands the customer to the issuer's checkout (asked outside any unit of work: it is the network);
    the simulator's is its own page, with Pay and Fail."""
    page_of("wallet")
    async with database(request).unit_of_work(read_only=True) as session:
        payment = await wallet_service.checkout(session, transaction_id)
    return hand_over(await wallet_issuer(payment.channel).create(payment))
