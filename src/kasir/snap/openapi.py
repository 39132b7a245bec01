"""OpenAPI metadata for SNAP routes: the raw-body request schema, headers and error bodies."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from kasir.errors import WireFormat, wire
from kasir.snap.schemas import SnapErrorBody


def snap_route(service_code: str, request_model: type[BaseModel] | None = None) -> dict[str, Any]:
    """`openapi_extra` for a SNAP route whose body is read raw (it is signed byte for byte)."""
    extra = wire(WireFormat.SNAP, service_code)
    if request_model is not None:
        schema = request_model.model_json_schema(by_alias=True, ref_template="#/components/schemas/{model}")
        for name, definition in schema.pop("$defs", {}).items():
            _EXTRA_COMPONENTS[name] = definition
        name = REQUEST_NAMES.get(request_model.__name__, request_model.__name__)
        schema["title"] = name
        if name in REQUEST_RULES:
            rules = "Rules across fields (answered 400 when broken): " + REQUEST_RULES[name]
            schema["description"] = f"{schema['description']}\n\n{rules}" if schema.get("description") else rules
        _EXTRA_COMPONENTS[name] = schema
        ref = {"$ref": f"#/components/schemas/{name}"}
        extra["requestBody"] = {"required": True, "content": {"application/json": {"schema": ref}}}
    return extra


def one_of_body(name: str, description: str, *request_models: type[BaseModel]) -> dict[str, Any]:
    """The `requestBody` of a raw-body route that takes one of several bodies: each documented as `snap_route`
    documents one, and the component `name` is exactly one of them (`oneOf`)."""
    refs = [snap_route("00", model)["requestBody"]["content"]["application/json"]["schema"] for model in request_models]
    _EXTRA_COMPONENTS[name] = {"title": name, "description": description, "oneOf": refs}
    ref = {"$ref": f"#/components/schemas/{name}"}
    return {"required": True, "content": {"application/json": {"schema": ref}}}


def one_of(schema: dict[str, Any]) -> None:
    """`json_schema_extra` of a union whose alternatives never match the same value: `oneOf`, not pydantic's
    `anyOf` (a code generator then knows exactly one applies)."""
    schema["oneOf"] = schema.pop("anyOf")


# The request bodies' names in the document (what a generated client calls its classes), by model.
REQUEST_NAMES = {
    "ChargeRequest": "CardChargeRequest",
    "CreatePaymentRequest": "WalletPaymentRequest",
    "InquiryRequest": "WalletInquiryRequest",
    "RefundRequest": "WalletRefundRequest",
    "VoidRequest": "WalletVoidRequest",
    "DummyPaymentRequest": "WalletDummyPaymentRequest",
    "PaymentCalculationRequest": "BnplCalculationRequest",
    "QrCheckoutRequest": "BnplCheckoutRequest",
    "BnplStatusInquiryRequest": "BnplStatusRequest",
}


# Nested models of raw-body routes, added to the document's components by app.py.
_EXTRA_COMPONENTS: dict[str, Any] = {}


def extra_components() -> dict[str, Any]:
    return dict(_EXTRA_COMPONENTS)


def snap_errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    descriptions = {
        400: "Bad request: `400xx00`, `400xx01 Invalid Field Format {field}`, "
        "`400xx02 Invalid Mandatory Field {field}`",
        401: "Unauthorized: `401xx00 Unauthorized. {reason}`, `401xx01 Invalid Token (B2B)`",
        403: "`403xx01 Feature Not Allowed`",
        404: "`404xx01 Transaction Not Found`",
        409: "`409xx00 Conflict` (X-EXTERNAL-ID reused today; with Retry-After: a request with the same "
        "X-Idempotency-Key is still running), `409xx01` duplicate partnerReferenceNo",
        422: "`422xx00`: X-Idempotency-Key reused with another body",
        429: "`429xx00 Too Many Requests`: a rate limit or a lockout after failed authentications; retry after "
        "Retry-After (seconds)",
        500: "`500xx00 General Error` (with Retry-After: the database or the processor is unavailable; retry after it)",
    }
    return {status: {"model": SnapErrorBody, "description": descriptions[status]} for status in statuses}


# The headers' rules (docs/decisions.md §3.2; checked in kasir.auth.snap and kasir.snap.headers).
_HEADER_SCHEMAS: dict[str, dict[str, Any]] = {
    "Content-Type": {"type": "string", "enum": ["application/json"]},
    "X-EXTERNAL-ID": {"type": "string", "pattern": "^[0-9]{1,36}$"},
    "CHANNEL-ID": {"type": "string", "pattern": r"^\S(.{0,3}\S)?$"},  # 1 to 5 characters, as read (stripped)
}


def snap_header_params(*names: str) -> list[dict[str, Any]]:
    return [
        {"name": name, "in": "header", "required": True, "schema": _HEADER_SCHEMAS.get(name, {"type": "string"})}
        for name in names
    ]


# What the fields' own schemas cannot say: the rules across fields, checked by the services.
_ITEMS_SUM = "the items' amount × qty add up to the payment's amount"
REQUEST_RULES = {
    "CardChargeRequest": f"{_ITEMS_SUM} (itemDetails, paymentDetails.amount); cardDetails is required when "
    "paymentMode is CLOSE; paymentChannel suits paymentMethod; paymentDetails.expiredTime is in the future.",
    "WalletPaymentRequest": f"{_ITEMS_SUM} (item_details, payment_details.amount); payment_details.expired_time is "
    "1 minute to 24 hours from now; wallet_details is required on create-payment (optional on create-qr); "
    "create-qr takes the QRIS channel only (amount at most 13 digits), create-payment every other channel.",
    "BnplCalculationRequest": f"{_ITEMS_SUM} (itemDetails, amount.value).",
    "BnplCheckoutRequest": f"{_ITEMS_SUM} (itemDetails, paymentDetails.amount.value).",
}
