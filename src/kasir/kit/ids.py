"""Identifiers the service hands out."""

from __future__ import annotations

import secrets
import string

_ALPHABET = string.ascii_uppercase + string.digits


def random_token(length: int, alphabet: str = _ALPHABET) -> str:
    """`length` characters of `alphabet`, uniformly and independently chosen by the OS's CSPRNG.

    One random number below base**length written in base `alphabet`: the same distribution as a
    `secrets.choice` per character, in one call instead of `length` (ids are made on every payment).
    """
    base = len(alphabet)
    number = secrets.randbelow(base**length)
    out = []
    for _ in range(length):
        number, digit = divmod(number, base)
        out.append(alphabet[digit])
    return "".join(out)


def new_id(prefix: str, length: int = 20) -> str:
    """`prefix` + random upper-case letters and digits, e.g. `MCH8Q2...`."""
    return prefix + random_token(length)


def new_secret(nbytes: int = 32) -> str:
    """URL-safe random secret (for client secrets, basic-auth secrets, hash keys)."""
    return secrets.token_urlsafe(nbytes)
