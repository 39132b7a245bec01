"""`Authorization: Bearer` verification for the endpoints that take an access token."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request

from kasir.errors import InvalidMandatoryField, InvalidToken
from kasir.tokens.service import AccessToken, Product, read_access_token


def bearer_token(request: Request) -> str | None:
    authorization = request.headers.get("authorization")
    if authorization is None:
        return None
    scheme, _, value = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        raise InvalidToken()
    return value.strip()


def require_access_token(product: Product) -> Callable[[Request], Coroutine[Any, Any, AccessToken]]:
    """Dependency: the request's valid token of `product`, else `401xx01 Invalid Token (B2B)`."""

    async def dependency(request: Request) -> AccessToken:
        value = bearer_token(request)
        if value is None:
            raise InvalidMandatoryField("Authorization")
        return read_access_token(value, product)

    return dependency
