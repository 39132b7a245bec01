"""What every console route shares: its templates, its security headers, its HTML errors, who is asking.

`ConsoleRoute` wraps each route's handler (its dependencies included): every response gets the
security headers below, and a KasirError becomes an HTML page (or, when the session is missing
or ended, a redirect to the sign-in page) instead of one of the API's JSON wire formats.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.routing import APIRoute

from kasir.auth.console import COOKIE
from kasir.console.charts import bar_chart
from kasir.console.format import jakarta_time, state_words
from kasir.console.service import SignInRequired, Viewer
from kasir.db import Database
from kasir.errors import KasirError
from kasir.kit.money import rupiah
from kasir.kit.templates import templates

log = logging.getLogger("kasir.console")

SIGN_IN_CSRF_COOKIE = "kasir_console_signin"
STATIC = Path(__file__).parent / "static"

SECURITY_HEADERS = {
    # No inline script or style anywhere in the console: everything comes from /console/static.
    "content-security-policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"
    ),
    "x-frame-options": "DENY",
    "referrer-policy": "same-origin",
    "permissions-policy": "camera=(), microphone=(), geolocation=()",
}

templates.filters["jakarta"] = jakarta_time
templates.globals["bar_chart"] = bar_chart
templates.globals["state_words"] = state_words


def audit_changes(event: Any) -> list[tuple[str, str | None, str]]:
    """(key, before or None, after) of what an audit event changed: only the keys whose value moved."""
    import json

    before = json.loads(event.before) if event.before else None
    after = json.loads(event.after) if event.after else {}
    lines = []
    for key in sorted(set(after) | set(before or {})):
        old = None if before is None else before.get(key)
        new = after.get(key)
        if before is not None and old == new:
            continue
        lines.append((key, None if before is None else _text(old, key), _text(new, key)))
    return lines


def _text(value: Any, key: str = "") -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if key.endswith("amount") and isinstance(value, int | str) and str(value).isdigit():
        return rupiah(int(value))  # refund_amount, refunded_amount: money, as everywhere in the console
    return str(value)


templates.filters["changes"] = audit_changes


def render(
    request: Request, name: str, status_code: int = 200, viewer: Viewer | None = None, **context: Any
) -> HTMLResponse:
    html = templates.get_template(f"console/{name}").render(
        request=request, viewer=viewer, path=request.url.path, **context
    )
    return HTMLResponse(html, status_code=status_code, headers={"cache-control": "no-store"})


def database(request: Request) -> Database:
    db: Database = request.app.state.database
    return db


class ConsoleRoute(APIRoute):
    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def console_handler(request: Request) -> Response:
            try:
                response = await handler(request)
            except SignInRequired as exc:
                response = _sign_in_again(request, exc)
            except KasirError as exc:
                response = render(
                    request,
                    "error.html",
                    exc.http_status,
                    request.state.__dict__.get("viewer"),
                    message=exc.message,
                    status=exc.http_status,
                )
            except RequestValidationError as exc:
                fields = ", ".join(".".join(str(p) for p in e["loc"][1:]) for e in exc.errors())
                response = render(
                    request,
                    "error.html",
                    400,
                    request.state.__dict__.get("viewer"),
                    message=f"Please check: {fields}.",
                    status=400,
                )
            response.headers.update(SECURITY_HEADERS)
            return response

        return console_handler


def _sign_in_again(request: Request, exc: SignInRequired) -> Response:
    if request.method == "GET" and "hx-request" not in request.headers:
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        response: Response = RedirectResponse(f"/console/sign-in?next={quote(target)}", status_code=303)
    else:
        response = render(request, "error.html", 401, message=exc.message, status=401, sign_in=True)
        if "hx-request" in request.headers:
            response.headers["hx-redirect"] = "/console/sign-in"
    response.delete_cookie(COOKIE, path="/console")
    return response
