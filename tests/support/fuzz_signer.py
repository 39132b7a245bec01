"""Credentials for Schemathesis's requests: a `requests` auth that signs the bytes actually sent.

Each route family is signed as a merchant signs it (docs/decisions.md §3), with the formulas of
tests/support/wire: SNAP symmetric with an access token (BNPL; the disbursement token on the payout
routes), Basic + x-req-signature (wallet), Basic (card charge), SHA256withRSA over client_id|X-TIMESTAMP
(access token), the admin token (/admin). It runs on the prepared request, after serialization, so what is
signed is exactly the body and path on the wire, whatever the fuzzer generated.
"""

from __future__ import annotations

import itertools
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from requests import PreparedRequest
from requests.auth import AuthBase

from tests.support.wire import basic_auth, x_req_signature
from tests.support.wire.snap import snap_symmetric, snap_timestamp, token_signature

# The disbursement routes (docs/decisions.md §11.1), signed with the disbursement token.
PAYOUT_PREFIXES = (
    "/api/v1.0/balance-inquiry",
    "/api/v1.0/account-inquiry-external",
    "/api/v1.0/transfer",
    "/api/v1.1/transfer",
    "/api/v1.2/transfer",
    "/api/v1.0/transaction-history",
)
# The headers the signer owns, per path prefix: the fuzzer does not generate them (see fuzz_hooks.py).
SIGNED_HEADERS = {
    "/auth/merchants/": ("X-TIMESTAMP", "X-CLIENT-KEY", "X-SIGNATURE"),
    "/api/v1.0/access-token/": ("X-TIMESTAMP", "X-CLIENT-KEY", "X-SIGNATURE"),
    "/v1.0/bnpl/": ("Authorization", "X-TIMESTAMP", "X-SIGNATURE", "X-PARTNER-ID"),
    "/v1.1/bnpl/": ("Authorization", "X-TIMESTAMP", "X-SIGNATURE", "X-PARTNER-ID"),
    **dict.fromkeys(PAYOUT_PREFIXES, ("Authorization", "X-TIMESTAMP", "X-SIGNATURE", "X-PARTNER-ID")),
    "/ewallet/v2/": ("Authorization", "x-req-signature"),
    # The inquiry documents x-version as required: the fuzzer's (v3, or left out on purpose), not the signer's.
    "/card-v2/inquiry": ("Authorization", "x-req-signature"),
    # The direct charges are the SDK dialect's: the signer always sends its x-version and its signature, so a
    # case generated without them (negative) would be sent with them, valid, and be seen accepted.
    "/card-v2/v1/charge-direct": ("Authorization", "x-req-signature", "x-version"),
    "/card-v2/v2/charge-direct": ("Authorization", "x-req-signature", "x-version"),
    "/card-v2/": ("Authorization",),
    "/admin/": ("Authorization",),
}

_DIALECT_KEYS = ("external_id", "payment_details", "card_details")
_serial = itertools.count(int(time.time() * 1000))
# Stands for a merchant's unique reference in the seed examples; replaced per request.
SEED_MARK = b"FUZZSEED"


@dataclass
class FuzzMerchant:
    merchant_id: str
    client_id: str
    client_secret: str
    secret: str
    hash_key: str
    private_key: rsa.RSAPrivateKey
    access_token: str = ""
    disbursement_token: str = ""  # the payout routes' (docs/decisions.md §11.2)
    decoy_id: str = ""  # a second merchant: what the admin routes may disable and rotate (KasirSigner)

    def to_json(self) -> str:
        pem = self.private_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        return json.dumps({**{k: v for k, v in vars(self).items() if k != "private_key"}, "private_key": pem.decode()})

    @classmethod
    def from_json(cls, text: str) -> FuzzMerchant:
        fields = json.loads(text)
        key = serialization.load_pem_private_key(fields.pop("private_key").encode(), password=None)
        assert isinstance(key, rsa.RSAPrivateKey)
        return cls(**fields, private_key=key)


