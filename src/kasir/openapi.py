"""The OpenAPI document, completed from what the routes and the error handlers do (issue 26).

FastAPI builds the paths and the request and answer schemas from the routes; this module adds what a code
generator needs and FastAPI cannot know:

- short, stable operation ids (`createWalletPayment`, `chargeCard`), one per route in OPERATION_IDS;
- the error answers every route can give, in its wire format (kasir.errors): FastAPI documents a `422` with
  its own `HTTPValidationError` on every operation that takes input, which Kasir never answers (a request
  that fails validation is a 400 in the route's format);
- the credentials as `components.securitySchemes` and per-operation `security` (Basic for wallet and card,
  the access token as Bearer for BNPL's symmetric signature or none for its asymmetric one, the admin token);
  the signature headers stay documented header parameters;
- the response headers: `X-Request-ID` on every answer, `Idempotent-Replayed` on the answers of the routes
  that take `X-Idempotency-Key`, `Retry-After` on 429, on an outage's 500 or 503, and on the 409 of a request
  still running;
- the callbacks as `webhooks`, each with its payload, its signature headers and the answer expected;
- examples of every error body, and `/metrics` as text/plain;
- `links` from the answers that create or list something to the operations that act on it (LINKS): what a
  generator follows, and what Schemathesis's stateful phase chains (tests/test_api_fuzz.py);
- no `default: null`: an optional field is one a client may leave out (issue 42).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from kasir.errors import WireFormat, wire_format_of_path

_FASTAPI_VALIDATION = "#/components/schemas/HTTPValidationError"
_BODIES = {
    WireFormat.SNAP: "SnapErrorBody",
    WireFormat.WALLET: "WalletErrorBody",
    WireFormat.CARD: "CardErrorBody",
    WireFormat.PLAIN: "PlainErrorBody",
}
PLAIN_ERROR_BODY: dict[str, Any] = {
    "title": "PlainErrorBody",
    "type": "object",
    "description": "Operations, admin and page routes: the error's type, a message, the request's id.",
    "properties": {
        "error": {"type": "string"},
        "message": {"type": "string"},
        "request_id": {"type": "string"},
    },
    "required": ["error", "message", "request_id"],
}
_ERROR_EXAMPLES: dict[str, list[dict[str, Any]]] = {
    "SnapErrorBody": [{"responseCode": "4019200", "responseMessage": "Unauthorized. Invalid signature"}],
    "WalletErrorBody": [{"response_code": "01", "response_message": "order_id may contain only letters, digits and -"}],
    "CardErrorBody": [
        {
            "statusCode": "400",
            "statusMessage": "VALIDATION_ERROR",
            "errors": [{"field": "orderId", "message": "is required"}],
        }
    ],
    "PlainErrorBody": [{"error": "unauthorized", "message": "admin token missing or wrong", "request_id": "9f1c"}],
}
_DESCRIPTIONS = {
    "400": "Bad request: a field or parameter is missing or invalid (named in the answer)",
    "401": "Unauthorized: Authorization: Bearer <KASIR_ADMIN_TOKEN> missing or wrong",
    "404": "Not found: no such id",
    "429": "Too many failed authentications from this address: retry after Retry-After (seconds)",
}

# One short, stable id per operation: what a generated client names its functions after. A route that is not
# here keeps FastAPI's generated id, and tests/test_openapi.py fails until it is added.
OPERATION_IDS: dict[tuple[str, str], str] = {
    ("get", "/healthz"): "getHealth",
    ("get", "/readyz"): "getReadiness",
    ("get", "/metrics"): "getMetrics",
    ("post", "/auth/merchants/v1.0/access-token/b2b"): "createAccessToken",
    ("post", "/api/v1.0/access-token/b2b"): "createDisbursementAccessToken",
    ("post", "/v1.0/access-token/b2b"): "createAccessTokenGeneric",
    ("post", "/ewallet/v2/create-payment"): "createWalletPayment",
    ("post", "/ewallet/v2/create-qr"): "createWalletQrPayment",
    ("post", "/ewallet/v2/inquiry"): "getWalletTransaction",
    ("post", "/ewallet/v2/refund"): "refundWalletPayment",
    ("post", "/ewallet/v2/void"): "voidWalletPayment",
    ("post", "/ewallet/v2/dummy-payment"): "simulateWalletPayment",
    ("post", "/va"): "createVirtualAccount",
    ("post", "/va/inquiry"): "getVirtualAccount",
    ("post", "/va/cancel"): "cancelVirtualAccount",
    ("post", "/va/dummy-payment"): "simulateVirtualAccountPayment",
    ("post", "/payment-page/payment"): "createPaymentLink",
    ("get", "/payment-page/payment/{transaction_id}"): "getPaymentLink",
    ("post", "/api/v1.0/balance-inquiry"): "inquireDisbursementBalance",
    ("post", "/api/v1.0/account-inquiry-external"): "inquireDisbursementAccount",
    ("post", "/api/v1.2/transfer-interbank"): "createTransfer",
    ("post", "/api/v1.0/transfer-interbank"): "createTransferV10",
    ("post", "/api/v1.1/transfer-interbank"): "createTransferV11",
    ("post", "/api/v1.0/transfer/status"): "getTransferStatus",
    ("post", "/api/v1.0/transaction-history-list"): "listDisbursementHistory",
    ("post", "/api/v1.0/transaction-history-detail"): "getDisbursementHistoryDetail",
    ("post", "/v1.0/bnpl/payment-calculation"): "calculateBnplPayment",
    ("post", "/v1.1/bnpl/payment-calculation"): "calculateBnplPaymentV11",
    ("post", "/v1.0/bnpl/qr-checkout"): "createBnplCheckout",
    ("post", "/v1.1/bnpl/qr-checkout"): "createBnplCheckoutV11",
    ("post", "/v1.0/bnpl/status"): "getBnplStatus",
    ("post", "/v1.1/bnpl/status"): "getBnplStatusV11",
    ("post", "/card-v2/v1/charge"): "chargeCard",
    ("post", "/card-v2/v1/charge-direct"): "chargeCardDirect",
    ("post", "/card-v2/v2/charge-direct"): "chargeCardDirectV2",
    ("post", "/card-v2/inquiry"): "getCardOrder",
    ("post", "/processors/{name}/notify"): "receiveProcessorNotification",
    ("get", "/admin/merchants"): "listMerchants",
    ("post", "/admin/merchants"): "createMerchant",
    ("get", "/admin/merchants/{merchant_id}"): "getMerchant",
    ("post", "/admin/merchants/{merchant_id}/rotate-key"): "rotateMerchantKey",
    ("post", "/admin/merchants/{merchant_id}/rotate"): "rotateMerchantSecrets",
    ("post", "/admin/merchants/{merchant_id}/confirm-rotation"): "confirmMerchantRotation",
    ("post", "/admin/merchants/{merchant_id}/callback-url"): "setMerchantCallbackUrl",
    ("post", "/admin/merchants/{merchant_id}/disable"): "disableMerchant",
    ("post", "/admin/merchants/{merchant_id}/enable"): "enableMerchant",
    ("get", "/admin/merchants/{merchant_id}/sub-merchants"): "listSubMerchants",
    ("post", "/admin/merchants/{merchant_id}/sub-merchants"): "addSubMerchant",
    ("delete", "/admin/merchants/{merchant_id}/sub-merchants/{sub_merchant_id}"): "removeSubMerchant",
    ("get", "/admin/merchants/{merchant_id}/disbursement-balance"): "getDisbursementBalance",
    ("post", "/admin/merchants/{merchant_id}/disbursement-balance/top-ups"): "topUpDisbursementBalance",
    ("get", "/admin/callbacks"): "listCallbacks",
    ("get", "/admin/callbacks/{callback_id}"): "getCallback",
    ("post", "/admin/callbacks/{callback_id}/replay"): "replayCallback",
    ("post", "/admin/callbacks/{callback_id}/replay-to"): "replayCallbackTo",
    ("post", "/admin/callbacks/replay-given-up"): "replayGivenUpCallbacks",
    ("post", "/admin/callbacks/recover"): "recoverCallbacks",
    ("get", "/admin/audit"): "listAuditEvents",
    ("get", "/admin/payments"): "listPayments",
    ("get", "/admin/payments/{payment_id}"): "getPayment",
    ("get", "/admin/users"): "listUsers",
    ("post", "/admin/users"): "createUser",
    ("post", "/admin/users/{user_id}/disable"): "disableUser",
    ("post", "/admin/users/{user_id}/enable"): "enableUser",
    ("post", "/admin/users/{user_id}/reset-password"): "resetUserPassword",
    ("post", "/admin/users/{user_id}/unlock"): "unlockUser",
}

_WALLET_IDS = {
    "transaction_id": "$response.body#/transaction_id",
    "external_id": "$response.body#/external_id",
    "order_id": "$response.body#/order_id",
}
_WALLET_REQUEST_IDS = {name: f"$request.body#/{name}" for name in _WALLET_IDS}
_WALLET_ACTIONS = {
    "Inquiry": ("getWalletTransaction", {}),
    "Refund": ("refundWalletPayment", {}),
    "Void": ("voidWalletPayment", {}),
    "Pay": (
        "simulateWalletPayment",
        {"payment_method": "$response.body#/payment_method", "payment_channel": "$response.body#/payment_channel"},
    ),
}
_MERCHANT_ACTIONS = {
    "Get": "getMerchant",
    "RotateKey": "rotateMerchantKey",
    "RotateSecrets": "rotateMerchantSecrets",
    "ConfirmRotation": "confirmMerchantRotation",
    "SetCallbackUrl": "setMerchantCallbackUrl",
    "Disable": "disableMerchant",
    "Enable": "enableMerchant",
    "ListSubMerchants": "listSubMerchants",
    "AddSubMerchant": "addSubMerchant",
}
_USER_ACTIONS = {
    "Disable": "disableUser",
    "Enable": "enableUser",
    "Unlock": "unlockUser",
    "ResetPassword": "resetUserPassword",
}
_CALLBACK_ACTIONS = {"Get": "getCallback", "Replay": "replayCallback", "ReplayTo": "replayCallbackTo"}


def _link(
    operation_id: str, description: str, *, parameters: dict[str, str] | None = None, body: dict[str, str] | None = None
) -> dict[str, Any]:
    link: dict[str, Any] = {"operationId": operation_id, "description": description}
    if parameters:
        link["parameters"] = parameters
    if body:
        link["requestBody"] = body
    return link


def _wallet_links(
    ids: dict[str, str], source: str, actions: tuple[str, ...] = tuple(_WALLET_ACTIONS)
) -> dict[str, Any]:
    return {
        name: _link(operation_id, f"The same transaction, by the ids of {source}", body={**ids, **extra})
        for name, (operation_id, extra) in _WALLET_ACTIONS.items()
        if name in actions
    }


def _bnpl_status(version: str) -> dict[str, Any]:
    return {
        "Status": _link(
            "getBnplStatus" + version,
            "The checkout's status, by its references",
            body={
                "originalPartnerReferenceNo": "$response.body#/partnerReferenceNo",
                "originalReferenceNo": "$response.body#/referenceNo",
            },
        )
    }


def _by_first(operation_ids: dict[str, str], parameter: str, pointer: str, what: str) -> dict[str, Any]:
    return {
        name: _link(operation_id, f"The first {what} of the list", parameters={parameter: f"$response.body#{pointer}"})
        for name, operation_id in operation_ids.items()
    }


# Per (method, path, status): the answer's links, named, in OpenAPI's runtime expressions. Where the next
# operation takes ids in its body, the link gives those fields alone (the rest of the body is the caller's).
LINKS: dict[tuple[str, str, str], dict[str, Any]] = {
    ("post", "/admin/merchants", "201"): {
        name: _link(
            operation_id, "The merchant just created", parameters={"merchant_id": "$response.body#/merchant_id"}
        )
        for name, operation_id in _MERCHANT_ACTIONS.items()
    },
    ("get", "/admin/merchants", "200"): _by_first(
        {"Get": "getMerchant"}, "merchant_id", "/merchants/0/merchant_id", "merchant"
    ),
    ("post", "/admin/merchants/{merchant_id}/sub-merchants", "201"): {
        "Remove": _link(
            "removeSubMerchant",
            "The sub-merchant just added",
            parameters={
                "merchant_id": "$request.path.merchant_id",
                "sub_merchant_id": "$response.body#/sub_merchant_id",
            },
        )
    },
    ("post", "/admin/users", "201"): {
        name: _link(operation_id, "The user just created", parameters={"user_id": "$response.body#/id"})
        for name, operation_id in _USER_ACTIONS.items()
    },
    ("get", "/admin/users", "200"): _by_first(_USER_ACTIONS, "user_id", "/users/0/id", "user"),
    ("get", "/admin/callbacks", "200"): _by_first(_CALLBACK_ACTIONS, "callback_id", "/callbacks/0/id", "callback"),
    ("post", "/admin/callbacks/{callback_id}/replay", "201"): {
        "Get": _link("getCallback", "The new delivery", parameters={"callback_id": "$response.body#/id"})
    },
    ("get", "/admin/payments", "200"): _by_first({"Get": "getPayment"}, "payment_id", "/payments/0/id", "payment"),
    ("post", "/payment-page/payment", "200"): {
        "Get": _link(
            "getPaymentLink",
            "The payment link just created, as it is now",
            parameters={"transaction_id": "$response.body#/data/transaction_id"},
        )
    },
    ("post", "/ewallet/v2/create-payment", "200"): _wallet_links(_WALLET_IDS, "the payment just created"),
    ("post", "/ewallet/v2/create-qr", "200"): _wallet_links(_WALLET_IDS, "the payment just created"),
    ("post", "/ewallet/v2/dummy-payment", "200"): _wallet_links(
        _WALLET_REQUEST_IDS, "the payment just paid", ("Inquiry", "Refund")
    ),
    ("post", "/ewallet/v2/refund", "200"): _wallet_links(
        _WALLET_IDS, "the payment just refunded", ("Inquiry", "Refund")
    ),
    ("post", "/card-v2/v1/charge", "200"): {
        "Inquiry": _link(
            "getCardOrder",
            "The order just charged (camelCase answer)",
            body={
                "transaction_id": "$response.body#/data/transactionId",
                "external_id": "$request.body#/externalId",
                "order_id": "$request.body#/orderId",
            },
        )
    },
    **{
        ("post", f"/card-v2/{version}/charge-direct", "200"): {
            "Inquiry": _link(
                "getCardOrder",
                "The order just charged",
                body={
                    "transaction_id": "$response.body#/data/transaction_data/transaction_id",
                    "external_id": "$response.body#/data/transaction_data/external_id",
                    "order_id": "$response.body#/data/transaction_data/order_id",
                },
            )
        }
        for version in ("v1", "v2")
    },
    ("post", "/v1.0/bnpl/qr-checkout", "200"): _bnpl_status(""),
    ("post", "/v1.1/bnpl/qr-checkout", "200"): _bnpl_status("V11"),
}


SECURITY_SCHEMES: dict[str, Any] = {
    "merchantBasic": {
        "type": "http",
        "scheme": "basic",
        "description": "Wallet and card: Basic base64(merchant_id:secret). Wallet routes also accept "
        "base64(merchant_id:secret:hash_key). Wallet requests carry x-req-signature as well.",
    },
    "snapAccessToken": {
        "type": "http",
        "scheme": "bearer",
        "description": "BNPL, symmetric signature: the access token of createAccessToken, and X-SIGNATURE = "
        "Base64(HMAC-SHA512(client_secret, METHOD:PATH:accessToken:lowerhex(sha256(minify(body))):X-TIMESTAMP)). "
        "Without a token (the asymmetric variant), X-SIGNATURE = Base64(SHA256withRSA(private key, "
        "METHOD:PATH:lowerhex(sha256(minify(body))):X-TIMESTAMP)).",
    },
    "snapDisbursementToken": {
        "type": "http",
        "scheme": "bearer",
        "description": "Disbursement (docs/decisions.md §11.2): the access token of createDisbursementAccessToken, "
        "and X-SIGNATURE = Base64(HMAC-SHA512(client_secret, "
        "POST:PATH:accessToken:lowerhex(sha256(minify(body))):X-TIMESTAMP)); the symmetric form only.",
    },
    "adminToken": {"type": "http", "scheme": "bearer", "description": "The operator's KASIR_ADMIN_TOKEN"},
}
# Per path prefix: the operation's alternatives (an empty one: no credential header, the signature alone).
_SECURITY: list[tuple[tuple[str, ...], list[dict[str, list[str]]]]] = [
    (("/ewallet/v2/", "/card-v2/", "/va", "/payment-page/payment"), [{"merchantBasic": []}]),
    (("/v1.0/bnpl/", "/v1.1/bnpl/"), [{"snapAccessToken": []}, {}]),
    (
        (
            "/api/v1.0/balance-inquiry",
            "/api/v1.0/account-inquiry-external",
            "/api/v1.0/transfer",
            "/api/v1.1/transfer",
            "/api/v1.2/transfer",
            "/api/v1.0/transaction-history",
        ),
        [{"snapDisbursementToken": []}],
    ),
    (("/admin/",), [{"adminToken": []}]),
]
_HEADER_DESCRIPTIONS = {
    "X-TIMESTAMP": "ISO 8601 with offset, like 2026-11-23T10:15:00+07:00; within the allowed clock skew",
    "X-CLIENT-KEY": "The merchant's client_id",
    "X-PARTNER-ID": "The merchant's merchant_id",
    "X-EXTERNAL-ID": "Numeric, at most 36 digits, unique per merchant and day",
    "CHANNEL-ID": "1 to 5 characters",
    "x-req-signature": "lowercase hex sha256(hash_key + external_id + order_id)",
}
_TOKEN_SIGNATURE = 'Base64(SHA256withRSA(private key, client_id + "|" + X-TIMESTAMP))'  # noqa: S105 (a description)
_SNAP_SIGNATURE = "With Authorization: Bearer <accessToken>, HMAC-SHA512; without, SHA256withRSA (see snapAccessToken)"

HEADERS: dict[str, Any] = {
    "X-Request-ID": {
        "description": "The request's id (the caller's X-Request-ID when it sent one); in the logs too",
        "schema": {"type": "string"},
    },
    "Idempotent-Replayed": {
        "description": "`true` when this answer is the stored answer of an earlier request with the same "
        "X-Idempotency-Key",
        "schema": {"type": "string", "enum": ["true"]},
    },
    "Retry-After": {"description": "Seconds to wait before retrying", "schema": {"type": "string"}},
    "X-TIMESTAMP": {"description": "Server time, ISO 8601 with offset", "schema": {"type": "string"}},
    "X-CLIENT-KEY": {"description": "Echo of the request's X-CLIENT-KEY", "schema": {"type": "string"}},
}


def complete_document(document: dict[str, Any], extra_models: list[type[BaseModel]]) -> None:
    """Everything this module adds, in place; `extra_models` are the webhooks' payloads."""
    components = document.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    _add_models(schemas, extra_models)
    complete_error_responses(document)
    for name, examples in _ERROR_EXAMPLES.items():
        if name in schemas:
            schemas[name].setdefault("examples", examples)
    components["securitySchemes"] = SECURITY_SCHEMES
    components["headers"] = HEADERS
    for path, operations in document.get("paths", {}).items():
        for method, operation in operations.items():
            _complete_operation(method, path, operation)
    document["webhooks"] = webhooks()
    _drop_null_defaults(document)


