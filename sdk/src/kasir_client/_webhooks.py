"""Verify (and, for your own tests, sign) the callbacks Kasir sends you.

    event = verify_wallet_callback(body, headers, hash_key=HASH_KEY, query=request.query_params,
                                   order=(order.external_id, order.order_id))
    if event.transaction_status == "PAID": ...

The wallet, virtual-account and payment-page signature (`svc-signature`, docs/decisions.md §3.5) is
sha256(transaction_id + sha256(hash_key + external_id + order_id)) (with a sub-merchant, its id
appended before hashing): it covers which transaction
and which order, not the status or the amount. Check it against YOUR order: pass
`order=(external_id, order_id)` from your own database so a callback about another order
cannot pass as this one, and take the amount from your order, not from the callback.
Comparisons are constant-time.

Because the signature says nothing of the status or the amount, confirm a callback before you
fulfil the order: `client.confirm_wallet_payment(event, amount=order.amount)` asks Kasir (an
inquiry, authenticated with your own credentials) and raises ConfirmationError unless the
transaction really is PAID, for that order and that amount. `client.confirm_bnpl_payment` does
the same for BNPL (whose notification is signed with HMAC over the body, and is checked here
against a timestamp tolerance, 300 s by default). A BNPL notification also carries `svc-signature`,
computed as the wallet's with referenceNo as the transaction id and partnerReferenceNo as both
external id and order id; pass `hash_key=` and `verify_bnpl_notification` checks it too. A transfer's
notification (`verify_payout_notification`) is signed the same way, over the transfer's callbackUrl.

Every verified event carries `callback_id` (X-Kasir-Callback-Id) and `attempt` (X-Kasir-Attempt).
Deduplicate by the id: it names the event and is the same on every attempt and on every replay an
operator makes of it (single or bulk, to the original URL or another), so a replay comes with an
id you have seen; drop it. `attempt` counts across the event (replays included) and never repeats
a number within it: for logs, not for deduplication.

During a rotation of your hash_key or client_secret with a grace period, callbacks stay signed with
the previous value until you confirm the switch (or the grace ends): verify with the previous value
until then, with the new one after.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Mapping
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any

from kasir_client._errors import SignatureError
from kasir_client._models import (
    BnplNotification,
    PaymentPageCallback,
    PayoutNotification,
    VaCallback,
    WalletCallback,
    selected_channels_of,
)
from kasir_client._signing import notify_signature, svc_signature, timestamp, x_req_signature

SVC_SIGNATURE = "svc-signature"
DEFAULT_BRAND = "svc"  # Kasir's KASIR_CALLBACK_SIGNATURE_BRAND: the header is `<brand>-signature`


def signature_header(brand: str = DEFAULT_BRAND) -> str:
    """The name of the callback signature header (and wallet query parameter) a Kasir with this brand sends."""
    return f"{brand}-signature"


CALLBACK_ID = "X-Kasir-Callback-Id"
ATTEMPT = "X-Kasir-Attempt"
BNPL_TOLERANCE = 300.0  # seconds an X-TIMESTAMP may be away from now (stripe's default)


def _header(headers: Mapping[str, str], name: str) -> str | None:
    for key, value in headers.items():
        if key.lower() == name.lower():
            return value
    return None


def _delivery(headers: Mapping[str, str]) -> tuple[str | None, int | None]:
    """X-Kasir-Callback-Id (the event's, the same on every attempt and replay) and X-Kasir-Attempt (counted
    across the event). Not signed: use them to deduplicate, not to trust."""
    attempt = _header(headers, ATTEMPT)
    return _header(headers, CALLBACK_ID), int(attempt) if attempt and attempt.strip().isdigit() else None


def _decode(body: bytes | str) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise SignatureError("callback body is not JSON") from exc
    if not isinstance(data, dict):
        raise SignatureError("callback body is not a JSON object")
    return data


def _amount(value: Any) -> Decimal | None:
    if value is None or isinstance(value, bool):
        return None
    return Decimal(str(value))


def _check_svc(
    data: dict[str, Any],
    signature: str | None,
    hash_key: str,
    order: tuple[str, str] | None,
    *,
    name: str = SVC_SIGNATURE,
    sub_merchant_id: str | None = None,
) -> None:
    if not signature:
        raise SignatureError(f"{name} is missing (header and query parameter)")
    external_id, order_id = order if order else (str(data.get("external_id", "")), str(data.get("order_id", "")))
    x_req = x_req_signature(hash_key, external_id, order_id)
    expected = svc_signature(str(data.get("transaction_id", "")), x_req, sub_merchant_id)
    if not hmac.compare_digest(expected.encode(), signature.strip().encode()):
        raise SignatureError(f"{name} does not match this order")
    if order is not None and (data.get("external_id"), data.get("order_id")) != order:
        raise SignatureError("the callback names another order")


def _svc_from(headers: Mapping[str, str], query: Mapping[str, str] | None, name: str = SVC_SIGNATURE) -> str | None:
    """The header, else the query parameter; when both are present they must agree."""
    header = _header(headers, name)
    parameter = query.get(name) if query is not None else None
    if header and parameter is not None and not hmac.compare_digest(header.encode(), str(parameter).encode()):
        raise SignatureError(f"{name} query parameter differs from the header")
    return header or (str(parameter) if parameter is not None else None)


def verify_wallet_callback(
    body: bytes | str,
    headers: Mapping[str, str],
    *,
    hash_key: str,
    query: Mapping[str, str] | None = None,
    order: tuple[str, str] | None = None,
    brand: str = DEFAULT_BRAND,
) -> WalletCallback:
    """Check `svc-signature` (header, or the query parameter of the callback URL) and parse the event.

    `order=(external_id, order_id)` of your own order: the signature is checked against it
    (and the callback must name it) instead of against the ids the body claims. `brand`: the
    Kasir's KASIR_CALLBACK_SIGNATURE_BRAND when it is not `svc` (the header `<brand>-signature`).
    """
    data = _decode(body)
    name = signature_header(brand)
    _check_svc(data, _svc_from(headers, query, name), hash_key, order, name=name)
    details = data.get("payment_details") if isinstance(data.get("payment_details"), dict) else {}
    assert isinstance(details, dict)
    callback_id, attempt = _delivery(headers)
    return WalletCallback(
        transaction_id=str(data.get("transaction_id", "")),
        external_id=str(data.get("external_id", "")),
        order_id=str(data.get("order_id", "")),
        transaction_status=str(data.get("transaction_status", "")),
        amount=_amount(details.get("total_amount", details.get("amount"))),
        raw=data,
        payment_channel=str(data.get("payment_channel") or ""),
        response_code=str(data.get("response_code") or ""),
        response_message=str(data.get("response_message") or ""),
        callback_id=callback_id,
        attempt=attempt,
    )


def verify_payment_page_callback(
    body: bytes | str,
    headers: Mapping[str, str],
    *,
    hash_key: str,
    query: Mapping[str, str] | None = None,
    order: tuple[str, str] | None = None,
    brand: str = DEFAULT_BRAND,
    sub_merchant_id: str | None = None,
) -> PaymentPageCallback:
    """Check a payment-page callback's `svc-signature` and parse the event: a card order's, or a payment
    link's (paid by card, wallet, QRIS or virtual account: `payment_method`, `payment_channel` and `acq`
    say how).

    Answer it with HTTP 200, `Content-Type: application/json` and a body like
    `{"message": "ok"}`, or Kasir sends it again (interface.md: retried 3 times).
    `brand`: the Kasir's KASIR_CALLBACK_SIGNATURE_BRAND when it is not `svc`. `sub_merchant_id`: the one you
    made the payment or link with (the callback must name it); by default the one the callback names, if any
    (the signature then covers it, so a changed one does not verify).
    """
    data = _decode(body)
    name = signature_header(brand)
    claimed = _sub_merchant(data)
    if sub_merchant_id is not None and claimed not in (None, sub_merchant_id):
        raise SignatureError("the callback names another sub-merchant")
    signed_with = sub_merchant_id if sub_merchant_id is not None else claimed
    _check_svc(data, _svc_from(headers, query, name), hash_key, order, name=name, sub_merchant_id=signed_with)
    callback_id, attempt = _delivery(headers)
    return PaymentPageCallback(
        transaction_id=str(data.get("transaction_id", "")),
        external_id=str(data.get("external_id", "")),
        order_id=str(data.get("order_id", "")),
        transaction_status=str(data.get("transaction_status", "")),
        amount=_amount(data.get("amount")),
        raw=data,
        response_message=str(data.get("response_message") or ""),
        acq=str(data.get("acq") or ""),
        callback_id=callback_id,
        attempt=attempt,
        payment_method=str(data.get("payment_method") or ""),
        payment_channel=str(data.get("payment_channel") or ""),
        paid_date=str(data.get("paid_date") or ""),
        card_token=str(data.get("card_token") or data.get("token") or ""),
        sub_merchant_id=signed_with,
        selected_channels=selected_channels_of(data.get("selected_channels")),
    )


def _sub_merchant(data: dict[str, Any]) -> str | None:
    """The sub-merchant the callback names: absent, null and "" are none."""
    claimed = data.get("sub_merchant_id")
    return str(claimed) if claimed not in (None, "") else None


def verify_va_callback(
    body: bytes | str,
    headers: Mapping[str, str],
    *,
    hash_key: str,
    query: Mapping[str, str] | None = None,
    order: tuple[str, str] | None = None,
    sub_merchant_id: str | None = None,
    brand: str = DEFAULT_BRAND,
) -> VaCallback:
    """Check a virtual-account callback's `svc-signature` (header, or the query parameter of the callback URL)
    and parse the event.

    The wallet's signature: sha256(transaction_id + sha256(hash_key + external_id + order_id)); of a VA
    created with a `sub-merchant-id`, sha256(transaction_id + x_req_signature + sub_merchant_id).
    `order=(external_id, order_id)` of your own order: checked against it (and the callback must name it).
    `sub_merchant_id`: the one you created the VA with (the callback must name it); by default the one the
    callback names, if any (the signature covers it, so a changed one does not verify).
    """
    data = _decode(body)
    name = signature_header(brand)
    claimed = _sub_merchant(data)
    if sub_merchant_id is not None and claimed != sub_merchant_id:
        raise SignatureError("the callback names another sub-merchant")
    _check_svc(data, _svc_from(headers, query, name), hash_key, order, name=name, sub_merchant_id=claimed)
    details = data.get("payment_details") if isinstance(data.get("payment_details"), dict) else {}
    assert isinstance(details, dict)
    callback_id, attempt = _delivery(headers)
    return VaCallback(
        transaction_id=str(data.get("transaction_id", "")),
        external_id=str(data.get("external_id", "")),
        order_id=str(data.get("order_id", "")),
        transaction_status=str(data.get("transaction_status", "")),
        reference_id=str(data.get("reference_id") or ""),
        va_number=str(details.get("va_number") or ""),
        payment_system=str(data.get("payment_system") or details.get("payment_system") or ""),
        amount=_amount(details.get("total_amount")),
        va_amount=_amount(details.get("amount")),
        total_paid_amount=_amount(details.get("total_paid_amount")),
        remaining_amount=_amount(details.get("remaining_amount")),
        paid_time=str(details.get("paid_time") or ""),
        raw=data,
        payment_channel=str(data.get("payment_channel") or ""),
        sub_merchant_id=claimed,
        callback_id=callback_id,
        attempt=attempt,
    )


def _verified_snap_notify(
    body: bytes | str,
    headers: Mapping[str, str],
    *,
    client_secret: str,
    callback_url: str,
    merchant_id: str | None,
    tolerance: float | None,
    now: datetime | None,
    hash_key: str | None,
    partner_reference_no: str | None,
) -> tuple[dict[str, Any], str]:
    """A SNAP notification's body and X-TIMESTAMP, once its signatures verify (BNPL's and a transfer's alike)."""
    raw = body.encode() if isinstance(body, str) else body
    ts = _header(headers, "X-TIMESTAMP")
    signature = _header(headers, "X-SIGNATURE")
    if not ts or not signature:
        raise SignatureError("X-TIMESTAMP or X-SIGNATURE header is missing")
    if not hmac.compare_digest(notify_signature(client_secret, callback_url, raw, ts).encode(), signature.encode()):
        raise SignatureError("X-SIGNATURE does not verify")
    if tolerance is not None:
        _check_timestamp(ts, tolerance, now)
    if merchant_id is not None and _header(headers, "X-PARTNER-ID") != merchant_id:
        raise SignatureError("X-PARTNER-ID is not this merchant")
    data = _decode(raw)
    if hash_key is not None:
        _check_bnpl_svc(data, _header(headers, SVC_SIGNATURE), hash_key, partner_reference_no)
    return data, ts


