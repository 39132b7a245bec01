"""interface.md endpoints 1 and 2: B2B access tokens for the payment and disbursement products."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from kasir.config import get_settings
from kasir.errors import KasirError, Unauthorized
from kasir.kit.clock import clock, isoformat_seconds
from kasir.ratelimit.service import rate_limits, source_address
from kasir.snap.codes import SERVICE_TOKEN, SUCCESS_MESSAGE, success_code
from kasir.snap.headers import check_timestamp, parse_json_body, require_headers, require_json_content_type
from kasir.snap.openapi import snap_errors, snap_header_params, snap_route
from kasir.tokens.schemas import AccessTokenRequest, AccessTokenResponse
from kasir.tokens.service import ACCESS_TOKEN_TTL_SECONDS, Product, access_token_service, parse_grant

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


async def _issue(request: Request, product: Product) -> JSONResponse:
    """The token; a refusal carries X-TIMESTAMP and X-CLIENT-KEY (when sent) as a success does (issue 26)."""
    try:
        return await _issue_token(request, product)
    except KasirError as error:
        error.headers = {**_answer_headers(request.headers.get("x-client-key")), **error.headers}
        raise


def _answer_headers(client_key: str | None) -> dict[str, str]:
    """interface.md endpoint 1: response headers X-TIMESTAMP (server time) and X-CLIENT-KEY (the request's)."""
    headers = {"X-TIMESTAMP": isoformat_seconds(clock.now())}
    if client_key is not None and client_key.strip():
        headers["X-CLIENT-KEY"] = client_key.strip()
    return headers


async def _issue_token(request: Request, product: Product) -> JSONResponse:
    database, address = request.app.state.database, source_address(request)
    await rate_limits.token_request(database, address)  # before anything is read
    headers = request.headers
    require_json_content_type(headers)
    timestamp, client_key, signature = require_headers(headers, "X-TIMESTAMP", "X-CLIENT-KEY", "X-SIGNATURE")
    check_timestamp(timestamp, get_settings().clock_skew_seconds)
    additional_info = parse_grant(parse_json_body(await request.body()))
    await rate_limits.before_token(database, address, client_key)
    try:
        token = await access_token_service.issue(
            database, product=product, client_key=client_key, timestamp=timestamp, signature=signature
        )
    except Unauthorized:
        await rate_limits.failed_authentication(database, address, client_key)
        raise
    await rate_limits.token_issued(database, client_key)
    body: dict[str, Any] = {**_SUCCESS, "accessToken": token.value, "tokenType": "Bearer", "expiresIn": _EXPIRES_IN}
    if additional_info is not None:
        body["additionalInfo"] = additional_info
    return JSONResponse(body, headers=_answer_headers(client_key))


@router.post("/auth/merchants/v1.0/access-token/b2b", summary="Access token (payment product)", **_TOKEN_ROUTE)
async def payment_access_token(request: Request) -> JSONResponse:
    return await _issue(request, Product.PAYMENT)


@router.post("/api/v1.0/access-token/b2b", summary="Access token (disbursement product)", **_TOKEN_ROUTE)
async def disbursement_access_token(request: Request) -> JSONResponse:
    return await _issue(request, Product.DISBURSEMENT)
