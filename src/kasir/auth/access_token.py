"""Access tokens: asking for one (SNAP asymmetric over X-CLIENT-KEY|X-TIMESTAMP), and presenting one.

    token_request            interface.md endpoints 1 and 2: the client proves its RSA key; every
                             request to a token path is counted per source address before anything
                             is read, tokens issued per client, failures per client and address
    AccessTokenAuthenticator `Authorization: Bearer <token>` of one product (kasir.tokens.service);
                             a forged, expired or other product's token is 401xx01 Invalid Token (B2B),
                             counted as a failed authentication of the source address

A token request's refusal carries X-TIMESTAMP and X-CLIENT-KEY (when sent) as a success does (issue 26).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import Request

from kasir.auth.scheme import Authenticator, FailedAuthentications, source
from kasir.config import get_settings
from kasir.db import Database
from kasir.errors import InvalidMandatoryField, InvalidToken, KasirError, Unauthorized
from kasir.kit.clock import clock, isoformat_seconds
from kasir.ratelimit.service import rate_limits
from kasir.snap.headers import check_timestamp, parse_json_body, require_headers, require_json_content_type
from kasir.tokens.service import AccessToken, Product, access_token_service, parse_grant, read_access_token


def bearer_token(request: Request) -> str | None:
    """The value of `Authorization: Bearer <value>`, None without the header; InvalidToken for another form."""
    authorization = request.headers.get("authorization")
    if authorization is None:
        return None
    scheme, _, value = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        raise InvalidToken()
    return value.strip()


class AccessTokenAuthenticator(Authenticator[AccessToken]):
    """The request's valid token of `product`, else `401xx01 Invalid Token (B2B)`; without one, 400xx02."""

    scheme = "access token"

    def __init__(self, product: Product) -> None:
        self.product = product
        self.rate_limit = FailedAuthentications()

    async def __call__(self, request: Request) -> AccessToken:
        database, address = source(request)
        await self.rate_limit.before(database, address)
        try:
            value = bearer_token(request)
            if value is None:
                raise InvalidMandatoryField("Authorization")
            return read_access_token(value, self.product)
        except Unauthorized:
            await self.rate_limit.failed(database, address)
            raise


class TokenLimits:
    """The token paths' own limits (kasir.ratelimit): requests per address, tokens per client, and
    the failed-authentication lockout of the client from that address."""

    async def request(self, database: Database, address: str) -> None:
        await rate_limits.token_request(database, address)

    async def before(self, database: Database, address: str, client_key: str) -> None:
        await rate_limits.before_token(database, address, client_key)

    async def failed(self, database: Database, address: str, client_key: str) -> None:
        await rate_limits.failed_authentication(database, address, client_key)

    async def issued(self, database: Database, client_key: str) -> None:
        await rate_limits.token_issued(database, client_key)


@dataclass(frozen=True, slots=True)
class TokenRequest:
    """A proven token request: its client's new token of the route's product, and the grant's additionalInfo."""

    token: AccessToken
    client_key: str
    additional_info: dict[str, Any] | None

    def answer_headers(self) -> dict[str, str]:
        return answer_headers(self.client_key)


def answer_headers(client_key: str | None) -> dict[str, str]:
    """interface.md endpoint 1: response headers X-TIMESTAMP (server time) and X-CLIENT-KEY (the request's)."""
    headers = {"X-TIMESTAMP": isoformat_seconds(clock.now())}
    if client_key is not None and client_key.strip():
        headers["X-CLIENT-KEY"] = client_key.strip()
    return headers


class TokenRequestAuthenticator(Authenticator[TokenRequest]):
    """interface.md Authentication 1: SHA256withRSA over `X-CLIENT-KEY|X-TIMESTAMP`; the token is minted here."""

    scheme = "snap asymmetric (token request)"

    def __init__(self, product: Product) -> None:
        self.product = product
        self.rate_limit = TokenLimits()

    async def __call__(self, request: Request) -> TokenRequest:
        try:
            return await self._prove(request)
        except KasirError as error:
            error.headers = {**answer_headers(request.headers.get("x-client-key")), **error.headers}
            raise

    async def _prove(self, request: Request) -> TokenRequest:
        database, address = source(request)
        await self.rate_limit.request(database, address)  # before anything is read
        headers = request.headers
        require_json_content_type(headers)
        timestamp, client_key, signature = require_headers(headers, "X-TIMESTAMP", "X-CLIENT-KEY", "X-SIGNATURE")
        check_timestamp(timestamp, get_settings().clock_skew_seconds)
        additional_info = parse_grant(parse_json_body(await request.body()))
        await self.rate_limit.before(database, address, client_key)
        try:
            token = await access_token_service.issue(
                database, product=self.product, client_key=client_key, timestamp=timestamp, signature=signature
            )
        except Unauthorized:
            await self.rate_limit.failed(database, address, client_key)
            raise
        await self.rate_limit.issued(database, client_key)
        return TokenRequest(token, client_key, additional_info)
