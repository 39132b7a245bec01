"""The ewallet translation: a card charge whose `paymentMethod` is ewallet becomes a wallet
create-payment (docs/decisions.md §7), and the wallet room's refusals of it come back naming
the card request's camelCase fields.

The card service forwards the translated request to the wallet room (`wallet_service`); the
transaction, its page and its callbacks are the wallet's from then on.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import ValidationError
from pydantic.alias_generators import to_camel

from kasir.card.schemas import CardValidationError, ChargeRequest
from kasir.errors import FieldError, KasirError, from_pydantic_errors
from kasir.wallet.schemas import CreatePaymentRequest


def wallet_request(request: ChargeRequest) -> CreatePaymentRequest:
    """The wallet create-payment of an ewallet charge; 400 VALIDATION_ERROR naming the card request's fields."""
    try:
        return CreatePaymentRequest.model_validate(wallet_request_body(request))
    except ValidationError as exc:
        errors = from_pydantic_errors(exc.errors(include_input=False)).errors
        raise CardValidationError([FieldError(card_field(e.field), e.message) for e in errors]) from None


def in_card_fields(error: KasirError) -> None:
    """A refusal of the wallet room's, its fields renamed to the card request's (its reason, where it has
    one and named no field, becomes the message of each)."""
    reason = getattr(error, "reason", None)
    error.errors = [
        FieldError(card_field(e.field), reason if (reason and not error.errors) else e.message)
        for e in error.field_errors()
    ]


def _address_body(address: Any) -> dict[str, Any]:
    return {
        "full_name": address.full_name,
        "phone": address.phone,
        "address": address.address,
        "city": address.city,
        "postal_code": address.postal_code,
        "country": address.country,
    }


def wallet_request_body(request: ChargeRequest) -> dict[str, Any]:
    """The card request as a wallet create-payment body (docs/decisions.md §5 field names)."""
    details = request.payment_details
    body: dict[str, Any] = {
        "external_id": request.external_id,
        "order_id": request.order_id,
        "currency": request.currency,
        "payment_method": "wallet",
        "payment_channel": request.payment_channel,
        "payment_details": {"amount": details.amount, "transaction_description": details.transaction_description},
        "customer_details": {
            "email": request.customer_details.email,
            "full_name": request.customer_details.full_name,
            "phone": request.customer_details.phone,
        },
        "item_details": [
            {"item_id": i.item_id, "name": i.name, "amount": i.amount, "qty": i.qty}
            | ({"description": i.description} if i.description else {})
            for i in request.item_details
        ],
        # The card request names no wallet account: the customer's phone is it.
        "wallet_details": {"id": request.customer_details.phone, "id_type": "HP"},
        "billing_address": _address_body(request.billing_address),
        "shipping_address": _address_body(request.shipping_address),
        "return_url": request.return_url,
    }
    if details.expired_time:
        body["payment_details"]["expired_time"] = details.expired_time
    if request.callback_url:
        body["callback_url"] = request.callback_url
    if request.additional_data:
        body["additional_data"] = request.additional_data
    return body


# The wallet room's field names that are not the camelCase of the card request's.
_WALLET_FIELDS = {"wallet_details.id": "customerDetails.phone", "wallet_details": "customerDetails.phone"}


def card_field(field: str) -> str:
    """`payment_details.expired_time` -> `paymentDetails.expiredTime` (errors of an ewallet charge)."""
    if field in _WALLET_FIELDS:
        return _WALLET_FIELDS[field]
    return ".".join(re.sub(r"^[a-z_]+", lambda m: to_camel(m.group(0)), part) for part in field.split("."))
