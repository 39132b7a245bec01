"""The route of the provider SDK's card inquiry (kasir.card.inquiry, docs/decisions.md §12.1).

    POST /card-v2/inquiry   Basic + x-req-signature over external_id + order_id, x-version v3 (`WalletSigned`,
                            as the dialect's charges), then the wallet error format; one read-only unit

It moves no money: no X-Idempotency-Key. A `sub-merchant-id` sent with it does not narrow the look-up (the
SDK never sends one on inquiry).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError

from kasir.auth import WalletSigned
from kasir.card.inquiry import INQUIRY_PATH, CardInquiryRequest, CardInquiryResponse, inquire
from kasir.errors import WireFormat, from_pydantic_errors, wire
from kasir.snap.openapi import snap_route
from kasir.wallet.schemas import WalletErrorBody

inquiry_router = APIRouter(tags=["card (provider SDK dialect)"])

_HEADERS = ("Authorization", "x-req-signature")
_OPENAPI: dict[str, Any] = {
    **wire(WireFormat.WALLET),
    # The body is read raw (x-req-signature first); its schema is documented from the model.
    "requestBody": snap_route("00", CardInquiryRequest)["requestBody"],
    "parameters": [{"name": name, "in": "header", "required": True, "schema": {"type": "string"}} for name in _HEADERS]
    + [{"name": "x-version", "in": "header", "required": True, "schema": {"type": "string", "enum": ["v3"]}}],
}
_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": WalletErrorBody, "description": "`01`: names the missing or wrong field"},
    401: {"model": WalletErrorBody, "description": "`04`: credentials, x-req-signature or a disabled merchant"},
    404: {"model": WalletErrorBody, "description": "`02` Data Not Found: no card order of the merchant by these ids"},
    429: {"model": WalletErrorBody, "description": "`04`: too many failed authentications; retry after Retry-After"},
    500: {"model": WalletErrorBody, "description": "`98` System Error (with Retry-After: unavailable; retry after it)"},
}


@inquiry_router.post(
    INQUIRY_PATH,
    summary="Card inquiry (provider SDK dialect)",
    openapi_extra=_OPENAPI,
    response_model=CardInquiryResponse,
    responses=_ERRORS,
)
async def inquiry(request: Request, caller: WalletSigned) -> Response:
    try:
        reference = CardInquiryRequest.model_validate(caller.body)
    except ValidationError as exc:
        raise from_pydantic_errors(exc.errors(include_input=False)) from None
    async with request.app.state.database.unit_of_work(read_only=True) as session:
        return JSONResponse(await inquire(session, caller.merchant_id, reference))
