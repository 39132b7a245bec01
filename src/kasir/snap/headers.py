"""SNAP request headers: presence, content type, and the X-TIMESTAMP window."""

from __future__ import annotations

from datetime import datetime

from starlette.datastructures import Headers

from kasir.errors import BadRequest, InvalidFieldFormat, InvalidMandatoryField, Unauthorized
from kasir.kit import json_input
from kasir.kit.clock import clock, parse_aware


class StaleTimestamp(Unauthorized):
    """X-TIMESTAMP outside the allowed skew: a clock to fix, not a failed proof of identity (not
    counted by the failed-authentication lockout, kasir.ratelimit)."""


def require_headers(headers: Headers, *names: str) -> list[str]:
    """The values of `names`, in order; the first missing or blank one is `400xx02 Invalid Mandatory Field`."""
    values = []
    for name in names:
        value = headers.get(name)
        if value is None or not value.strip():
            raise InvalidMandatoryField(name)
        values.append(value.strip())
    return values


def require_json_content_type(headers: Headers) -> None:
    content_type = headers.get("content-type")
    if content_type is None or not content_type.strip():
        raise InvalidMandatoryField("Content-Type")
    if content_type.split(";", 1)[0].strip().lower() != "application/json":
        raise BadRequest("Bad Request. Content-Type must be application/json", field="Content-Type")


def check_timestamp(value: str, skew_seconds: int) -> datetime:
    """Parse X-TIMESTAMP (ISO 8601 with offset) and require it within the allowed skew."""
    try:
        moment = parse_aware(value)
    except ValueError as exc:
        raise InvalidFieldFormat(
            "X-TIMESTAMP", "must be ISO 8601 with an offset, like 2026-11-22T10:00:00+07:00"
        ) from exc
    drift = abs((clock.now() - moment).total_seconds())
    if drift > skew_seconds:
        raise StaleTimestamp(f"X-TIMESTAMP is {int(drift)} s away from server time (allowed {skew_seconds} s)")
    return moment


def parse_json_body(raw: bytes) -> object:
    """The body's JSON; 400 in the route's format for anything not JSON, or JSON Kasir cannot keep
    (NaN, out-of-range numbers, NUL, unpaired surrogates, deep nesting: kasir.kit.json_input)."""
    try:
        return json_input.loads(raw)
    except json_input.UnsafeJson as exc:
        raise InvalidFieldFormat(exc.path, exc.reason) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest("Bad Request. Body is not valid JSON", field="body") from exc