def _drop_null_defaults(node: Any) -> None:
    """An optional field has no `default: null` (pydantic writes one for every `x: T | None = None`): code
    generators type a field with a default as always present (openapi-typescript's defaults make it required
    in the request too), and absent is what the server assumes anyway. Examples are values, left as they are."""
    if isinstance(node, dict):
        if "default" in node and node["default"] is None:
            del node["default"]
        for key, value in node.items():
            if key not in ("example", "examples"):
                _drop_null_defaults(value)
    elif isinstance(node, list):
        for value in node:
            _drop_null_defaults(value)


def _add_models(schemas: dict[str, Any], models: list[type[BaseModel]]) -> None:
    _, top = models_json_schema(
        [(model, "serialization") for model in models], ref_template="#/components/schemas/{model}"
    )
    for name, definition in top.get("$defs", {}).items():
        schemas.setdefault(name, definition)


def _complete_operation(method: str, path: str, operation: dict[str, Any]) -> None:
    operation_id = OPERATION_IDS.get((method, path))
    if operation_id:
        operation["operationId"] = operation_id
    security = next((alternatives for prefixes, alternatives in _SECURITY if path.startswith(prefixes)), None)
    parameters = operation.get("parameters", [])
    if security is not None:
        operation["security"] = security
        # The credential is the security scheme's; OpenAPI ignores a header parameter named Authorization.
        parameters[:] = [p for p in parameters if not (p["in"] == "header" and p["name"].lower() == "authorization")]
    for parameter in parameters:
        if parameter["in"] != "header":
            continue
        name = parameter["name"]
        if name == "X-SIGNATURE":
            token = path.endswith("/access-token/b2b")
            parameter.setdefault("description", _TOKEN_SIGNATURE if token else _SNAP_SIGNATURE)
        elif name in _HEADER_DESCRIPTIONS:
            parameter.setdefault("description", _HEADER_DESCRIPTIONS[name])
    keyed = any(p["in"] == "header" and p["name"] == "X-Idempotency-Key" for p in parameters)
    token_route = path.endswith("/access-token/b2b")
    for status, response in operation.get("responses", {}).items():
        if (method, path, status) in LINKS:
            response["links"] = LINKS[method, path, status]
        headers = response.setdefault("headers", {})
        headers.setdefault("X-Request-ID", {"$ref": "#/components/headers/X-Request-ID"})
        if keyed and status[0] in "24" and status != "429":  # a stored 2xx or 4xx answer, replayed
            headers.setdefault("Idempotent-Replayed", {"$ref": "#/components/headers/Idempotent-Replayed"})
        # An outage: card 503, wallet and SNAP 500 (docs/decisions.md §4, kasir.errors.ServiceUnavailable).
        if status in ("429", "500", "503") or (keyed and status == "409"):
            headers.setdefault("Retry-After", {"$ref": "#/components/headers/Retry-After"})
        if token_route:
            headers["X-TIMESTAMP"] = {"$ref": "#/components/headers/X-TIMESTAMP"}
            headers["X-CLIENT-KEY"] = {"$ref": "#/components/headers/X-CLIENT-KEY"}
    if path == "/metrics":
        operation["responses"]["200"]["content"] = {
            "text/plain": {"schema": {"type": "string"}, "example": "kasir_callbacks_pending 0\n"}
        }


