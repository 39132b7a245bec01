"""The signatures of what Kasir sends merchants, computed here: svc-signature (§3.5) and the SNAP notify (§3.6)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any

from kasir.kit.clock import parse_aware
from tests.support.builders import TestMerchant
from tests.support.receiver import ReceivedRequest
from tests.support.wire import x_req_signature
from tests.support.wire.snap import body_hash


def callback_signature(transaction_id: str, x_req_sig: str) -> str:
    """§3.5: lowercase hex SHA-256 of transaction_id + x_req_signature."""
    return hashlib.sha256(f"{transaction_id}{x_req_sig}".encode()).hexdigest()


def sub_merchant_signature(transaction_id: str, x_req_sig: str, sub_merchant_id: str) -> str:
    """The provider's callback documentation: sha256(transactionid + x-req-signature + submerchantid)."""
    return hashlib.sha256(f"{transaction_id}{x_req_sig}{sub_merchant_id}".encode()).hexdigest()


def bnpl_svc_signature(hash_key: str, reference_no: str, partner_reference_no: str) -> str:
    """Issue 26: a BNPL notification's svc-signature, the wallet's formula with referenceNo as the transaction
    id and partnerReferenceNo as both external id and order id."""
    return callback_signature(reference_no, x_req_signature(hash_key, partner_reference_no, partner_reference_no))


def notify_signature(client_secret: str, callback_url: str, body: bytes, timestamp: str) -> str:
    """§3.6: Base64(HMAC-SHA512(client_secret, callbackUrl:v1:sha256hex(minify(body)):X-TIMESTAMP))."""
    message = f"{callback_url}:v1:{body_hash(body.decode())}:{timestamp}"
    return base64.b64encode(hmac.new(client_secret.encode(), message.encode(), hashlib.sha512).digest()).decode()


def signed_callback(payload: dict[str, Any], *, hash_key: str) -> tuple[bytes, dict[str, str]]:
    """A wallet or payment-page callback as Kasir sends it, for a merchant's verifier: (body, headers)."""
    body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
    x_req = x_req_signature(hash_key, str(payload["external_id"]), str(payload["order_id"]))
    signature = callback_signature(str(payload["transaction_id"]), x_req)
    return body, {"Content-Type": "application/json", "svc-signature": signature}


def check_notification(request: ReceivedRequest, merchant: TestMerchant, callback_url: str) -> dict[str, Any]:
    """A BNPL notification: the SNAP notify headers of §3.6 and issue 26's svc-signature."""
    assert request.method == "POST"
    assert request.headers["content-type"].startswith("application/json")
    assert request.headers["x-partner-id"] == merchant.id
    assert request.headers["x-version"] == "v1"
    timestamp = request.headers["x-timestamp"]
    parse_aware(timestamp)
    expected = notify_signature(merchant.credentials.client_secret, callback_url, request.body, timestamp)
    assert request.headers["x-signature"] == expected
    payload = dict(request.json())
    partner_ref = payload["originalPartnerReferenceNo"]
    svc = bnpl_svc_signature(merchant.credentials.hash_key, payload["originalReferenceNo"], partner_ref)
    assert request.headers["svc-signature"] == svc
    return payload
