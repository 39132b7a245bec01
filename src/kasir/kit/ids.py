"""Identifiers the service hands out."""

from __future__ import annotations

import os
import secrets
import string
import time
from functools import lru_cache

_ALPHABET = string.ascii_uppercase + string.digits
# Base 36 in ASCII order (digits before letters), so a fixed-width stamp sorts as the time does.
_ALPHABET_BY_VALUE = string.digits + string.ascii_uppercase
_STAMP_LENGTH = 9  # 36**9 ms: until the year 5188


def random_token(length: int, alphabet: str = _ALPHABET) -> str:
    """`length` characters of `alphabet`, uniformly and independently chosen by the OS's CSPRNG.

    Each random byte below the largest multiple of the alphabet's size picks one character
    (byte % size); the bytes above it are dropped (rejection sampling, so no character is
    likelier than another). All of it runs in C, `bytes.translate`: ids are made on every
    payment, and a number drawn by `secrets.randbelow` and written out digit by digit in
    Python showed in a card charge's profile.
    """
    picks, dropped = _byte_table(alphabet)
    out = b""
    while len(out) < length:
        # 1/4 more bytes than needed: rarely a second draw (36 characters drop 4 bytes in 256).
        out += os.urandom(length + length // 4 + 4).translate(picks, dropped)
    return out[:length].decode("ascii")


@lru_cache(maxsize=8)
def _byte_table(alphabet: str) -> tuple[bytes, bytes]:
    """The byte -> character table of `alphabet` (ASCII), and the bytes that would bias it."""
    size = len(alphabet)
    if not 1 < size <= 256 or not alphabet.isascii() or len(set(alphabet)) != size:
        raise ValueError("the alphabet must be 2 to 256 distinct ASCII characters")
    usable = 256 - 256 % size
    picks = bytes(ord(alphabet[byte % size]) for byte in range(256))
    return picks, bytes(range(usable, 256))


def new_id(prefix: str, length: int = 20) -> str:
    """`prefix` + random upper-case letters and digits, e.g. `MCH8Q2...`."""
    return prefix + random_token(length)


def new_sortable_id(prefix: str, length: int = 20) -> str:
    """`prefix` + 9 characters of the time in milliseconds + random ones: ids made later sort after.

    For the primary keys of tables written on every payment: a new row lands at the end of the
    key's index instead of at a random page of it (an insert costs about half as much at 150,000
    rows). The random part still leaves the id unguessable (11 characters: 56 bits at length 20).
    """
    return prefix + _stamp(time.time_ns() // 1_000_000) + random_token(length - _STAMP_LENGTH)


_last_stamp: tuple[int, str] = (-1, "")  # ids made in the same millisecond share the stamp's text


def _stamp(millis: int) -> str:
    global _last_stamp
    last_millis, text = _last_stamp
    if millis != last_millis:
        digits, rest = [], millis
        for _ in range(_STAMP_LENGTH):
            rest, digit = divmod(rest, 36)
            digits.append(_ALPHABET_BY_VALUE[digit])
        text = "".join(reversed(digits))
        _last_stamp = (millis, text)
    return text


def new_secret(nbytes: int = 32) -> str:
    """URL-safe random secret (for client secrets, basic-auth secrets, hash keys)."""
    return secrets.token_urlsafe(nbytes)


# A row id in a path or query: the databases' BIGINT. A larger number is refused where it is
# parsed (a 4xx in the route's format), not by the database driver (a 500).
INT64_MAX = 2**63 - 1
# The largest id an `Integer` column holds on both databases (PostgreSQL's integer is 32-bit).
INT32_MAX = 2**31 - 1
