"""The SDK's exceptions.

KasirError                   anything this SDK raises
├── ConfigurationError       missing credential or RSA key for the call, or an unusable idempotency_key
├── TransportError           the request did not complete (after retries): connect, read, timeout
├── APIError                 the service answered with an error
│   ├── AuthenticationError  401 / 403: bad credentials, signature or token
│   ├── ValidationError      400 / 422: the request is wrong (or its idempotency key was used with
│   │                        another body); .errors lists {field, message}
│   ├── NotFoundError        404
│   ├── ConflictError        409: duplicate order, reused X-EXTERNAL-ID, refused transition, or
│   │                        the key's first request still in progress after every retry
│   └── ServerError          5xx after retries
├── SignatureError           a callback's signature (or its timestamp) does not verify
└── ConfirmationError        an inquiry does not confirm what a callback said (confirm_*_payment)

Every APIError has the same fields, whichever of Kasir's three wire formats the answer came in:
`status` (HTTP), `code` (SNAP responseCode, wallet response_code, card statusCode), `message`,
`errors` (field errors, [{field, message}]), `request_id` (the answer's X-Request-ID: quote it to
the operator) and `body`; `str(error)` says all of them. A refused card charge is not raised but
returned (ChargeResult, is_success False); its `.error` is the same APIError.
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
    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        body: Any,
        errors: list[dict[str, str]] | None = None,
        request_id: str | None = None,
    ):
        self.status = status
        self.code = code
        self.message = message
        self.body = body
        self.errors = errors or []
        self.request_id = request_id
        super().__init__(self._describe())

    @property
    def http_status(self) -> int:
        """The HTTP status (the name ChargeResult uses)."""
        return self.status

    def _describe(self) -> str:
        text = f"HTTP {self.status} {self.code}: {self.message}"
        fields = "; ".join(f"{e.get('field')}: {e.get('message')}" for e in self.errors)
        if fields and fields != self.message:
            text += f" [{fields}]"
        if self.request_id:
            text += f" (X-Request-ID {self.request_id})"
        return text

    def __str__(self) -> str:
        return self._describe()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(status={self.status}, code={self.code!r}, message={self.message!r}, "
            f"errors={self.errors!r}, request_id={self.request_id!r})"
        )


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


class ConfirmationError(KasirError):
    """The inquiry contradicts the callback (another status, amount or order): do not fulfil.

    `.result` is the inquiry's answer (WalletResult, VaResult or BnplTransaction), `.reason` says what differs.
    """

    def __init__(self, reason: str, result: Any) -> None:
        super().__init__(reason)
        self.reason = reason
        self.result = result


def _field_errors(raw: Any) -> list[dict[str, str]]:
    if not isinstance(raw, list):
        return []
    return [
        {"field": str(e.get("field", "")), "message": str(e.get("message", ""))} for e in raw if isinstance(e, dict)
    ]


def error_for(status: int, body: Any, request_id: str | None = None) -> APIError:
    """Map an answer in any of Kasir's three wire formats to an exception (the class by HTTP status)."""
    code, message, errors = str(status), "", []
    if isinstance(body, dict):
        if "responseCode" in body:  # SNAP
            code, message = str(body["responseCode"]), str(body.get("responseMessage", ""))
        elif "response_code" in body:  # wallet
            code, message = str(body["response_code"]), str(body.get("response_message", ""))
        elif "statusCode" in body or "statusMessage" in body:  # card
            code = str(body.get("statusCode", status))
            message = str(body.get("statusMessage", ""))
        elif "message" in body:
            message = str(body["message"])
        elif "detail" in body:
            message = str(body["detail"])
        errors = _field_errors(body.get("errors"))
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
    return kind(status, code, message, body, errors, request_id)