def complete_error_responses(document: dict[str, Any]) -> None:
    components = document.setdefault("components", {}).setdefault("schemas", {})
    components.setdefault("PlainErrorBody", PLAIN_ERROR_BODY)
    for path, operations in document.get("paths", {}).items():
        for operation in operations.values():
            _complete(path, operation)
    if _FASTAPI_VALIDATION not in str(document.get("paths")):
        components.pop("HTTPValidationError", None)
        components.pop("ValidationError", None)


def _complete(path: str, operation: dict[str, Any]) -> None:
    responses: dict[str, Any] = operation.setdefault("responses", {})
    fastapi_422 = _FASTAPI_VALIDATION in str(responses.get("422", {}))
    if fastapi_422:
        del responses["422"]
    declared_format = operation.get("x-kasir-wire-format")
    format = WireFormat(declared_format) if declared_format else wire_format_of_path(path)
    wanted = []
    if fastapi_422 or operation.get("parameters") or operation.get("requestBody"):
        wanted.append("400")
    if "{" in path:
        wanted.append("404")
    if path.startswith("/admin/"):
        wanted.extend(["401", "429"])
    body = {"$ref": f"#/components/schemas/{_BODIES[format]}"}
    for status in wanted:
        responses.setdefault(
            status, {"description": _DESCRIPTIONS[status], "content": {"application/json": {"schema": body}}}
        )


