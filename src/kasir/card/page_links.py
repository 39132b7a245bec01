"""Where a card order's pages live, and how their forms are trusted.

The hosted payment page and the challenge's return are reached by URL (`page_url`,
`challenge_return_url`); a form they show carries a token bound to the order, the attempt
and the form (`page_token`), so a form cannot be replayed for another attempt or order. The
customer leaves for the merchant's returnUrl with the outcome in its query (`return_redirect`).
"""

from __future__ import annotations

import hmac
from functools import lru_cache
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from kasir.card.repository import CardOrderRow
from kasir.config import get_settings
from kasir.kit.crypto import constant_time_equals, derive_key


@lru_cache(maxsize=16)
def _key(secret_key: str, purpose: str) -> bytes:
    return derive_key(secret_key, purpose)


def _service_key(purpose: str, secret_key: str | None = None) -> bytes:
    return _key(secret_key or get_settings().resolved_secret_key(), purpose)


def _accepted_keys() -> tuple[str | None, ...]:
    """The current key (None), then KASIR_SECRET_KEY_PREVIOUS: a page shown before a rotation still submits."""
    return (None, *get_settings().previous_secret_keys())


def page_token(order_id: str, attempt: int, purpose: str, secret_key: str | None = None) -> str:
    """The CSRF token of a page form: bound to the order, the attempt number and the form."""
    message = f"{order_id}:{attempt}:{purpose}".encode()
    return hmac.digest(_service_key("kasir/card-page-csrf", secret_key), message, "sha256").hex()


def check_page_token(order_id: str, attempt: int, purpose: str, token: str) -> bool:
    return any(constant_time_equals(page_token(order_id, attempt, purpose, key), token) for key in _accepted_keys())


def page_url(order_id: str) -> str:
    return f"{get_settings().public_url}/card/pages/{order_id}"


def challenge_return_url(order_id: str, attempt: int) -> str:
    """Where an acquirer's challenge sends the customer back (`finish_challenge` asks it the result)."""
    return f"{page_url(order_id)}/return?attempt={attempt}"


def return_redirect(order: CardOrderRow, status: str) -> str:
    """returnUrl with transaction_id, order_id and status added to its query."""
    parts = urlsplit(order.return_url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    query += [("transaction_id", order.id), ("order_id", order.order_id), ("status", status)]
    return urlunsplit(parts._replace(query=urlencode(query)))
