"""The `/admin` API's authentication: `Authorization: Bearer <KASIR_ADMIN_TOKEN>`.

A wrong or missing token is a failed authentication of the source address (kasir.ratelimit):
past the limit that address is answered 429 (Retry-After) before the token is looked at.
"""

from __future__ import annotations

from fastapi import Request

from kasir.config import get_settings
from kasir.errors import Unauthorized
from kasir.kit.crypto import constant_time_equals
from kasir.ratelimit.service import rate_limits, source_address


async def require_admin(request: Request) -> None:
    database, address = request.app.state.database, source_address(request)
    await rate_limits.before_authentication(database, address)
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not constant_time_equals(value.strip(), get_settings().resolved_admin_token()):
        await rate_limits.failed_authentication(database, address)
        raise Unauthorized("admin token required (Authorization: Bearer <KASIR_ADMIN_TOKEN>)")
