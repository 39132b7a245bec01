"""Signature headers of callbacks (docs/decisions.md §3.5 and §3.6), computed at send time."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from kasir.config import get_settings
from kasir.kit.crypto import sha256_hex
from kasir.snap.signatures import notify_signature

# interface.md: the callback signature header, `svc-signature` with the brand word neutral. Its name
# is built here only (svc_signature_header): the header and the wallet's query parameter both use it.
SVC_SIGNATURE = "svc-signature"


def svc_signature_header() -> str:
    """The name of the callback signature header (and of the wallet callback's query parameter):
    `<KASIR_CALLBACK_SIGNATURE_BRAND>-signature`, `svc-signature` by default."""
    return f"{get_settings().callback_signature_brand}-signature"


def x_req_signature(hash_key: str, external_id: str, order_id: str) -> str:
    """§3.3: lowercase hex SHA-256 of hash_key + external_id + order_id."""
    return sha256_hex(hash_key + external_id + order_id)


def svc_signature(transaction_id: str, x_req_sig: str, sub_merchant_id: str | None = None) -> str:
    """§3.5: lowercase hex SHA-256 of transaction_id + x_req_signature; of a payment that named a
    sub-merchant (the card dialect's `sub-merchant-id`), of transaction_id + x_req_signature +
    sub_merchant_id, as the provider's callback documentation signs it."""
    return sha256_hex(transaction_id + x_req_sig + (sub_merchant_id or ""))


def bnpl_svc_signature(hash_key: str, reference_no: str, partner_reference_no: str) -> str:
    """Issue 26: a BNPL notification's `svc-signature`, the wallet's (§3.5) with referenceNo as the
    transaction id and partnerReferenceNo as both external id and order id."""
    return svc_signature(reference_no, x_req_signature(hash_key, partner_reference_no, partner_reference_no))


def with_query_signature(url: str, signature: str) -> str:
    """Wallet callbacks repeat the signature as `svc-signature=` on the URL, keeping its query."""
    name = svc_signature_header()
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != name]
    query.append((name, signature))
    return urlunsplit(parts._replace(query=urlencode(query)))


def snap_notify_headers(
    *, client_secret: str, partner_id: str, callback_url: str, body: bytes, timestamp: str
) -> dict[str, str]:
    """§3.6: X-TIMESTAMP, X-PARTNER-ID, X-VERSION v1, X-SIGNATURE (HMAC-SHA512)."""
    return {
        "X-TIMESTAMP": timestamp,
        "X-PARTNER-ID": partner_id,
        "X-VERSION": "v1",
        "X-SIGNATURE": notify_signature(client_secret, callback_url, body, timestamp),
    }
