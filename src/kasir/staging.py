"""docs/decisions.md §1: staging enables the dummy payment and every simulator page; production answers 404."""

from __future__ import annotations

from fastapi import Depends

from kasir.config import get_settings
from kasir.errors import NotFound


def staging_only() -> None:
    if get_settings().is_production:
        raise NotFound("Not Found")


# Route dependency of every simulator page and endpoint.
Staging = Depends(staging_only)
