"""Request id and the one JSON log line per request (pure ASGI: no per-request task overhead)."""

from __future__ import annotations

import logging
import re
import time
import uuid

from starlette.requests import ClientDisconnect, Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kasir.clock_agreement import ClockAgreement
from kasir.errors import BadRequest, InvalidFieldFormat, KasirError, NotFound, ServiceUnavailable, render
from kasir.kit.logs import end_request_fields, start_request_fields
from kasir.ops.metrics import observe_request

log = logging.getLogger("kasir.request")

_NOSNIFF = (b"x-content-type-options", b"nosniff")
_SAFE_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,128}$")


class RequestContextMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        *,
        max_body_bytes: int | None = None,
        hidden_prefixes: tuple[str, ...] = (),
        clock_agreement: ClockAgreement | None = None,
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.hidden_prefixes = hidden_prefixes
        self.clock_agreement = clock_agreement

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        incoming = _header(scope, b"x-request-id")
        request_id = incoming if incoming and _SAFE_REQUEST_ID.match(incoming) else uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id
        started = time.perf_counter()
        status = 500
        fields, fields_token = start_request_fields()

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message.setdefault("headers", [])
                # nosniff on every response: a browser never second-guesses a declared content type.
                message["headers"] = [*message["headers"], (b"x-request-id", request_id.encode()), _NOSNIFF]
            await send(message)

        started_response = False

        async def send_tracking(message: Message) -> None:
            nonlocal started_response
            started_response = started_response or message["type"] == "http.response.start"
            await send_with_id(message)

        try:
            refusal = _refused_before_routing(scope, self.max_body_bytes, self.hidden_prefixes) or _clock_refusal(
                scope, self.clock_agreement
            )
            if refusal is not None:
                await render(Request(scope), refusal)(scope, receive, send_tracking)
                return
            if self.max_body_bytes is not None:
                receive = _limited(receive, self.max_body_bytes)
            if (_header(scope, b"content-type") or "").lower().startswith("application/x-www-form-urlencoded"):
                receive = _refusing_nul(receive)
            await self.app(scope, receive, send_tracking)
        except ClientDisconnect:
            # The client left before its body arrived whole (its own timeout, a crash): nobody is left to
            # answer, and nothing was done. 499 in the request line, as nginx says it; no traceback.
            status = 499
        except Exception:
            # A bug: say so in the route's wire format with the request id, never with a stack trace.
            log.exception("unhandled error", extra={"request_id": request_id})
            if not started_response:
                response = render(Request(scope), KasirError())
                await response(scope, receive, send_with_id)
        finally:
            end_request_fields(fields_token)
            route = scope.get("route")
            # The route's template, never the raw path or query (they may carry references).
            template = getattr(route, "path", None) or "<unmatched>"
            elapsed = time.perf_counter() - started
            observe_request(scope["method"], template, status, elapsed)
            log.info(
                "request",
                extra={
                    **fields,
                    "request_id": request_id,
                    "method": scope["method"],
                    "route": template,
                    "status": status,
                    "latency_ms": round(elapsed * 1000, 2),
                },
            )


def _refused_before_routing(
    scope: Scope, max_body_bytes: int | None, hidden_prefixes: tuple[str, ...] = ()
) -> KasirError | None:
    """What is answered before any route reads, parses or authenticates anything:

    - a declared body over KASIR_MAX_BODY_BYTES: 413 (a body that declares no length is cut off
      as it grows past it: `_limited`);
    - a NUL in the path or the query: no id or reference holds one, and PostgreSQL's text cannot,
      so 404 or 400 here instead of a failure in the database;
    - a path this deployment does not serve (KASIR_PUBLIC_METRICS, KASIR_ADMIN_API): 404.
    """
    if hidden_prefixes and scope["path"].startswith(hidden_prefixes):
        return NotFound("Not Found")
    if max_body_bytes is not None:
        declared = _header(scope, b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > max_body_bytes):
            return _body_too_large(max_body_bytes)
    if "\x00" in scope["path"]:
        return NotFound("Not Found")
    if b"%00" in scope.get("query_string", b""):
        return BadRequest("Bad Request. The query must not contain NUL characters", field="query")
    return None


# What a server whose clock disagrees with the database's still answers: the probes that say so.
_HEALTH_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})


def _clock_refusal(scope: Scope, agreement: ClockAgreement | None) -> KasirError | None:
    """An outage while this machine's clock and the database's disagree (kasir.clock_agreement): an
    idempotency key, an access token, a payment's expiry would be judged by a clock that stepped. The
    merchant retries, and a load balancer that reads /readyz sends the retry to a server whose clock is right."""
    if agreement is None or agreement.agrees or scope["path"] in _HEALTH_PATHS:
        return None
    return ServiceUnavailable(
        "Service temporarily unavailable; retry with exponential backoff", field="", headers={"Retry-After": "10"}
    )


def _body_too_large(max_body_bytes: int) -> KasirError:
    error = InvalidFieldFormat("body", f"must be at most {max_body_bytes} bytes")
    error.http_status = 413
    return error


def _refusing_nul(receive: Receive) -> Receive:
    """`receive` for a form that raises 400 (in the route's format) when the form carries a NUL (`%00`):
    a page's field never holds one, and PostgreSQL's text cannot."""
    tail = b""

    async def refusing() -> Message:
        nonlocal tail
        message = await receive()
        if message["type"] == "http.request":
            chunk = tail + message.get("body", b"")
            if b"%00" in chunk:
                raise BadRequest("Bad Request. The form must not contain NUL characters", field="form")
            tail = chunk[-2:]  # a %00 split across two chunks
        return message

    return refusing


def _limited(receive: Receive, max_body_bytes: int) -> Receive:
    """`receive` that raises 413 (in the route's format: a KasirError reaches its handler) once the
    body read so far passes the limit: a chunked body is never held whole."""
    received = 0

    async def limited() -> Message:
        nonlocal received
        message = await receive()
        if message["type"] == "http.request":
            received += len(message.get("body", b""))
            if received > max_body_bytes:
                raise _body_too_large(max_body_bytes)
        return message

    return limited


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return value.decode("latin-1")
    return None