class KasirSigner(AuthBase):
    def __init__(self, merchant: FuzzMerchant, admin_token: str, decoy_id: str) -> None:
        self.merchant = merchant
        self.admin_token = admin_token
        self.decoy_id = decoy_id

    def __call__(self, request: PreparedRequest) -> PreparedRequest:
        path = request.path_url
        own = f"/admin/merchants/{self.merchant.merchant_id}"
        if path.startswith(own) and request.url is not None:
            # Schemathesis reuses ids it read in answers (GET /admin/merchants): the fuzz merchant must not be
            # disabled or have its secrets rotated under the fuzz, so its admin routes hit the decoy's.
            request.url = request.url.replace(own, f"/admin/merchants/{self.decoy_id}", 1)
            path = request.path_url
        body = request.body or b""
        if isinstance(body, str):
            body = body.encode("utf-8", "surrogatepass")
        if SEED_MARK in body or SEED_MARK.lower() in body:
            # The seed examples' ids (fuzz_hooks.py), made unique per request: every case built from a valid
            # example would otherwise be a duplicate order (409) after the first, and go no deeper.
            fresh = _fresh().encode()
            body = body.replace(SEED_MARK, fresh).replace(SEED_MARK.lower(), fresh)
            request.prepare_body(body, None)
        text = body.decode("utf-8", "surrogateescape")
        headers = request.headers
        merchant = self.merchant
        if path.startswith("/admin/"):
            headers["Authorization"] = f"Bearer {self.admin_token}"
        elif path.startswith(("/auth/merchants/", "/api/v1.0/access-token/")):
            timestamp = snap_timestamp()
            headers["X-TIMESTAMP"] = timestamp
            headers["X-CLIENT-KEY"] = merchant.client_id
            headers["X-SIGNATURE"] = token_signature(merchant.private_key, merchant.client_id, timestamp)
        elif path.startswith(("/v1.0/bnpl/", "/v1.1/bnpl/", *PAYOUT_PREFIXES)):
            timestamp = snap_timestamp()
            method = request.method or "POST"
            token = merchant.disbursement_token if path.startswith(PAYOUT_PREFIXES) else merchant.access_token
            headers["Authorization"] = f"Bearer {token}"
            headers["X-TIMESTAMP"] = timestamp
            headers["X-PARTNER-ID"] = merchant.merchant_id
            headers["X-SIGNATURE"] = snap_symmetric(merchant.client_secret, method, path, token, text, timestamp)
            _fresh_if_valid(request, "X-EXTERNAL-ID", lambda v: v.isascii() and v.isdigit() and len(v) <= 36)
        elif path.startswith("/ewallet/v2/"):
            fields = _json_object(text)
            headers["Authorization"] = basic_auth(merchant.merchant_id, merchant.secret)
            headers["x-req-signature"] = x_req_signature(
                merchant.hash_key, _as_text(fields.get("external_id")), _as_text(fields.get("order_id"))
            )
        elif path.startswith("/card-v2/"):
            headers["Authorization"] = basic_auth(merchant.merchant_id, merchant.secret)
            fields = _json_object(text)
            # The provider SDK's dialect signs like the wallet API: its direct charges, and the charge when the
            # body has the dialect's keys (docs/decisions.md §12.3; the document offers both bodies there).
            if path.endswith(("/charge-direct", "/inquiry")) or any(key in fields for key in _DIALECT_KEYS):
                if not path.endswith("/inquiry"):
                    headers["x-version"] = "v3"
                headers["x-req-signature"] = x_req_signature(
                    merchant.hash_key, _as_text(fields.get("external_id")), _as_text(fields.get("order_id"))
                )
        _fresh_if_valid(request, "X-Idempotency-Key", lambda v: 0 < len(v) <= 255)
        return request


def _fresh() -> str:
    return str(next(_serial)) + str(secrets.randbelow(10**6)).zfill(6)


def _fresh_if_valid(request: PreparedRequest, name: str, valid: Callable[[str], bool]) -> None:
    """A generated id that is valid is made unique, so one reused by the fuzzer does not turn every later case
    into a 409 (X-EXTERNAL-ID reuse) or a 422 (idempotency key reuse); an invalid one is sent as generated."""
    value = request.headers.get(name)
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    if value is not None and valid(value):
        request.headers[name] = _fresh()


def _json_object(text: str) -> dict[str, object]:
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _as_text(value: object) -> str:
    """A field as the server reads it for x-req-signature; "" for what it refuses anyway (not text, or a
    lone surrogate, which has no UTF-8 form to hash)."""
    if not isinstance(value, str):
        return ""
    try:
        value.encode()
    except UnicodeEncodeError:
        return ""
    return value
