"""The `/admin` API's authentication: `Authorization: Bearer <KASIR_ADMIN_TOKEN>`."""

from __future__ import annotations

from fastapi import Request

from kasir.config import get_settings
from kasir.errors import Unauthorized
from kasir.kit.crypto import constant_time_equals


async def require_admin(request: Request) -> None:
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not constant_time_equals(value.strip(), get_settings().resolved_admin_token()):
        raise Unauthorized("admin token required (Authorization: Bearer <KASIR_ADMIN_TOKEN>)")
