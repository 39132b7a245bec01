"""The SDK's exceptions.

KasirError                   anything this SDK raises
├── ConfigurationError       missing credential or RSA key for the call, or an unusable idempotency_key
├── TransportError           the request did not complete (after retries): connect, read, timeout
├── APIError                 the service answered with an error (has .status, .code, .message, .body)
│   ├── AuthenticationError  401: bad credentials, signature or token
│   ├── ValidationError      400 / 422: the request is wrong (or its idempotency key was used with
│   │                        another body); .errors lists {field, message} (card)
│   ├── NotFoundError        404
│   ├── ConflictError        409: duplicate order, reused X-EXTERNAL-ID, refused transition, or
│   │                        the key's first request still in progress after every retry
│   └── ServerError          5xx after retries
└── SignatureError           a callback's signature does not verify
"""

from __future__ import annotations

from typing import Any


class KasirError(Exception):
    pass


class ConfigurationError(KasirError):
    pass


class TransportError(KasirError):
    pass


class SignatureError(KasirError):
    pass


class APIError(KasirError):
    def __init__(self, status: int, code: str, message: str, body: Any, errors: list[dict[str, str]] | None = None):
        super().__init__(f"HTTP {status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.body = body
        self.errors = errors or []


class AuthenticationError(APIError):
    pass


class ValidationError(APIError):
    pass


class NotFoundError(APIError):
    pass


class ConflictError(APIError):
    pass


class ServerError(APIError):
    pass


def error_for(status: int, body: Any) -> APIError:
    """Map a non-2xx answer in any of Kasir's three wire formats to an exception."""
    code, message, errors = str(status), "", None
    if isinstance(body, dict):
        if "responseCode" in body:  # SNAP
            code, message = str(body["responseCode"]), str(body.get("responseMessage", ""))
        elif "response_code" in body:  # wallet
            code, message = str(body["response_code"]), str(body.get("response_message", ""))
        elif "statusMessage" in body:  # card
            code, message = str(body.get("statusMessage")), str(body.get("statusMessage", ""))
            raw_errors = body.get("errors")
            if isinstance(raw_errors, list):
                errors = [e for e in raw_errors if isinstance(e, dict)]
                if errors:
                    message = "; ".join(f"{e.get('field')}: {e.get('message')}" for e in errors)
        elif "message" in body:
            message = str(body["message"])
    kind: type[APIError]
    if status == 401 or status == 403:
        kind = AuthenticationError
    elif status in (400, 422):
        kind = ValidationError
    elif status == 404:
        kind = NotFoundError
    elif status == 409:
        kind = ConflictError
    elif status >= 500:
        kind = ServerError
    else:
        kind = APIError
    return kind(status, code, message, body, errors)