def verify_bnpl_notification(
    body: bytes | str,
    headers: Mapping[str, str],
    *,
    client_secret: str,
    callback_url: str,
    merchant_id: str | None = None,
    tolerance: float | None = BNPL_TOLERANCE,
    now: datetime | None = None,
    hash_key: str | None = None,
    partner_reference_no: str | None = None,
) -> BnplNotification:
    """Check the SNAP notify X-SIGNATURE (HMAC-SHA512 over callbackUrl:v1:sha256(minify(body)):X-TIMESTAMP).

    `tolerance`: seconds the signed X-TIMESTAMP may be before or after `now` (default 300), so a
    notification captured once cannot be replayed later; None turns the check off. Kasir signs
    every delivery afresh, so a retry carries a new timestamp.

    `hash_key`: also check `svc-signature`, sha256(referenceNo + sha256(hash_key + partnerReferenceNo
    + partnerReferenceNo)); with `partner_reference_no` of YOUR order it is checked against that
    (and the notification must name it) instead of the id the body claims.
    """
    data, ts = _verified_snap_notify(
        body,
        headers,
        client_secret=client_secret,
        callback_url=callback_url,
        merchant_id=merchant_id,
        tolerance=tolerance,
        now=now,
        hash_key=hash_key,
        partner_reference_no=partner_reference_no,
    )
    amount = data.get("amount") if isinstance(data.get("amount"), dict) else {}
    assert isinstance(amount, dict)
    tenure = data.get("tenure")
    callback_id, attempt = _delivery(headers)
    return BnplNotification(
        original_partner_reference_no=str(data.get("originalPartnerReferenceNo", "")),
        original_reference_no=str(data.get("originalReferenceNo", "")),
        latest_transaction_status=str(data.get("latestTransactionStatus", "")),
        transaction_status_desc=str(data.get("transactionStatusDesc", "")),
        amount=_amount(amount.get("value")),
        # Kasir sends 0 while no tenure is chosen (never null): None here, as before.
        tenure=int(tenure) if isinstance(tenure, (int, str)) and str(tenure).isdigit() and int(tenure) else None,
        raw=data,
        callback_id=callback_id,
        attempt=attempt,
        timestamp=ts,
    )