# --- webhooks: what Kasir sends to the merchant's callback URL -------------------------------------------

# A SNAP notification's headers (BNPL's and a transfer's), but the signatures, which each describes.
_SNAP_NOTIFY_HEADERS = [
    {"name": "X-TIMESTAMP", "in": "header", "required": True, "schema": {"type": "string"}},
    {"name": "X-PARTNER-ID", "in": "header", "required": True, "schema": {"type": "string"},
     "description": "The merchant's merchant_id"},
    {"name": "X-VERSION", "in": "header", "required": True, "schema": {"type": "string", "enum": ["v1"]}},
]  # fmt: skip

_ATTEMPT_HEADERS = [
    {"name": "X-Kasir-Callback-Id", "in": "header", "required": True, "schema": {"type": "string"},
     "description": "The callback's id: the same on every attempt of one callback (deduplicate on it)"},
    {"name": "X-Kasir-Attempt", "in": "header", "required": True, "schema": {"type": "string"},
     "description": "1 for the first attempt, then 2, 3, ..."},
]  # fmt: skip
_SVC_SIGNATURE = (
    "lowercase hex sha256(transaction_id + x_req_signature), where x_req_signature = "
    "sha256(hash_key + external_id + order_id): check it before trusting the payload"
)


def _payload(name: str) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{name}"}}}}


