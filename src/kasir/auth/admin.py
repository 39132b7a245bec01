"""The `/admin` API's scheme: `Authorization: Bearer <KASIR_ADMIN_TOKEN>`.

A wrong or missing token is a failed authentication of the source address (kasir.ratelimit):
past the limit that address is answered 429 (Retry-After) before the token is looked at.
"""

from __future__ import annotations

from fastapi import Depends, Request

from kasir.auth.scheme import Authenticator, FailedAuthentications, source
from kasir.config import get_settings
from kasir.errors import Unauthorized
from kasir.kit.crypto import constant_time_equals


class AdminAuthenticator(Authenticator[None]):
    scheme = "admin bearer"

    def __init__(self) -> None:
        self.rate_limit = FailedAuthentications()

    async def __call__(self, request: Request) -> None:
        database, address = source(request)
        await self.rate_limit.before(database, address)
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not constant_time_equals(value.strip(), get_settings().resolved_admin_token()):
            await self.rate_limit.failed(database, address)
            raise Unauthorized("admin token required (Authorization: Bearer <KASIR_ADMIN_TOKEN>)")


admin_bearer = AdminAuthenticator()
# `dependencies=[ADMIN]` on an admin router.
ADMIN = Depends(admin_bearer)