def verify_payout_notification(
    body: bytes | str,
    headers: Mapping[str, str],
    *,
    client_secret: str,
    callback_url: str,
    merchant_id: str | None = None,
    tolerance: float | None = BNPL_TOLERANCE,
    now: datetime | None = None,
    hash_key: str | None = None,
    partner_reference_no: str | None = None,
) -> PayoutNotification:
    """Check a transfer's notification (docs/merchant/payouts.md), signed as a BNPL notification is: X-SIGNATURE
    over `callback_url` (the transfer's additionalInfo.callbackUrl, exactly as you sent it), and with `hash_key`
    also `svc-signature` (with `partner_reference_no` of YOUR transfer it is checked against that, and the
    notification must name it). `tolerance` as for verify_bnpl_notification.

    The notification tells a move into 00 (success), 06 (failed) or 04 (refunded); the status inquiry
    (`client.transfer_status`) always tells the same.
    """
    data, ts = _verified_snap_notify(
        body,
        headers,
        client_secret=client_secret,
        callback_url=callback_url,
        merchant_id=merchant_id,
        tolerance=tolerance,
        now=now,
        hash_key=hash_key,
        partner_reference_no=partner_reference_no,
    )
    amount = data.get("amount") if isinstance(data.get("amount"), dict) else {}
    info = data.get("additionalInfo") if isinstance(data.get("additionalInfo"), dict) else {}
    assert isinstance(amount, dict)
    assert isinstance(info, dict)
    reason = info.get("reason")
    callback_id, attempt = _delivery(headers)
    return PayoutNotification(
        original_partner_reference_no=str(data.get("originalPartnerReferenceNo", "")),
        original_reference_no=str(data.get("originalReferenceNo", "")),
        original_external_id=str(data.get("originalExternalId", "")),
        latest_transaction_status=str(data.get("latestTransactionStatus", "")),
        transaction_status_desc=str(data.get("transactionStatusDesc", "")),
        amount=_amount(amount.get("value")),
        beneficiary_account_no=str(data.get("beneficiaryAccountNo", "")),
        beneficiary_bank_code=str(data.get("beneficiaryBankCode", "")),
        finished_time=str(data.get("finishedTime", "")),
        reason=None if reason is None else str(reason),
        raw=data,
        callback_id=callback_id,
        attempt=attempt,
        timestamp=ts,
    )


