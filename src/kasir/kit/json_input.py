"""JSON from the outside, refused before it can reach a database or a response as something it cannot be.

`json.loads` alone accepts what Kasir cannot store or send back: `NaN`, `Infinity` and numbers
too large for a float (`1e400` becomes infinity), strings with NUL (PostgreSQL's text cannot
hold one) or with an unpaired surrogate (no UTF-8 encoding exists for it), and nesting deep
enough to exhaust the interpreter's recursion (`RecursionError`, which is not a `ValueError`);
anything nested deeper than MAX_DEPTH is refused too.
`loads` answers each as `UnsafeJson` (a `ValueError`) naming where it was, so every route says
it in its own 400 format, never as a 500.

A NUL arrives escaped (`\\u0000`: raw control characters are refused by the parser itself), and
a surrogate escaped (`\\ud800`) or raw (the bytes `ED A0 80`: `json.loads` decodes bytes with
`surrogatepass`, so UTF-8's encoding of a surrogate half is read as one), so the strings are walked
only when the raw body has an escape or such bytes: the common body costs two byte searches.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

# A surrogate half as UTF-8 would spell it (U+D800 to U+DFFF): invalid UTF-8 that json.loads lets through.
_SURROGATE_BYTES = re.compile(rb"\xed[\xa0-\xbf]")
# Deeper than any body of the interface (a BNPL checkout nests 4 levels), far below the recursion limit.
MAX_DEPTH = 32


class UnsafeJson(ValueError):
    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path or 'body'} {reason}")
        self.path = path or "body"
        self.reason = reason


def _refuse_constant(name: str) -> Any:
    raise UnsafeJson("", f"must not contain {name}: not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise UnsafeJson("", f"has a number out of range ({text[:20]})")
    return value


def loads(raw: bytes | str) -> Any:
    """`json.loads`, refusing what the module docstring says (UnsafeJson), and ValueError for anything not JSON."""
    try:
        value = json.loads(raw, parse_constant=_refuse_constant, parse_float=_finite_float)
    except RecursionError:
        raise UnsafeJson("", f"nests deeper than {MAX_DEPTH} levels") from None
    data = raw if isinstance(raw, bytes) else raw.encode("utf-8", "surrogatepass")
    needs_walk = b"\\u" in data or _SURROGATE_BYTES.search(data) is not None
    # Fewer brackets than the limit cannot nest deeper than it: the common body is not walked.
    if needs_walk or data.count(b"{") + data.count(b"[") > MAX_DEPTH:
        _check(value, "", 0, strings=needs_walk)
    return value


def _check(value: Any, path: str, depth: int, *, strings: bool) -> None:
    if depth > MAX_DEPTH:
        raise UnsafeJson("", f"nests deeper than {MAX_DEPTH} levels")
    if isinstance(value, str):
        if strings:
            check_text(value, path)
    elif isinstance(value, dict):
        for key, item in value.items():
            if strings:
                check_text(key, path)
            if isinstance(item, dict | list) or (strings and isinstance(item, str)):
                _check(item, f"{path}.{key}" if path else str(key), depth + 1, strings=strings)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            if isinstance(item, dict | list) or (strings and isinstance(item, str)):
                _check(item, f"{path}[{index}]", depth + 1, strings=strings)


def check_text(text: str, path: str) -> None:
    """A string Kasir can store on both databases and send back as UTF-8, or UnsafeJson."""
    if text.isascii():
        if "\x00" in text:
            raise UnsafeJson(path, "must not contain NUL characters")
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise UnsafeJson(path, "must not contain unpaired surrogates (not valid Unicode)") from None
    if "\x00" in text:
        raise UnsafeJson(path, "must not contain NUL characters")
