"""The error answers of the OpenAPI document, completed from what the error handlers render (kasir.errors).

FastAPI documents a `422` with its own `HTTPValidationError` body on every operation that takes input;
Kasir never answers that: a request that fails validation is a 400 in the route's wire format. And the
answers every route can give (400 on bad input, 404 on an unknown id in the path, 401 without the admin
token) were documented on some operations only. Each operation gets them here, in its own format.
"""

from __future__ import annotations

from typing import Any

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
_DESCRIPTIONS = {
    "400": "Bad request: a field or parameter is missing or invalid (named in the answer)",
    "401": "Unauthorized: Authorization: Bearer <KASIR_ADMIN_TOKEN> missing or wrong",
    "404": "Not found: no such id",
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
        wanted.append("401")
    body = {"$ref": f"#/components/schemas/{_BODIES[format]}"}
    for status in wanted:
        responses.setdefault(
            status, {"description": _DESCRIPTIONS[status], "content": {"application/json": {"schema": body}}}
        )