def _bnpl_svc(hash_key: str, reference_no: str, partner_reference_no: str) -> str:
    return svc_signature(reference_no, x_req_signature(hash_key, partner_reference_no, partner_reference_no))


def _check_bnpl_svc(data: dict[str, Any], signature: str | None, hash_key: str, partner_ref: str | None) -> None:
    if not signature:
        raise SignatureError("svc-signature header is missing")
    claimed = str(data.get("originalPartnerReferenceNo", ""))
    expected = _bnpl_svc(hash_key, str(data.get("originalReferenceNo", "")), partner_ref or claimed)
    if not hmac.compare_digest(expected.encode(), signature.strip().encode()):
        raise SignatureError("svc-signature does not match this order")
    if partner_ref is not None and claimed != partner_ref:
        raise SignatureError("the notification names another order")


def _check_timestamp(ts: str, tolerance: float, now: datetime | None) -> None:
    try:
        signed = datetime.fromisoformat(ts.strip())
    except ValueError as exc:
        raise SignatureError(f"X-TIMESTAMP {ts!r} is not an ISO 8601 time") from exc
    if signed.tzinfo is None:
        raise SignatureError(f"X-TIMESTAMP {ts!r} has no UTC offset")
    skew = abs(((now or datetime.now(timezone.utc)) - signed).total_seconds())
    if skew > tolerance:
        raise SignatureError(f"X-TIMESTAMP {ts} is {skew:.0f} s away from now (tolerance {tolerance:g} s)")


