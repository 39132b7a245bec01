"""Who accepts what, and how often we try (interface.md Events; docs/decisions.md §8)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from kasir.callbacks.models import CallbackKind


def http_200(response: httpx.Response) -> bool:
    return response.status_code == 200


def http_200_json_message(response: httpx.Response) -> bool:
    """Payment page: 200, `Content-Type: application/json`, a JSON object with a string `message`."""
    if response.status_code != 200:
        return False
    if response.headers.get("content-type", "").split(";", 1)[0].strip().lower() != "application/json":
        return False
    try:
        body = json.loads(response.content)
    except ValueError:
        return False
    return isinstance(body, dict) and isinstance(body.get("message"), str)


@dataclass(frozen=True, slots=True)
class DeliveryPolicy:
    retries: int
    accepts: Callable[[httpx.Response], bool]

    @property
    def max_attempts(self) -> int:
        return 1 + self.retries


POLICIES: dict[CallbackKind, DeliveryPolicy] = {
    CallbackKind.WALLET: DeliveryPolicy(retries=2, accepts=http_200),  # interface.md: retried 2 times
    CallbackKind.PAYMENT_PAGE: DeliveryPolicy(retries=3, accepts=http_200_json_message),  # retried 3 times
    CallbackKind.BNPL: DeliveryPolicy(retries=3, accepts=http_200),  # docs/decisions.md §8
    CallbackKind.VA: DeliveryPolicy(retries=2, accepts=http_200),  # docs/decisions.md §9.7: as the wallet's
    CallbackKind.PAYOUT: DeliveryPolicy(retries=3, accepts=http_200),  # docs/decisions.md §11.8
}
