"""Identifiers the service hands out."""

from __future__ import annotations

import secrets
import string

_ALPHABET = string.ascii_uppercase + string.digits


def random_token(length: int, alphabet: str = _ALPHABET) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(length))


def new_id(prefix: str, length: int = 20) -> str:
    """`prefix` + random upper-case letters and digits, e.g. `MCH8Q2...`."""
    return prefix + random_token(length)


def new_secret(nbytes: int = 32) -> str:
    """URL-safe random secret (for client secrets, basic-auth secrets, hash keys)."""
    return secrets.token_urlsafe(nbytes)
