"""What every HTML page Kasir serves outside the console shares: its response headers and form tokens.

A Content-Security-Policy without inline scripts (scripts are files the package serves), no
framing by another site (clickjacking), no referrer, and never cached (the pages show payment data).
"""

from __future__ import annotations

import hmac
from functools import lru_cache

from fastapi import Request
from fastapi.responses import HTMLResponse

from kasir.config import get_settings
from kasir.kit.crypto import constant_time_equals, derive_key

PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
        "frame-ancestors 'none'; base-uri 'none'; object-src 'none'"
    ),
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def html_page(content: str, status_code: int = 200) -> HTMLResponse:
    return HTMLResponse(content, status_code=status_code, headers=PAGE_HEADERS)


@lru_cache(maxsize=4)
def _form_key(secret_key: str) -> bytes:
    return derive_key(secret_key, "kasir/page-form")


def form_token(form: str, subject: str) -> str:
    """The CSRF token of `form` (such as `wallet-pay`) acting on `subject` (a transaction id): an HMAC
    with the service's key, so any process checks a token any process made, and another site cannot
    make one."""
    key = _form_key(get_settings().resolved_secret_key())
    return hmac.digest(key, f"{form}:{subject}".encode(), "sha256").hex()


def check_form_token(form: str, subject: str, token: str | None) -> bool:
    """Compared in constant time."""
    return token is not None and constant_time_equals(form_token(form, subject), token)


async def form_fields(request: Request) -> dict[str, str]:
    """A page form's text fields (files, never sent by Kasir's pages, are left out)."""
    form = await request.form()
    return {name: value for name, value in form.items() if isinstance(value, str)}
