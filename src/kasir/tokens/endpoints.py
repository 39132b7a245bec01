"""interface.md endpoints 1 and 2: B2B access tokens for the payment and disbursement products.

Endpoint 1 is also served under SNAP's generic path `/v1.0/access-token/b2b` (docs/decisions.md §12.2), by
the same scheme and answer, so a SNAP library that only takes a base URL works.

The request is proven, counted and the token minted by the scheme (kasir.auth.access_token); the
route answers it.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from kasir.auth import DisbursementTokenRequest, PaymentTokenRequest
from kasir.auth.access_token import TokenRequest
from kasir.snap.codes import SERVICE_TOKEN, SUCCESS_MESSAGE, success_code
from kasir.snap.openapi import snap_errors, snap_header_params, snap_route
from kasir.tokens.schemas import AccessTokenRequest, AccessTokenResponse
from kasir.tokens.service import ACCESS_TOKEN_TTL_SECONDS

router = APIRouter(tags=["access token"])

# The parts of every token response that never change, made once.
_SUCCESS = {"responseCode": success_code(SERVICE_TOKEN), "responseMessage": SUCCESS_MESSAGE}
_EXPIRES_IN = str(ACCESS_TOKEN_TTL_SECONDS)

_TOKEN_ROUTE: dict[str, Any] = {
    "response_model": AccessTokenResponse,
    "responses": {
        200: {
            "description": "The access token",
            "headers": {
                "X-TIMESTAMP": {"schema": {"type": "string"}, "description": "Server time, ISO 8601 with offset"},
                "X-CLIENT-KEY": {"schema": {"type": "string"}, "description": "Echo of the request's client key"},
            },
        },
        **snap_errors(400, 401, 429, 500),
    },
    "openapi_extra": {
        **snap_route(SERVICE_TOKEN, AccessTokenRequest),
        "parameters": snap_header_params("X-TIMESTAMP", "X-CLIENT-KEY", "X-SIGNATURE"),
    },
}


def _answer(proven: TokenRequest) -> JSONResponse:
    token = proven.token
    body: dict[str, Any] = {**_SUCCESS, "accessToken": token.value, "tokenType": "Bearer", "expiresIn": _EXPIRES_IN}
    if proven.additional_info is not None:
        body["additionalInfo"] = proven.additional_info
    return JSONResponse(body, headers=proven.answer_headers())


@router.post("/auth/merchants/v1.0/access-token/b2b", summary="Access token (payment product)", **_TOKEN_ROUTE)
async def payment_access_token(proven: PaymentTokenRequest) -> JSONResponse:
    return _answer(proven)


@router.post(
    "/v1.0/access-token/b2b",
    summary="Access token (payment product, SNAP's generic path)",
    description="The same endpoint as `POST /auth/merchants/v1.0/access-token/b2b`: headers, body, answers, codes "
    "and rate limits; it issues a payment-product token.",
    **_TOKEN_ROUTE,
)
async def payment_access_token_generic(proven: PaymentTokenRequest) -> JSONResponse:
    return _answer(proven)


@router.post("/api/v1.0/access-token/b2b", summary="Access token (disbursement product)", **_TOKEN_ROUTE)
async def disbursement_access_token(proven: DisbursementTokenRequest) -> JSONResponse:
    return _answer(proven)