def webhooks() -> dict[str, Any]:
    svc_header = {"name": "svc-signature", "in": "header", "required": True, "schema": {"type": "string"},
                  "description": _SVC_SIGNATURE}  # fmt: skip
    return {
        "walletNotification": {
            "post": {
                "operationId": "walletNotification",
                "summary": "Wallet callback",
                "description": "Sent to the payment's callback_url (else the merchant's) when a wallet transaction "
                "becomes PAID, EXPIRED, failed, REFUNDED or VOID. Answer HTTP 200 (any body); anything else "
                "is retried 2 times.",
                "tags": ["callbacks"],
                "parameters": [
                    svc_header,
                    {
                        "name": "svc-signature",
                        "in": "query",
                        "required": True,
                        "schema": {"type": "string"},
                        "description": "The same signature, appended to the callback URL's query",
                    },
                    *_ATTEMPT_HEADERS,
                ],  # fmt: skip
                "requestBody": _payload("WalletNotification"),
                "responses": {"200": {"description": "Received (any body)"}},
            }
        },
        "vaNotification": {
            "post": {
                "operationId": "vaNotification",
                "summary": "Virtual-account callback",
                "description": "Sent to the VA's callback_url (else the merchant's) for each payment into a virtual "
                "account (PAID, PARTIALLY_PAID) and when it becomes EXPIRED or CANCELLED, in the order of the VA's "
                "events. Answer HTTP 200 (any body); anything else is retried 2 times.",
                "tags": ["callbacks"],
                "parameters": [
                    {
                        **svc_header,
                        "description": _SVC_SIGNATURE + "; of a VA created with a sub-merchant-id, lowercase hex "
                        "sha256(transaction_id + x_req_signature + sub_merchant_id)",
                    },
                    {
                        "name": "svc-signature",
                        "in": "query",
                        "required": True,
                        "schema": {"type": "string"},
                        "description": "The same signature, appended to the callback URL's query",
                    },
                    *_ATTEMPT_HEADERS,
                ],  # fmt: skip
                "requestBody": _payload("VaNotification"),
                "responses": {"200": {"description": "Received (any body)"}},
            }
        },
        "paymentPageNotification": {
            "post": {
                "operationId": "paymentPageNotification",
                "summary": "Payment-page callback (card orders and payment links)",
                "description": "Sent to the order's callback_url (else the merchant's) when a card order or a "
                "payment link becomes SUCCESS, EXPIRED or has a FAILED attempt; a link's says how it was paid "
                "(payment_method CARD, WALLET or VIRTUAL_ACCOUNT, payment_channel, acq). Answer HTTP 200 with "
                "Content-Type: application/json and a JSON object whose `message` is a string; anything else is "
                "retried 3 times.",
                "tags": ["callbacks"],
                "parameters": [
                    {
                        **svc_header,
                        "description": "lowercase hex sha256(transaction_id + x_req_signature), where "
                        "x_req_signature = sha256(hash_key + external_id + order_id); with a sub_merchant_id, "
                        "sha256(transaction_id + x_req_signature + sub_merchant_id)",
                    },
                    *_ATTEMPT_HEADERS,
                ],  # fmt: skip
                "requestBody": _payload("PaymentPageNotification"),
                "responses": {
                    "200": {
                        "description": "Received",
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/PaymentPageAnswer"}}},
                    }
                },
            }
        },
        "bnplNotification": {
            "post": {
                "operationId": "bnplNotification",
                "summary": "BNPL notification",
                "description": "Sent to the checkout's callback URL when a BNPL transaction becomes 00 Success, "
                "05 Canceled or 06 Failed. Answer HTTP 200 (any body); anything else is retried 3 times.",
                "tags": ["callbacks"],
                "parameters": [
                    *_SNAP_NOTIFY_HEADERS,
                    {
                        "name": "X-SIGNATURE",
                        "in": "header",
                        "required": True,
                        "schema": {"type": "string"},
                        "description": 'Base64(HMAC-SHA512(client_secret, callbackUrl + ":v1:" + '
                        'lowerhex(sha256(minify(body))) + ":" + X-TIMESTAMP))',
                    },
                    {
                        **svc_header,
                        "description": "lowercase hex sha256(referenceNo + x_req_signature), where "
                        "x_req_signature = sha256(hash_key + partnerReferenceNo + partnerReferenceNo)",
                    },
                    *_ATTEMPT_HEADERS,
                ],  # fmt: skip
                "requestBody": _payload("BnplNotification"),
                "responses": {"200": {"description": "Received (any body)"}},
            }
        },
        "transferNotification": {
            "post": {
                "operationId": "transferNotification",
                "summary": "Transfer notification (disbursement)",
                "description": "Sent to a transfer's additionalInfo.callbackUrl, when it carried one, on each move "
                "into 00 Success, 06 Failed or 04 Refunded (docs/decisions.md §11.8). Answer HTTP 200 (any body); "
                "anything else is retried 3 times. The status inquiry always tells the same state.",
                "tags": ["callbacks"],
                "parameters": [
                    *_SNAP_NOTIFY_HEADERS,
                    {
                        "name": "X-SIGNATURE",
                        "in": "header",
                        "required": True,
                        "schema": {"type": "string"},
                        "description": 'Base64(HMAC-SHA512(client_secret, callbackUrl + ":v1:" + '
                        'lowerhex(sha256(minify(body))) + ":" + X-TIMESTAMP)), callbackUrl exactly as the '
                        "transfer sent it",
                    },
                    {
                        **svc_header,
                        "description": "lowercase hex sha256(originalReferenceNo + x_req_signature), where "
                        "x_req_signature = sha256(hash_key + partnerReferenceNo + partnerReferenceNo)",
                    },
                    *_ATTEMPT_HEADERS,
                ],  # fmt: skip
                "requestBody": _payload("TransferNotification"),
                "responses": {"200": {"description": "Received (any body)"}},
            }
        },
    }
