"""The card room's payment-page callback: its payload (interface.md "Payment-page callback payload")
and its record in the callbacks outbox, in the unit of work of the change it reports.

The outbox sends it after commit (kasir.callbacks), signed per docs/decisions.md §3.5 when each
attempt is sent: the `svc_signature` over the order's `x_req_signature` (from the ids recorded
here, `SignedIds`), with the sub-merchant of a charge in the provider SDK's dialect.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from kasir.callbacks.models import CallbackKind
from kasir.callbacks.service import SignedIds, callback_outbox
from kasir.card.cards import card_channels
from kasir.card.page_links import return_redirect
from kasir.card.repository import CardOrderRow
from kasir.card.states import MAX_FAILED_ATTEMPTS
from kasir.db import Session
from kasir.kit.clock import JAKARTA, isoformat_seconds
from kasir.payments import owners
from kasir.payments.owners import InnerEvent, InnerOutcome


async def record_callback(session: Session, order: CardOrderRow, event: str) -> None:
    """The order's callback for `event` (SUCCESS, FAILED, EXPIRED), sent once the unit commits. A payment
    link's order sends none: the link is told instead (kasir.payments.owners) and reports it."""
    if order.link_id is not None:
        await owners.settled(session, _owned_outcome(order, event))
        return
    if not order.callback_url:
        return  # neither the request nor the merchant named a callback URL
    await callback_outbox.record(
        session,
        kind=CallbackKind.PAYMENT_PAGE,
        merchant_id=order.merchant_id,
        transaction_ref=order.id,
        event=event,
        url=order.callback_url,
        payload=callback_payload(order, event),
        signed_ids=SignedIds(order.id, order.external_id, order.order_id, order.sub_merchant_id),
    )


def _owned_outcome(order: CardOrderRow, event: str) -> InnerOutcome:
    owner = order.link_id or ""
    if event == "SUCCESS":
        return InnerOutcome(owner, order.id, InnerEvent.PAID, acq=order.acq, card_token=order.card_token)
    if event == "FAILED":  # the order stays open for the next attempt; its third failure expires it after
        reason = order.response_message or ""
        # The third: the order takes no more attempts. Said so, the link ends the attempt as FAILED rather than
        # closing the order itself, which the order is about to expire (twice would be refused).
        ended = order.attempts_failed >= MAX_FAILED_ATTEMPTS
        return InnerOutcome(owner, order.id, InnerEvent.FAILED, reason=reason, ended=ended, acq=order.acq)
    return InnerOutcome(owner, order.id, InnerEvent.CLOSED, acq=order.acq)


def _utc_iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _text(value: Any) -> str:
    """A string field of a callback: "" when it has no value (issue 26: never null)."""
    return "" if value is None else str(value)


def _address(address: dict[str, Any]) -> dict[str, Any]:
    return {
        "full_name": _text(address.get("fullName")),
        "phone": _text(address.get("phone")),
        "address": _text(address.get("address")),
        "city": _text(address.get("city")),
        "postal_code": _text(address.get("postalCode")),
        "country": _text(address.get("country")),
    }


def callback_payload(order: CardOrderRow, transaction_status: str) -> dict[str, Any]:
    """interface.md "Payment-page callback payload": every field, snake_case."""
    details: dict[str, Any] = json.loads(order.details)
    customer = details.get("customerDetails", {})
    billing = details.get("billingAddress", {})
    # The acquirer that processed an attempt; "" when none was tried (issue 26: not a guess).
    acq = order.acq or ""
    channel_acq = card_channels().get(order.payment_channel)
    return {
        "transaction_id": order.id,
        "order_id": order.order_id,
        "external_id": order.external_id,
        "currency": order.currency,
        "transaction_status": transaction_status,
        "response_message": order.response_message or "",
        "payment_method": "CARD",
        "payment_channel": "CARD",
        "acq": acq,
        "paid_date": _utc_iso(order.paid_at) if order.paid_at is not None else "",
        "amount": order.amount,
        # The channel's own acquirer where it has one (BCACC: BCA), else the one that processed an attempt.
        "selected_channels": [{"channel": order.payment_channel, "acq": channel_acq or acq}],
        "is_customer_paying_fee": bool(details.get("paymentDetails", {}).get("isCustomerPayingFee", False)),
        "item_details": [
            {"item_id": item["itemId"], "name": item["name"], "amount": item["amount"], "qty": item["qty"]}
            for item in details.get("itemDetails", [])
        ],
        "save_card": order.save_card,
        "card_token": order.card_token or "",
        "customer_details": {
            "full_name": _text(customer.get("fullName")),
            "email": _text(customer.get("email")),
            "phone": _text(customer.get("phone")),
            "address": _text(billing.get("address")),
            "is_email_show": True,
            "is_phone_show": True,
        },
        "shipping_address": _address(details.get("shippingAddress", {})),
        "billing_address": _address(billing),
        "callback_url": order.callback_url or "",
        "success_redirect_url": return_redirect(order, "SUCCESS"),
        "failed_redirect_url": return_redirect(order, "EXPIRED"),
        "expired_time": isoformat_seconds(order.expires_at, JAKARTA),
    } | (dialect_callback_fields(order) if order.dialect else {})


def dialect_callback_fields(order: CardOrderRow) -> dict[str, Any]:
    """What a payment in the provider SDK's dialect adds to its callbacks: the instalments, the sub-merchant."""
    tenor = int(order.tenor or "0")
    return {
        "payment_mode": "INSTALLMENT" if tenor else "CLOSE",
        "tenor": tenor,
        "sub_merchant_id": order.sub_merchant_id,
    }
