"""Errors as types, rendered by one handler per wire format.

A domain raises what went wrong; the route it happened on decides how it is said:

    KasirError                    500  SNAP xx00 General Error   wallet 98   card INTERNAL_ERROR
    ├── BadRequest                400  SNAP xx00 Bad Request     wallet 01   card VALIDATION_ERROR
    │   ├── InvalidFieldFormat    400  SNAP xx01                 wallet 01   card VALIDATION_ERROR
    │   └── InvalidMandatoryField 400  SNAP xx02                 wallet 01   card VALIDATION_ERROR
    ├── Unauthorized              401  SNAP xx00                 wallet 04   card UNAUTHORIZED
    │   └── InvalidToken          401  SNAP xx01 Invalid Token (B2B)
    ├── FeatureNotAllowed         403  SNAP xx01                 wallet 04   card FORBIDDEN
    ├── NotFound                  404  SNAP xx01 Transaction Not Found  wallet 02  card NOT_FOUND
    │   └── InvalidAmount         404  SNAP xx13
    ├── Conflict                  409  SNAP xx00 Conflict        wallet 03   card CONFLICT
    │   ├── DuplicateReference    409  SNAP xx01                             card DUPLICATE_ORDER
    │   ├── InvalidStateTransition 409 SNAP xx00                 wallet 03   card CONFLICT
    │   └── RequestInProgress     409                                        card REQUEST_IN_PROGRESS
    ├── UnprocessableEntity       422  SNAP xx00                 wallet 01   card (per subclass)
    ├── TooManyRequests           429  SNAP xx00 Too Many Requests  wallet 98  card TOO_MANY_REQUESTS
    ├── ServiceUnavailable        503  SNAP 500xx00 (HTTP 500)   wallet 98 (HTTP 500)  card SERVICE_UNAVAILABLE
    └── GatewayTimeout            504  SNAP xx00 Timeout

Wire formats (docs/decisions.md §4):

- SNAP: `{"responseCode": HTTP + service code + case, "responseMessage": ...}`
- wallet: `{"response_code": "01", "response_message": ...}`
- card: `{"statusCode": "400", "statusMessage": "VALIDATION_ERROR", "errors": [{field, message}]}`
- plain (operations, admin, unknown routes): `{"error": ..., "message": ..., "request_id": ...}`

A route names its format and SNAP service code with `openapi_extra=wire(...)`; a request
that matched no route is rendered by its path prefix.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import iter_route_contexts
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from kasir.db import UNAVAILABLE

log = logging.getLogger("kasir.errors")


class OutageLog:
    """One outage, a few log lines: the first failure with its cause (an OperationalError can also be a bug,
    which must not pass for an outage), then one line per `window` seconds counting the failures since.

    A traceback per refused request would write megabytes a minute during an outage and bury its cause.
    """

    def __init__(self, message: str, window: float = 10.0) -> None:
        self.message = message
        self.window = window
        self._since_logged = 0  # failures not yet in a line
        self._last: BaseException | None = None
        self._flush: asyncio.TimerHandle | None = None

    def failed(self, exc: BaseException, request_id: str | None) -> None:
        if self._flush is None and not self._since_logged:
            log.error(self.message, exc_info=exc, extra={"request_id": request_id})
            self._flush = asyncio.get_running_loop().call_later(self.window, self._summarise)
            return
        self._since_logged += 1
        self._last = exc

    def _summarise(self) -> None:
        count, last = self._since_logged, self._last
        self._since_logged, self._last, self._flush = 0, None, None
        if count:
            cause = f"{type(last).__name__}: {last}"[:300]
            log.error(
                f"{self.message}: {count} more requests refused in the last {self.window:g} s (last: {cause})",
                extra={"refused": count},
            )
            # Still failing: the next summary comes after another window; a quiet window ends the outage.
            self._flush = asyncio.get_running_loop().call_later(self.window, self._summarise)


class WireFormat(StrEnum):
    SNAP = "snap"
    WALLET = "wallet"
    CARD = "card"
    PLAIN = "plain"


def wire(format: WireFormat, service_code: str | None = None) -> dict[str, Any]:
    """Route metadata (`openapi_extra`) naming the route's error format and SNAP service code."""
    extra: dict[str, Any] = {"x-kasir-wire-format": format.value}
    if service_code is not None:
        extra["x-snap-service-code"] = service_code
    return extra


