"""Log lines as JSON (one object per line) or plain text, on stderr.

Nothing secret is passed to a logger: callers log ids, routes and statuses, never headers,
bodies, signatures or tokens.
"""

from __future__ import annotations

import json
import logging
import math
import sys
import time
from contextvars import ContextVar, Token
from typing import Any

# The fields of the current request's log line that the code it runs adds (kasir.middleware writes the line).
_request_fields: ContextVar[dict[str, Any] | None] = ContextVar("kasir_request_log_fields", default=None)


def annotate_request(**fields: Any) -> None:
    """Put `fields` (ids of what the request made) on the request's one log line; nothing outside a request.

    One line per request instead of one more for each thing it creates: a log line costs as much
    as a database statement on the hot paths.
    """
    current = _request_fields.get()
    if current is not None:
        current.update(fields)


def forget_request_field(name: str) -> None:
    """Take `name` off the request's log line again (the id of something the request undid)."""
    current = _request_fields.get()
    if current is not None:
        current.pop(name, None)


def start_request_fields() -> tuple[dict[str, Any], Token[dict[str, Any] | None]]:
    fields: dict[str, Any] = {}
    return fields, _request_fields.set(fields)


def end_request_fields(token: Token[dict[str, Any] | None]) -> None:
    _request_fields.reset(token)


# color_message: uvicorn's copy of its message with terminal colour codes, noise in a JSON line.
_RESERVED = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime", "color_message"}
_encode = json.JSONEncoder(default=str, ensure_ascii=False).encode


class JsonFormatter(logging.Formatter):
    """Every request writes a line or two: kept cheap (the second's text is made once per second)."""

    _second = -1
    _second_text = ""

    def _time(self, created: float) -> str:
        # As datetime.isoformat(timespec="milliseconds") in UTC: 2026-11-23T08:00:00.123+00:00
        fraction, whole = math.modf(created)  # as datetime does: the fraction rounded to µs, then truncated
        second, micro = int(whole), round(fraction * 1_000_000)
        if micro >= 1_000_000:
            second, micro = second + 1, micro - 1_000_000
        if second != self._second:
            self._second_text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            self._second = second
        return f"{self._second_text}.{micro // 1000:03d}+00:00"

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": self._time(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key in record.__dict__.keys() - _RESERVED:
            if not key.startswith("_"):
                line[key] = record.__dict__[key]
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return _encode(line)


def configure_logging(level: str = "INFO", format: str = "json") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        JsonFormatter() if format == "json" else logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s")
    )
    # Nothing Kasir writes uses the caller's file and line, thread or process names: skip finding them.
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # httpx logs every request URL at INFO, and wallet callback URLs carry their signature.
    # alembic.runtime.plugins and .migration: nine lines whenever a process checks the schema version (/readyz).
    for name in ("httpx", "httpcore", "alembic.runtime.plugins", "alembic.runtime.migration"):
        logging.getLogger(name).setLevel(logging.WARNING)
    # uvicorn's access log would repeat our request line without the request id.
    logging.getLogger("uvicorn.access").disabled = True
    for name in ("uvicorn", "uvicorn.error"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True
