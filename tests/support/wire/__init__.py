"""Requests and signatures as a merchant makes them, one module per wire format.

Every signature here is computed from the formulas of docs/decisions.md §3 and interface.md, written out
independently of `kasir` and `kasir_client` (no import of either's signing code): a test that checked a
signature against the helper it tests could not fail.

- `tests.support.wire` (this module): what the formats share: Basic auth (§3.4), x-req-signature (§3.3: the
  wallet API and the card dialect sign requests with it, callback signatures build on it), the compact JSON
  the tests send, timestamps in Asia/Jakarta.
- `wallet`: the wallet API's requests (Basic + x-req-signature) and its callback.
- `dialect`: the provider SDK's snake_case card dialect, signed as the wallet API is.
- `card`: Kasir's own card API (Basic only), its requests and the payment-page callback.
- `snap`: SNAP requests: the access token (§3.1), symmetric and asymmetric signatures (§3.2), BNPL bodies.
- `callbacks`: the signatures of what Kasir sends: svc-signature (§3.5) and the BNPL notification (§3.6).
"""

from __future__ import annotations

import base64
import hashlib
import json
from datetime import timedelta

from kasir.kit.clock import JAKARTA, clock
from tests.support.builders import TestMerchant


def basic_auth(*parts: str) -> str:
    """§3.4: `Basic base64(merchant_id:secret)` or `Basic base64(merchant_id:secret:hash_key)`."""
    return "Basic " + base64.b64encode(":".join(parts).encode()).decode()


def x_req_signature(hash_key: str, external_id: str, order_id: str) -> str:
    """§3.3: lowercase hex SHA-256 of hash_key + external_id + order_id (plain concatenation, no separator)."""
    return hashlib.sha256(f"{hash_key}{external_id}{order_id}".encode()).hexdigest()


def auth(merchant: TestMerchant, *, three_part: bool = False, secret: str | None = None) -> str:
    """The merchant's Basic credentials, two-part or three-part (with the hash key)."""
    creds = merchant.credentials
    parts = [creds.merchant_id, secret or creds.secret] + ([creds.hash_key] if three_part else [])
    return basic_auth(*parts)


def compact(body: object) -> str:
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False)


def same_meaning(text: str, *, fractions: bool = False) -> str:
    """`text` (compact JSON) written another way that parses to the same JSON value (docs/decisions.md §12.5):
    keys in reverse order, indented, every character outside ASCII and every `/` escaped (`\\u00e9`, `\\/`);
    with `fractions`, whole numbers spelled with one (`10000.0`: a route whose schema takes only integers
    refuses that before its key is looked at)."""

    def restate(value: object) -> object:
        if isinstance(value, dict):
            return {name: restate(value[name]) for name in reversed(list(value))}
        if isinstance(value, list):
            return [restate(item) for item in value]
        if fractions and isinstance(value, int) and not isinstance(value, bool):
            return float(value)  # json.dumps writes 10000.0: the same number
        return value

    restated = json.dumps(restate(json.loads(text)), indent=3, ensure_ascii=True)
    assert restated != text
    return restated.replace("/", "\\/")  # outside strings JSON has no `/`


def jakarta_time(offset_seconds: float = 0) -> str:
    """Now on the movable clock, plus `offset_seconds`, in Asia/Jakarta to the second: 2026-11-22T10:00:00+07:00."""
    return (clock.now() + timedelta(seconds=offset_seconds)).astimezone(JAKARTA).isoformat(timespec="seconds")