def sign_wallet_callback(
    payload: dict[str, Any], *, hash_key: str, brand: str = DEFAULT_BRAND, sub_merchant_id: str | None = None
) -> tuple[bytes, dict[str, str]]:
    """A fake wallet callback for your own tests: (body, headers).

    Kasir also repeats the signature as the query parameter `svc-signature` of the callback URL:
    `headers["svc-signature"]` is that value.
    """
    body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
    sig = svc_signature(
        str(payload.get("transaction_id", "")),
        x_req_signature(hash_key, str(payload.get("external_id", "")), str(payload.get("order_id", ""))),
        sub_merchant_id,
    )
    return body, {"Content-Type": "application/json", signature_header(brand): sig}


def sign_payment_page_callback(
    payload: dict[str, Any], *, hash_key: str, brand: str = DEFAULT_BRAND, sub_merchant_id: str | None = None
) -> tuple[bytes, dict[str, str]]:
    """A fake payment-page callback (a card order's or a payment link's) for your own tests: (body, headers).
    Header only, no query. Signed with `sub_merchant_id`, else with the payload's when it names one."""
    if sub_merchant_id is None:
        sub_merchant_id = _sub_merchant(payload)
    return sign_wallet_callback(payload, hash_key=hash_key, brand=brand, sub_merchant_id=sub_merchant_id)


def sign_va_callback(
    payload: dict[str, Any], *, hash_key: str, brand: str = DEFAULT_BRAND
) -> tuple[bytes, dict[str, str]]:
    """A fake virtual-account callback for your own tests: (body, headers).

    Signed as Kasir signs it: with the payload's `sub_merchant_id` when it has one. Kasir also repeats the
    signature as the query parameter `svc-signature` of the callback URL: `headers["svc-signature"]` is that
    value.
    """
    sub_merchant_id = payload.get("sub_merchant_id")
    return sign_wallet_callback(
        payload, hash_key=hash_key, brand=brand, sub_merchant_id=str(sub_merchant_id) if sub_merchant_id else None
    )


def sign_bnpl_notification(
    payload: dict[str, Any],
    *,
    client_secret: str,
    callback_url: str,
    merchant_id: str,
    at: datetime | None = None,
    hash_key: str | None = None,
) -> tuple[bytes, dict[str, str]]:
    """A fake BNPL notification for your own tests: (body, headers), signed at `at` (default now);
    with `hash_key`, `svc-signature` too, as Kasir sends it."""
    body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
    ts = timestamp(at)
    headers = {
        "Content-Type": "application/json",
        "X-TIMESTAMP": ts,
        "X-PARTNER-ID": merchant_id,
        "X-VERSION": "v1",
        "X-SIGNATURE": notify_signature(client_secret, callback_url, body, ts),
    }
    if hash_key is not None:
        headers[SVC_SIGNATURE] = _bnpl_svc(
            hash_key, str(payload.get("originalReferenceNo", "")), str(payload.get("originalPartnerReferenceNo", ""))
        )
    return body, headers


def sign_payout_notification(
    payload: dict[str, Any],
    *,
    client_secret: str,
    callback_url: str,
    merchant_id: str,
    at: datetime | None = None,
    hash_key: str | None = None,
) -> tuple[bytes, dict[str, str]]:
    """A fake transfer notification for your own tests: (body, headers), signed as Kasir signs it."""
    return sign_bnpl_notification(
        payload,
        client_secret=client_secret,
        callback_url=callback_url,
        merchant_id=merchant_id,
        at=at,
        hash_key=hash_key,
    )