# Requests that matched no route (404, 405) are rendered by their path.
_PREFIX_FORMATS: list[tuple[str, WireFormat, str | None]] = [
    ("/ewallet/", WireFormat.WALLET, None),
    ("/card-v2/", WireFormat.CARD, None),
    ("/auth/merchants/", WireFormat.SNAP, "73"),
    ("/api/v1.0/access-token/", WireFormat.SNAP, "73"),
    ("/v1.0/access-token/", WireFormat.SNAP, "73"),
    ("/v1.0/bnpl/", WireFormat.SNAP, "00"),
    ("/v1.1/bnpl/", WireFormat.SNAP, "00"),
    # Disbursement (docs/decisions.md §11.1): a wrong method on one of its paths is said with its service code.
    ("/api/v1.0/balance-inquiry", WireFormat.SNAP, "11"),
    ("/api/v1.0/account-inquiry-external", WireFormat.SNAP, "16"),
    ("/api/v1.0/transfer-interbank", WireFormat.SNAP, "18"),
    ("/api/v1.1/transfer-interbank", WireFormat.SNAP, "18"),
    ("/api/v1.2/transfer-interbank", WireFormat.SNAP, "18"),
    ("/api/v1.0/transfer/status", WireFormat.SNAP, "36"),
    ("/api/v1.0/transaction-history-list", WireFormat.SNAP, "12"),
    ("/api/v1.0/transaction-history-detail", WireFormat.SNAP, "13"),
]


@dataclass(frozen=True, slots=True)
class FieldError:
    field: str
    message: str


