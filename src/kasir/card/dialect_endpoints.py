"""Routes of the provider SDK's snake_case card dialect (kasir.card.dialect).

    POST /card-v2/v1/charge           shared with the camelCase charge: a body with `external_id`,
                                      `payment_details` or `card_details` is the dialect's (not a header)
    POST /card-v2/v1/charge-direct    the outcome at once; no 3-D Secure
    POST /card-v2/v2/charge-direct    the same, `card_details.card_cvn` optional

Every check and answer is the wallet API's (`WalletSigned`, kasir.auth.wallet, then the wallet
error format), and the charge is the camelCase charge's: the card service in one unit of work
through the idempotency room (`Keyed`), an X-Idempotency-Key honoured when sent. A stored card and a sub-merchant
are looked up before that unit, in a read-only one, like the merchant's credentials.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from kasir.auth import WalletCaller, WalletSigned
from kasir.card.dialect import (
    DIALECT_ANSWER,
    DIALECT_VERSION,
    DialectChargeRequest,
    DialectDuplicate,
    UnknownStoredCard,
    UnknownSubMerchant,
    answer_details,
    parse_dialect,
    snake_field,
    stored_card,
)
from kasir.card.repository import card_repository
from kasir.card.service import DuplicateOrder, card_service
from kasir.db import Session
from kasir.errors import WireFormat, wire
from kasir.idempotency.service import KEY_HEADER, Keyed, Once
from kasir.kit import json_input
from kasir.kit.clock import clock
from kasir.merchants.service import merchant_service
from kasir.processors.calls import PendingCall
from kasir.snap.openapi import one_of, snap_route
from kasir.wallet.schemas import WalletErrorBody

dialect_router = APIRouter(tags=["card (provider SDK dialect)"])

DIRECT_V1 = "/card-v2/v1/charge-direct"
DIRECT_V2 = "/card-v2/v2/charge-direct"
SUB_MERCHANT_HEADER = "sub-merchant-id"
RESPONSE_TYPE_HEADER = "response-type"
_SNAKE_KEYS = ("external_id", "payment_details", "card_details")
_SNAKE_KEY_BYTES = tuple(f'"{key}"'.encode() for key in _SNAKE_KEYS)


def speaks_dialect(request: Request, body: bytes) -> bool:
    """Whether a request to the charge's path is the SDK's: docs/decisions.md §12.3, the body decides (a JSON
    object with one of the dialect's snake_case keys), not the headers: a camelCase charge that also carries
    `x-version` or `x-req-signature` is Kasir's own card API."""
    if not any(key in body for key in _SNAKE_KEY_BYTES):
        return False  # the camelCase charge's path: no parsing here
    try:
        data = json_input.loads(body)  # the strict reader: a body nested past its depth is refused, never a 500
    except json_input.UnsafeJson:
        return True  # JSON with the dialect's keys that the dialect's own reader refuses, in its format
    except ValueError:
        return False  # not JSON: Kasir's own card API refuses it in its format
    return isinstance(data, dict) and any(key in data for key in _SNAKE_KEYS)


async def dialect_charge(
    request: Request, verified: WalletCaller, once: Once, answer_kind: str, *, scope: str, cvn_required: bool
) -> Response:
    """The charge of a verified dialect request (x-version, Content-Type, Basic, x-req-signature checked)."""
    caller = verified.merchant
    merchant_id = caller.merchant.id
    charge = parse_dialect(verified.body, now=clock.local_now(), cvn_required=cvn_required)
    sub_merchant_id = (request.headers.get(SUB_MERCHANT_HEADER) or "").strip() or None
    card = charge.card
    database = request.app.state.database
    if sub_merchant_id is not None or charge.stored_token is not None:
        async with database.unit_of_work(read_only=True) as session:
            if sub_merchant_id is not None and not await merchant_service.has_sub_merchant(
                session, merchant_id, sub_merchant_id
            ):
                raise UnknownSubMerchant()
            if charge.stored_token is not None:
                stored = await card_repository.stored_card(session, merchant_id, charge.stored_token)
                if stored is None:
                    raise UnknownStoredCard()
                card = stored_card(stored, charge.stored_cvn, now=clock.local_now())
    assert card is not None
    await card_service.check_callback_url(caller, charge.request)
    card_service.require_processor(charge.request)
    # A stored card is charged again under its own token; a new card is stored when asked.
    save_card = charge.store_token and card.stored_token is None

    async def charge_in(session: Session) -> Response | PendingCall:
        try:
            outcome = await card_service.charge(
                session,
                caller,
                charge.request,
                card,
                save_card=save_card,
                dialect=DIALECT_VERSION,
                sub_merchant_id=sub_merchant_id,
                dialect_details=charge.recorded,
            )
        except DuplicateOrder as error:
            raise DialectDuplicate(snake_field(error.field)) from None
        # Always an attempt held for the acquirer (the dialect always sends a card): once it has
        # answered, the card service answers in the dialect (kasir.card.processing.CardChargeAction).
        assert isinstance(outcome, PendingCall)
        outcome.call.details[DIALECT_ANSWER] = answer_details(answer_kind, card.stored_token)
        return outcome

    return await once.run(merchant_id, charge_in, scope=scope)


# --- the direct charges ----------------------------------------------------------------------


class TransactionData(BaseModel):
    external_id: str
    receipt_no: str
    order_id: str
    transaction_id: str
    approval_code: str | None = None


class DirectData(BaseModel):
    token: str | None
    status: str
    transaction_code: str
    transaction_description: str
    transaction_data: TransactionData


class DirectResponse(BaseModel):
    response_code: str
    response_message: str
    data: DirectData


class DialectChargePage(BaseModel):
    html: str = Field(description="A page that sends the customer on to the payment step as it loads (the default)")


class DialectChargeLink(BaseModel):
    link: str = Field(description="The payment step's URL (with the header `response-type: url`)")


class DialectChargeResponse(BaseModel):
    """The SDK dialect's 3-D Secure charge (`POST /card-v2/v1/charge` with a snake_case body): `response_code`
    `00` and where the customer goes next."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "response_code": "00",
                    "response_message": "Success",
                    "data": {"link": "https://kasir.example/card/pages/CARD2611230001ABCD"},
                }
            ]
        }
    )

    response_code: str = Field(examples=["00"])
    response_message: str = Field(examples=["Success"])
    data: Annotated[DialectChargePage | DialectChargeLink, Field(json_schema_extra=one_of)]


# The dialect's headers on the charge it shares with the camelCase API: there, the body decides which API a
# request speaks (docs/decisions.md §12.3), so they are optional in the document and required by the dialect.
_FOR_THE_DIALECT = "The provider SDK's dialect (a snake_case body) only, where it is required: "
DIALECT_CHARGE_HEADERS: list[dict[str, Any]] = [
    {"name": "x-req-signature", "in": "header", "required": False, "schema": {"type": "string"},
     "description": _FOR_THE_DIALECT + "lowercase hex sha256(hash_key + external_id + order_id)"},
    {"name": "x-version", "in": "header", "required": False, "schema": {"type": "string"},
     "description": _FOR_THE_DIALECT + "`v3`"},
    {"name": SUB_MERCHANT_HEADER, "in": "header", "required": False, "schema": {"type": "string"},
     "description": "The provider SDK's dialect only: one of the merchant's sub-merchant ids"},
    {"name": RESPONSE_TYPE_HEADER, "in": "header", "required": False, "schema": {"type": "string"},
     "description": "The provider SDK's dialect only: `html` (the default: `data.html`) or `url` (`data.link`)"},
]  # fmt: skip


def _openapi() -> dict[str, Any]:
    headers = ("Authorization", "x-req-signature", "x-version")
    return {
        **wire(WireFormat.WALLET),
        # The body is read raw (x-req-signature first); its schema is documented from the model.
        "requestBody": snap_route("00", DialectChargeRequest)["requestBody"],
        "parameters": [
            *({"name": name, "in": "header", "required": True, "schema": {"type": "string"}} for name in headers),
            {"name": SUB_MERCHANT_HEADER, "in": "header", "required": False, "schema": {"type": "string"}},
            {"name": KEY_HEADER, "in": "header", "required": False, "schema": {"type": "string", "maxLength": 255}},
        ],
    }


_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": WalletErrorBody, "description": "`01`: names the field and the reason"},
    401: {"model": WalletErrorBody, "description": "`04`: credentials, x-req-signature or a disabled merchant"},
    403: {"model": WalletErrorBody, "description": "`04`: sub-merchant-id is not one of the merchant's"},
    409: {
        "model": WalletErrorBody,
        "description": "`03`: external_id or order_id already used (with Retry-After: a request with the same "
        "X-Idempotency-Key is still running)",
    },
    422: {"model": WalletErrorBody, "description": "`01`: X-Idempotency-Key reused with another body"},
    429: {"model": WalletErrorBody, "description": "`04`: too many failed authentications; retry after Retry-After"},
    500: {
        "model": WalletErrorBody,
        "description": "`98` System Error (with Retry-After: unavailable; retry after it)",
    },
}


@dialect_router.post(
    DIRECT_V1,
    summary="Card charge, direct (provider SDK dialect)",
    openapi_extra=_openapi(),
    response_model=DirectResponse,
    responses=_ERRORS,
)
async def charge_direct(request: Request, caller: WalletSigned, once: Keyed) -> Response:
    return await dialect_charge(request, caller, once, "direct", scope=f"POST {DIRECT_V1}", cvn_required=True)


@dialect_router.post(
    DIRECT_V2,
    summary="Card charge, direct, CVN optional (provider SDK dialect)",
    openapi_extra=_openapi(),
    response_model=DirectResponse,
    responses=_ERRORS,
)
async def charge_direct_v2(request: Request, caller: WalletSigned, once: Keyed) -> Response:
    return await dialect_charge(request, caller, once, "direct", scope=f"POST {DIRECT_V2}", cvn_required=False)
