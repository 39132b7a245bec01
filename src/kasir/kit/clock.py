"""The one clock of the service.

Every timestamp Kasir writes or compares comes from `clock.now()`, so tests can move
time (`clock.advance(901)`) instead of sleeping. Timestamps are always aware.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo

# docs/decisions.md §1: timestamps the service writes are Asia/Jakarta (+07:00).
JAKARTA = ZoneInfo("Asia/Jakarta")


class Clock:
    def __init__(self) -> None:
        self._offset = timedelta(0)
        self._offset_seconds = 0.0

    def now(self) -> datetime:
        """Current time, aware, in UTC."""
        return datetime.now(UTC) + self._offset

    def epoch(self) -> float:
        """Current time as Unix seconds: what a counter's window needs, without building a datetime."""
        return time.time() + self._offset_seconds

    def local_now(self, tz: tzinfo = JAKARTA) -> datetime:
        return self.now().astimezone(tz)

    def advance(self, seconds: float) -> None:
        """Move the clock forward (tests only: nothing in the service calls this)."""
        self._offset += timedelta(seconds=seconds)
        self._offset_seconds = self._offset.total_seconds()

    def reset(self) -> None:
        self._offset = timedelta(0)
        self._offset_seconds = 0.0


clock = Clock()


def isoformat_seconds(moment: datetime, tz: tzinfo = JAKARTA) -> str:
    """`2026-11-22T19:03:04+07:00`: the SNAP timestamp form (yyyy-MM-ddTHH:mm:ssTZD)."""
    return moment.astimezone(tz).isoformat(timespec="seconds")


def isoformat_millis(moment: datetime, tz: tzinfo = JAKARTA) -> str:
    """`2026-11-22T19:03:04.123+07:00`: ISO 8601 with milliseconds and offset."""
    return moment.astimezone(tz).isoformat(timespec="milliseconds")


def parse_aware(value: str) -> datetime:
    """Parse an ISO 8601 timestamp that must carry an offset (fractional seconds allowed).

    Raises ValueError for anything else, including a timestamp without an offset.
    """
    text = value.strip()
    if len(text) < 20 or text[10] != "T":
        raise ValueError("not an ISO 8601 date-time")
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    parsed = datetime.fromisoformat(text)
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        raise ValueError("timestamp has no UTC offset")
    return plausible(parsed)


def plausible(moment: datetime) -> datetime:
    """`moment` if it lies in the years a payment can (1970 to 9998), else ValueError: a moment far outside
    them (year 1 with an offset) cannot even be moved to UTC, and no record is from then."""
    try:
        year = moment.astimezone(UTC).year if moment.tzinfo is not None else moment.year
    except OverflowError:
        raise ValueError("the moment is out of range") from None
    if not 1970 <= year <= 9998:
        raise ValueError("the moment is out of range (years 1970 to 9998)")
    return moment


def as_aware_utc(moment: datetime) -> datetime:
    """Databases without time-zone types (SQLite) hand back naive UTC datetimes."""
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


__all__ = [
    "JAKARTA",
    "UTC",
    "Clock",
    "as_aware_utc",
    "clock",
    "isoformat_millis",
    "isoformat_seconds",
    "parse_aware",
    "timezone",
]