class KasirError(Exception):
    http_status: int = 500
    snap_case: str = "00"
    wallet_code: str = "98"
    card_status: str = "INTERNAL_ERROR"
    default_message: str = "General Error"
    # A 4xx is the answer an X-Idempotency-Key keeps; False for a refusal that says "not now" (another
    # request holds the payment), which the key's retry must not get for ever.
    kept_with_key: bool = True

    def __init__(
        self,
        message: str | None = None,
        *,
        field: str | None = None,
        errors: Sequence[FieldError] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.message = message or self.default_message
        self.field = field
        self.errors = list(errors) if errors else []
        self.headers = headers or {}
        super().__init__(self.message)

    def field_errors(self) -> list[FieldError]:
        if self.errors:
            return self.errors
        return [FieldError(self.field or "", self.message)]


class BadRequest(KasirError):
    http_status = 400
    snap_case = "00"
    wallet_code = "01"
    card_status = "VALIDATION_ERROR"
    default_message = "Bad Request"


class InvalidFieldFormat(BadRequest):
    """SNAP `Invalid Field Format {field}`; `reason` is said in the non-SNAP formats."""

    snap_case = "01"

    def __init__(self, field: str, reason: str | None = None) -> None:
        super().__init__(f"Invalid Field Format {field}", field=field)
        self.reason = reason or "has an invalid format"


class InvalidMandatoryField(BadRequest):
    snap_case = "02"

    def __init__(self, field: str) -> None:
        super().__init__(f"Invalid Mandatory Field {field}", field=field)
        self.reason = "is required"


class Unauthorized(KasirError):
    http_status = 401
    snap_case = "00"
    wallet_code = "04"
    card_status = "UNAUTHORIZED"
    default_message = "Unauthorized"

    def __init__(self, reason: str, *, field: str | None = None) -> None:
        # SNAP: "Unauthorized. {reason}"; the card format names the field `authorization`.
        super().__init__(f"Unauthorized. {reason}", field=field or "authorization")


class InvalidToken(Unauthorized):
    snap_case = "01"

    def __init__(self) -> None:
        KasirError.__init__(self, "Invalid Token (B2B)", field="authorization")


class FeatureNotAllowed(KasirError):
    http_status = 403
    snap_case = "01"
    wallet_code = "04"
    card_status = "FORBIDDEN"
    default_message = "Feature Not Allowed"


class NotFound(KasirError):
    http_status = 404
    snap_case = "01"
    wallet_code = "02"
    card_status = "NOT_FOUND"
    default_message = "Transaction Not Found"


class InvalidAmount(NotFound):
    snap_case = "13"
    default_message = "Invalid Amount"


class Conflict(KasirError):
    http_status = 409
    snap_case = "00"
    wallet_code = "03"
    card_status = "CONFLICT"
    default_message = "Conflict"


class DuplicateReference(Conflict):
    snap_case = "01"
    card_status = "DUPLICATE_ORDER"


class InvalidStateTransition(Conflict):
    default_message = "Failed Request"


class RequestInProgress(Conflict):
    card_status = "REQUEST_IN_PROGRESS"
    default_message = "A request with this idempotency key is still being processed"


class UnprocessableEntity(KasirError):
    http_status = 422
    snap_case = "00"
    wallet_code = "01"
    card_status = "UNPROCESSABLE_ENTITY"
    default_message = "Unprocessable Entity"


class TooManyRequests(KasirError):
    """docs/decisions.md §4: SNAP 429xx00. The card and wallet formats show no 429: the card says
    TOO_MANY_REQUESTS like its other statuses, the wallet the code of the cause (kasir.ratelimit)."""

    http_status = 429
    snap_case = "00"
    card_status = "TOO_MANY_REQUESTS"
    default_message = "Too Many Requests"


class ServiceUnavailable(KasirError):
    """The database or a processor cannot take the work now; retry (with Retry-After). docs/decisions.md §4
    pairs wallet `98` and SNAP `500xx00` (General Error) with HTTP 500, so there it is said as a 500; the
    card format keeps interface.md's 503 SERVICE_UNAVAILABLE. `http_status` stays 503: a 5xx frees an
    X-Idempotency-Key either way."""

    http_status = 503
    card_status = "SERVICE_UNAVAILABLE"
    default_message = "Service Unavailable"


class GatewayTimeout(KasirError):
    http_status = 504
    default_message = "Timeout"


# --- rendering ---------------------------------------------------------------------


# A request whose body decides its wire format (the card charge in the provider SDK's snake_case
# dialect, kasir.card.dialect) names it here; it wins over the route's.
_SPOKEN = "kasir.wire_format"


def speak(request: Request, format: WireFormat) -> None:
    """Render this request's errors in `format`, whatever its route's format."""
    request.scope[_SPOKEN] = format


def _route_wire(request: Request) -> tuple[WireFormat, str | None]:
    spoken = request.scope.get(_SPOKEN)
    if spoken is not None:
        return spoken, None
    route = request.scope.get("route")
    extra = getattr(route, "openapi_extra", None) or {}
    if "x-kasir-wire-format" in extra:
        return WireFormat(extra["x-kasir-wire-format"]), extra.get("x-snap-service-code")
    format, service_code = _path_wire(request.url.path)
    if format is WireFormat.CARD and _sent_by_the_provider_sdk(request):
        # No route (an unknown /card-v2/ path) or none yet (refused before routing): the provider SDK reads
        # only its dialect's answers, which are the wallet format's (kasir.card.dialect).
        return WireFormat.WALLET, None
    return format, service_code


def _sent_by_the_provider_sdk(request: Request) -> bool:
    """The headers the provider's Node SDK sends on every card call, and Kasir's own card API never needs."""
    headers = request.headers
    return "x-req-signature" in headers or headers.get("x-version") == "v3"


def _path_wire(path: str) -> tuple[WireFormat, str | None]:
    for prefix, format, service_code in _PREFIX_FORMATS:
        if path.startswith(prefix):
            return format, service_code
    return WireFormat.PLAIN, None


def wire_format_of_path(path: str) -> WireFormat:
    """The format of a route that names none (kasir.openapi documents its errors with it)."""
    return _path_wire(path)[0]


def _request_id(request: Request) -> str:
    return str(request.scope.get("state", {}).get("request_id", ""))


# docs/decisions.md §4: the formats whose codes pair an outage with HTTP 500 (wallet 98, SNAP 500xx00).
_OUTAGE_AS_500 = frozenset({WireFormat.SNAP, WireFormat.WALLET})


def render(request: Request, error: KasirError) -> JSONResponse:
    format, service_code = _route_wire(request)
    status = error.http_status
    if isinstance(error, ServiceUnavailable) and format in _OUTAGE_AS_500:
        status = 500
    body: dict[str, Any]
    if format is WireFormat.SNAP:
        body = {
            "responseCode": f"{status}{service_code or '00'}{error.snap_case}",
            "responseMessage": error.message[:150],
        }
    elif format is WireFormat.WALLET:
        body = {"response_code": error.wallet_code, "response_message": _human_message(error)}
    elif format is WireFormat.CARD:
        body = {
            "statusCode": str(status),
            "statusMessage": error.card_status,
            "errors": [{"field": e.field, "message": _field_message(e, error)} for e in error.field_errors()],
        }
    else:
        body = {"error": type(error).__name__, "message": _human_message(error), "request_id": _request_id(request)}
    return JSONResponse(body, status_code=status, headers=error.headers or None)


def _human_message(error: KasirError) -> str:
    """Outside SNAP, say which field and why in plain words."""
    reason = getattr(error, "reason", None)
    if error.field and reason:
        return f"{error.field} {reason}"
    return error.message


def _field_message(field_error: FieldError, error: KasirError) -> str:
    reason = getattr(error, "reason", None)
    if not error.errors and reason:
        return reason
    return field_error.message


def dotted_path(loc: Iterable[int | str]) -> str:
    """`("body", "itemDetails", 0, "qty")` -> `itemDetails[0].qty`."""
    out = ""
    for part in loc:
        if part == "body" and not out:
            continue
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def from_pydantic_errors(errors: Sequence[Any], *, prefix: Sequence[int | str] = ()) -> KasirError:
    """Turn Pydantic's errors into one KasirError naming every field.

    The first error decides the SNAP case (mandatory vs format); the card format lists all.
    """
    fields: list[FieldError] = []
    first_missing: str | None = None
    first_other: tuple[str, str] | None = None
    for item in errors:
        loc = tuple(prefix) + tuple(item.get("loc", ()))
        path = dotted_path(loc) or "body"
        kind = item.get("type", "")
        if kind == "missing":
            message = "is required"
            first_missing = first_missing or path
        else:
            message = _pydantic_message(item)
            if first_other is None:
                first_other = (path, message)
        fields.append(FieldError(path, message))
    if first_missing is not None and (first_other is None or fields[0].field == first_missing):
        error: KasirError = InvalidMandatoryField(first_missing)
    else:
        assert first_other is not None
        error = InvalidFieldFormat(first_other[0], first_other[1])
    error.errors = fields
    return error


def _pydantic_message(item: Any) -> str:
    message = str(item.get("msg", "is invalid"))
    # Pydantic's "Value error, X" prefix says nothing to a merchant.
    for prefix in ("Value error, ", "Assertion failed, "):
        if message.startswith(prefix):
            message = message[len(prefix) :]
    return message


def _allowed_methods(request: Request) -> str:
    """Every method of every route on the request's path (included routers' routes too)."""
    methods: set[str] = set()
    for context in iter_route_contexts(request.app.router.routes):
        route_methods = getattr(context, "methods", None)
        if route_methods and context.route.matches(request.scope)[0] is not Match.NONE:
            methods.update(route_methods)
    return ", ".join(sorted(methods))


def install_error_handlers(app: FastAPI) -> None:
    async def on_kasir_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, KasirError)
        if exc.http_status >= 500:
            log.error("request failed: %s", exc.message, extra={"request_id": _request_id(request)})
        return render(request, exc)

    async def on_validation_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return render(request, from_pydantic_errors(exc.errors()))

    async def on_http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        if isinstance(exc.__cause__, KasirError):
            # FastAPI reads a route's declared body itself and says any failure as "error parsing the
            # body" (400): say the cause instead (a body over the limit is a 413, kasir.middleware).
            return render(request, exc.__cause__)
        error: KasirError
        if exc.status_code == 404:
            error = NotFound("Not Found")
        elif exc.status_code == 405:
            error = BadRequest("Method Not Allowed")
            error.http_status = 405
            # RFC 9110 §15.5.6: a 405 names the methods the resource supports. Starlette's Allow header names
            # those of the first route on the path only; a path can have several (GET and POST /admin/users).
            error.headers = {"Allow": _allowed_methods(request) or (exc.headers or {}).get("Allow", "")}
        else:
            error = KasirError(str(exc.detail))
            error.http_status = exc.status_code
        return render(request, error)

    outage = OutageLog("database unavailable")

    async def on_database_unavailable(request: Request, exc: Exception) -> JSONResponse:
        outage.failed(exc, _request_id(request))
        error = ServiceUnavailable(
            "Service temporarily unavailable; retry with exponential backoff", field="", headers={"Retry-After": "1"}
        )
        return render(request, error)

    app.add_exception_handler(KasirError, on_kasir_error)
    # Retry with exponential backoff (interface.md), every route in its own wire format: card 503, wallet
    # and SNAP 500 (ServiceUnavailable).
    for unavailable in UNAVAILABLE:
        app.add_exception_handler(unavailable, on_database_unavailable)
    app.add_exception_handler(RequestValidationError, on_validation_error)
    app.add_exception_handler(StarletteHTTPException, on_http_error)
