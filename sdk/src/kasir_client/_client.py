"""Client and AsyncClient: every endpoint, signed and retried correctly by construction."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import random
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Literal
from urllib.parse import quote

import httpx

from kasir_client._errors import ConfigurationError, ConfirmationError, TransportError, error_for
from kasir_client._models import (
    AccessToken,
    BnplCalculation,
    BnplNotification,
    BnplTransaction,
    ChargeResult,
    Credentials,
    InstallmentOption,
    PaymentLinkResult,
    PaymentPageCallback,
    PayoutAccount,
    PayoutBalance,
    PayoutHistory,
    PayoutHistoryEntry,
    PayoutTransfer,
    VaCallback,
    VaPayment,
    VaPaymentResult,
    VaResult,
    WalletCallback,
    WalletResult,
    selected_channels_of,
)
from kasir_client._signing import (
    basic_authorization,
    load_private_key,
    snap_asymmetric,
    snap_symmetric,
    timestamp,
    token_signature,
    x_req_signature,
)
from kasir_client._types import (
    AccountInquiry,
    BalanceInquiry,
    BnplCalculate,
    BnplCheckout,
    CardCharge,
    HistoryList,
    PaymentLinkCreate,
    TransferInterbank,
    VaCreate,
    VaDummyPayment,
    VaReference,
    WalletCreatePayment,
    WalletDummyPayment,
    WalletReference,
    WalletRefund,
    WalletVoid,
)
from kasir_client._version import __version__

Product = Literal["payment", "disbursement"]
Signing = Literal["symmetric", "asymmetric"]

TOKEN_PATHS: dict[str, str] = {
    "payment": "/auth/merchants/v1.0/access-token/b2b",
    "disbursement": "/api/v1.0/access-token/b2b",
}
TOKEN_REFRESH_MARGIN = 60.0  # seconds before expiry a cached token is replaced
IDEMPOTENCY_HEADER = "X-Idempotency-Key"
IDEMPOTENCY_KEY_MAX = 255  # characters, as the service accepts
# The calls that create or move money: each carries an X-Idempotency-Key (the CLI's `sign` adds one too).
IDEMPOTENT_PATHS = frozenset(
    {
        "/card-v2/v1/charge",
        "/ewallet/v2/create-payment",
        "/ewallet/v2/create-qr",
        "/ewallet/v2/refund",
        "/ewallet/v2/void",
        "/ewallet/v2/dummy-payment",
        "/v1.0/bnpl/qr-checkout",
        "/v1.1/bnpl/qr-checkout",
        "/va",
        "/va/cancel",
        "/va/dummy-payment",
        "/payment-page/payment",
        "/api/v1.0/transfer-interbank",
        "/api/v1.1/transfer-interbank",
        "/api/v1.2/transfer-interbank",
    }
)
# The disbursement routes (docs/merchant/payouts.md): the disbursement token and the symmetric signature only.
PAYOUT_PATHS: dict[str, str] = {
    "account_inquiry": "/api/v1.0/account-inquiry-external",
    "balance": "/api/v1.0/balance-inquiry",
    "transfer_status": "/api/v1.0/transfer/status",
    "history": "/api/v1.0/transaction-history-list",
    "history_detail": "/api/v1.0/transaction-history-detail",
}
TransferVersion = Literal["v1.0", "v1.1", "v1.2"]
PAYOUT_CHANNEL_ID = "api"  # the provider's CHANNEL-ID for its disbursement product
SUB_MERCHANT_HEADER = "sub-merchant-id"
RETRY_STATUSES = frozenset({500, 502, 503, 504})
USER_AGENT = f"kasir-client/{__version__}"
REQUEST_ID_HEADER = "X-Request-ID"

log = logging.getLogger("kasir_client")


@dataclass(frozen=True)
class RequestLog:
    """One try of one call, as given to the `on_request` hook (and logged to the `kasir_client` logger).

    Never the body or the headers: they carry secrets, signatures and card data.
    """

    method: str
    path: str
    attempt: int  # 1 for the first try
    status: int | None  # HTTP status; None when the try failed in transport
    elapsed: float  # seconds
    request_id: str | None  # the answer's X-Request-ID
    idempotency_key: str | None
    error: str | None  # the transport error, when there was one
    will_retry: bool  # another try follows (after a backoff)


RequestHook = Callable[[RequestLog], None]
# A WalletCallback from verify_wallet_callback, or the ids of the transaction to confirm.
WalletPaymentRef = WalletCallback | WalletReference


@dataclass(frozen=True)
class _Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


def _encode(payload: Mapping[str, Any]) -> bytes:
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return {"message": response.text[:500]}


def _decimal(value: int | Decimal | str) -> Decimal:
    try:
        return Decimal(str(value))
    except InvalidOperation as exc:
        raise ConfigurationError(f"amount must be a number, got {value!r}") from exc


def _rupiah(value: Any) -> int:
    """A whole-rupiah amount of a VA answer (a JSON integer); 0 when absent."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _money(value: Any) -> Decimal | None:
    """A SNAP money object's value ({"value": "10000.00", "currency": "IDR"}); None when absent."""
    if not isinstance(value, dict) or value.get("value") is None:
        return None
    try:
        return Decimal(str(value["value"]))
    except InvalidOperation:
        return None


def _transfer_path(version: str) -> str:
    if version not in ("v1.0", "v1.1", "v1.2"):
        raise ConfigurationError(f"version must be v1.0, v1.1 or v1.2, got {version!r}")
    return f"/api/{version}/transfer-interbank"


def _status_body(partner_reference_no: str | None, reference_no: str | None) -> dict[str, str]:
    if partner_reference_no is None and reference_no is None:
        raise ConfigurationError("give partner_reference_no or reference_no (or both)")
    body = {"serviceCode": "18"}
    if partner_reference_no is not None:
        body["originalPartnerReferenceNo"] = partner_reference_no
    if reference_no is not None:
        body["originalReferenceNo"] = reference_no
    return body


def _idempotency_key(given: str | None) -> str:
    """The caller's key, checked here rather than refused by the service; or a new one for this call."""
    if given is None:
        return str(uuid.uuid4())
    if not 1 <= len(given) <= IDEMPOTENCY_KEY_MAX or not (given.isascii() and given.isprintable()):
        raise ConfigurationError(
            f"idempotency_key must be 1 to {IDEMPOTENCY_KEY_MAX} printable ASCII characters, got {given!r}"
        )
    return given


def _retryable(request: _Request, response: httpx.Response) -> bool:
    if response.status_code in RETRY_STATUSES:
        return True
    # 409 with Retry-After: the first request with this key is still running (REQUEST_IN_PROGRESS).
    # A duplicate order or a refused transition is a 409 without one, and final.
    return (
        response.status_code == 409
        and IDEMPOTENCY_HEADER in request.headers
        and response.headers.get("Retry-After") is not None
    )


def _retry_after(response: httpx.Response) -> float | None:
    """Retry-After in seconds; None when absent or not a number (an HTTP-date: the backoff applies)."""
    try:
        seconds = float(response.headers.get("Retry-After", ""))
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def _request_id(response: httpx.Response) -> str | None:
    value: str | None = response.headers.get(REQUEST_ID_HEADER)
    return value


def _replayed(response: httpx.Response) -> bool:
    """Idempotent-Replayed: true: the answer is the one given to an earlier request with this key."""
    replayed: str | None = response.headers.get("Idempotent-Replayed")
    return replayed == "true"


class _Core:
    def __init__(
        self,
        base_url: str,
        credentials: Credentials,
        *,
        timeout: float = 15.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        max_delay: float = 5.0,
        signing: Signing = "symmetric",
        on_request: RequestHook | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        if signing not in ("symmetric", "asymmetric"):
            raise ConfigurationError(f"signing must be 'symmetric' or 'asymmetric', got {signing!r}")
        if max_retries < 0:
            raise ConfigurationError(f"max_retries must be 0 or more, got {max_retries!r}")
        self.base_url = base_url.rstrip("/")
        self.credentials = credentials
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_delay = max_delay
        self.signing = signing
        self.on_request = on_request
        self.logger = logger or log
        self._tokens: dict[str, AccessToken] = {}
        self._key = load_private_key(credentials.private_key_pem) if credentials.private_key_pem else None

    def _record(
        self,
        request: _Request,
        attempt: int,
        started: float,
        response: httpx.Response | None,
        error: Exception | None,
        will_retry: bool,
    ) -> None:
        """Tell the logger and the on_request hook about one try (a failing hook does not fail the call)."""
        entry = RequestLog(
            method=request.method,
            path=request.path,
            attempt=attempt + 1,
            status=response.status_code if response is not None else None,
            elapsed=time.monotonic() - started,
            request_id=_request_id(response) if response is not None else None,
            idempotency_key=request.headers.get(IDEMPOTENCY_HEADER),
            error=f"{type(error).__name__}: {error}" if error is not None else None,
            will_retry=will_retry,
        )
        level = logging.WARNING if will_retry else logging.DEBUG
        if self.logger.isEnabledFor(level):
            self.logger.log(
                level,
                "%s %s try %d: %s in %.3f s%s%s",
                entry.method,
                entry.path,
                entry.attempt,
                entry.status if entry.status is not None else entry.error,
                entry.elapsed,
                f" (X-Request-ID {entry.request_id})" if entry.request_id else "",
                ", retrying" if will_retry else "",
            )
        if self.on_request is not None:
            try:
                self.on_request(entry)
            except Exception:  # the hook is the caller's code: it must not turn a payment into an error
                self.logger.exception("on_request hook failed")

    def _private_key(self) -> Any:
        if self._key is None:
            raise ConfigurationError("this call needs the merchant's RSA private key (Credentials.private_key_pem)")
        return self._key

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        """Exponential backoff with full jitter, at least Retry-After, never more than max_delay.

        The ceiling keeps a hostile or mistaken Retry-After from holding the caller for long.
        """
        jittered = random.uniform(0, min(self.backoff * (2**attempt), self.max_delay))  # noqa: S311 (jitter)
        return jittered if retry_after is None else min(max(retry_after, jittered), self.max_delay)

    def _cached_token(self, product: str) -> str | None:
        token = self._tokens.get(product)
        if token is not None and token.expires_at - time.monotonic() > TOKEN_REFRESH_MARGIN:
            return token.value
        return None

    # --- request builders: called again for every attempt (fresh timestamp and signature) ---

    def _token_request(self, product: str) -> _Request:
        ts = timestamp()
        return _Request(
            "POST",
            TOKEN_PATHS[product],
            {
                "Content-Type": "application/json",
                "X-TIMESTAMP": ts,
                "X-CLIENT-KEY": self.credentials.client_id,
                "X-SIGNATURE": token_signature(self._private_key(), self.credentials.client_id, ts),
            },
            _encode({"grantType": "client_credentials"}),
        )

    def _parse_token(self, product: str, response: httpx.Response) -> str:
        body = _json(response)
        if response.status_code != 200:
            raise error_for(response.status_code, body, _request_id(response))
        self._tokens[product] = AccessToken(
            body["accessToken"], product, time.monotonic() + float(body.get("expiresIn", "900"))
        )
        return str(body["accessToken"])

    def _snap_request(
        self,
        path: str,
        body: bytes,
        external_id: str,
        token: str | None,
        idempotency_key: str | None = None,
        channel_id: str = "95221",
    ) -> _Request:
        ts = timestamp()
        headers = {
            "Content-Type": "application/json",
            "X-TIMESTAMP": ts,
            "X-PARTNER-ID": self.credentials.merchant_id,
            "X-EXTERNAL-ID": external_id,
            "CHANNEL-ID": channel_id,
        }
        if idempotency_key is not None:
            headers[IDEMPOTENCY_HEADER] = idempotency_key  # not signed: the service keys on the body's hash
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
            headers["X-SIGNATURE"] = snap_symmetric(self.credentials.client_secret, "POST", path, token, body, ts)
        else:
            headers["X-SIGNATURE"] = snap_asymmetric(self._private_key(), "POST", path, body, ts)
        return _Request("POST", path, headers, body)

    def _wallet_request(
        self,
        path: str,
        payload: Mapping[str, Any],
        idempotency_key: str | None = None,
        sub_merchant_id: str | None = None,
    ) -> _Request:
        credentials = self.credentials
        external_id, order_id = str(payload.get("external_id", "")), str(payload.get("order_id", ""))
        headers = {
            "Content-Type": "application/json",
            "Authorization": basic_authorization(credentials.merchant_id, credentials.secret, credentials.hash_key),
            "x-req-signature": x_req_signature(credentials.hash_key, external_id, order_id),
            "x-version": "v3",
        }
        if idempotency_key is not None:
            headers[IDEMPOTENCY_HEADER] = idempotency_key
        if sub_merchant_id is not None:
            headers[SUB_MERCHANT_HEADER] = sub_merchant_id
        return _Request("POST", path, headers, _encode(payload))

    def _card_request(self, payload: Mapping[str, Any], idempotency_key: str) -> _Request:
        credentials = self.credentials
        return _Request(
            "POST",
            "/card-v2/v1/charge",
            {
                "Content-Type": "application/json",
                "Authorization": basic_authorization(credentials.merchant_id, credentials.secret, credentials.hash_key),
                IDEMPOTENCY_HEADER: idempotency_key,
            },
            _encode({"source": "kasir-client", **payload}),
        )

    def _link_request(self, transaction_id: str) -> _Request:
        """GET /payment-page/payment/{id}: Basic authentication only (no x-req-signature, no x-version)."""
        credentials = self.credentials
        return _Request(
            "GET",
            f"/payment-page/payment/{quote(transaction_id, safe='')}",
            {"Authorization": basic_authorization(credentials.merchant_id, credentials.secret, credentials.hash_key)},
            b"",
        )

    # --- answers ---------------------------------------------------------------------

    @staticmethod
    def _snap_ok(response: httpx.Response) -> dict[str, Any]:
        body = _json(response)
        if not 200 <= response.status_code < 300 or not isinstance(body, dict):
            raise error_for(response.status_code, body, _request_id(response))
        return body

    @classmethod
    def _calculation(cls, response: httpx.Response) -> BnplCalculation:
        body = cls._snap_ok(response)

        def money(item: dict[str, Any], name: str) -> Decimal:
            value = item.get(name) or {}
            return Decimal(str(value.get("value", "0")))

        options = [
            InstallmentOption(
                id=str(p.get("id")),
                tenure=int(p.get("tenure", 0)),
                monthly_installment=money(p, "monthlyInstallment"),
                installment_amount=money(p, "installmentAmount"),
                total_interest=money(p, "totalInterest"),
                provision=money(p, "provision"),
                amount=money(p, "amount"),
                rate=int(p.get("rate", 0)),
                raw=p,
            )
            for p in body.get("payments", [])
        ]
        return BnplCalculation(str(body.get("responseCode")), options, body, _request_id(response))

    @classmethod
    def _bnpl_transaction(cls, response: httpx.Response) -> BnplTransaction:
        body = cls._snap_ok(response)
        return BnplTransaction(
            response_code=str(body.get("responseCode")),
            reference_no=str(body.get("referenceNo", body.get("originalReferenceNo", ""))),
            partner_reference_no=str(body.get("partnerReferenceNo", body.get("originalPartnerReferenceNo", ""))),
            status=str(body.get("latestTransactionStatus", "")),
            status_description=str(body.get("transactionStatusDesc", "")),
            qr_content=body.get("qrContent"),
            qr_url=body.get("qrUrl"),
            raw=body,
            replayed=_replayed(response),
            request_id=_request_id(response),
        )

    @classmethod
    def _payout_account(cls, response: httpx.Response) -> PayoutAccount:
        body = cls._snap_ok(response)
        return PayoutAccount(
            response_code=str(body.get("responseCode")),
            reference_no=str(body.get("referenceNo", "")),
            partner_reference_no=str(body.get("partnerReferenceNo", "")),
            account_name=str(body.get("beneficiaryAccountName", "")),
            account_no=str(body.get("beneficiaryAccountNo", "")),
            bank_code=str(body.get("beneficiaryBankCode", "")),
            bank_name=str(body.get("beneficiaryBankName", "")),
            raw=body,
            request_id=_request_id(response),
        )

    @classmethod
    def _payout_balance(cls, response: httpx.Response) -> PayoutBalance:
        body = cls._snap_ok(response)
        infos = body.get("accountInfos") or [{}]
        info = infos[0] if isinstance(infos, list) and infos and isinstance(infos[0], dict) else {}
        return PayoutBalance(
            response_code=str(body.get("responseCode")),
            account_no=str(body.get("accountNo", "")),
            name=str(body.get("name", "")),
            available=_money(info.get("availableBalance")) or Decimal(0),
            hold=_money(info.get("holdAmount")) or Decimal(0),
            ledger=_money(info.get("ledgerBalance")) or Decimal(0),
            raw=body,
            request_id=_request_id(response),
        )

    @classmethod
    def _payout_transfer(cls, response: httpx.Response) -> PayoutTransfer:
        """The transfer's answer (referenceNo, the state in additionalInfo) or the status inquiry's (original...)."""
        body = cls._snap_ok(response)
        info = body.get("additionalInfo") if isinstance(body.get("additionalInfo"), dict) else {}
        assert isinstance(info, dict)

        def either(name: str, original: str) -> str:
            return str(body.get(name, body.get(original, "")))

        reason = info.get("reason")
        return PayoutTransfer(
            response_code=str(body.get("responseCode")),
            reference_no=either("referenceNo", "originalReferenceNo"),
            partner_reference_no=either("partnerReferenceNo", "originalPartnerReferenceNo"),
            status=str(body.get("latestTransactionStatus", info.get("latestTransactionStatus", ""))),
            status_description=str(body.get("transactionStatusDesc", info.get("transactionStatusDesc", ""))),
            amount=_money(body.get("amount")),
            beneficiary_account_no=str(body.get("beneficiaryAccountNo", "")),
            beneficiary_bank_code=str(body.get("beneficiaryBankCode", "")),
            source_account_no=str(body.get("sourceAccountNo", "")),
            reason=None if reason is None else str(reason),
            raw=body,
            replayed=_replayed(response),
            request_id=_request_id(response),
        )

    @staticmethod
    def _history_entry(item: dict[str, Any]) -> PayoutHistoryEntry:
        info = item.get("additionalInfo") if isinstance(item.get("additionalInfo"), dict) else {}
        assert isinstance(info, dict)

        def optional(name: str) -> str | None:
            value = info.get(name)
            return None if value is None else str(value)

        return PayoutHistoryEntry(
            date_time=str(item.get("dateTime", "")),
            amount=_money(item.get("amount")),
            remark=str(item.get("remark", "")),
            status=str(item.get("status", "")),
            type=str(item.get("type", "")),
            partner_reference_no=optional("partnerReferenceNo"),
            reference_no=optional("referenceNo"),
            latest_transaction_status=optional("latestTransactionStatus"),
            raw=item,
        )

    @classmethod
    def _payout_history(cls, response: httpx.Response) -> PayoutHistory:
        body = cls._snap_ok(response)
        entries = [cls._history_entry(item) for item in body.get("detailData") or [] if isinstance(item, dict)]
        return PayoutHistory(str(body.get("responseCode")), entries, body, _request_id(response))

    @classmethod
    def _payout_history_detail(cls, response: httpx.Response) -> PayoutHistoryEntry:
        return cls._history_entry(cls._snap_ok(response))

    @staticmethod
    def _wallet(response: httpx.Response, payload: Mapping[str, Any]) -> WalletResult:
        body = _json(response)
        if not 200 <= response.status_code < 300 or not isinstance(body, dict):
            raise error_for(response.status_code, body, _request_id(response))

        def text(name: str, default: Any = None) -> str | None:
            value = body.get(name, default)
            return None if value is None else str(value)

        def rupiah(name: str) -> int | None:
            value = body.get(name)
            return value if isinstance(value, int) and not isinstance(value, bool) else None

        return WalletResult(
            response_code=str(body.get("response_code", "")),
            response_message=str(body.get("response_message", "")),
            # The dummy payment's result has no transaction_id (interface.md): it is the request's.
            transaction_id=text("transaction_id", payload.get("transaction_id")),
            transaction_status=text("transaction_status"),
            raw=body,
            external_id=text("external_id"),
            order_id=text("order_id"),
            reference_id=text("reference_id"),
            payment_channel=text("payment_channel", payload.get("payment_channel")),
            amount=rupiah("amount"),
            refunded_amount=rupiah("refunded_amount"),
            paid_time=text("paid_time") or None,  # Kasir sends "" before payment (never null): None here, as before
            expired_time=text("expired_time"),
            payment_url=text("payment_url"),
            qr_string=text("qr_string"),
            qr_url=text("qr_url"),
            replayed=_replayed(response),
            request_id=_request_id(response),
        )

    @staticmethod
    def _va_data(response: httpx.Response) -> tuple[dict[str, Any], dict[str, Any]]:
        """The answer and its `data`; a refusal (no `data`) raised."""
        body = _json(response)
        answered = isinstance(body, dict) and isinstance(body.get("data"), dict)
        if not 200 <= response.status_code < 300 or not answered:
            raise error_for(response.status_code, body, _request_id(response))
        data: dict[str, Any] = body["data"]
        return body, data

    @classmethod
    def _va(cls, response: httpx.Response) -> VaResult:
        body, data = cls._va_data(response)
        details = data.get("payment_details") if isinstance(data.get("payment_details"), dict) else {}
        assert isinstance(details, dict)
        history = data.get("payment_history") if isinstance(data.get("payment_history"), list) else []
        assert isinstance(history, list)
        return VaResult(
            response_code=str(body.get("response_code", "")),
            response_message=str(body.get("response_message", "")),
            transaction_id=str(data.get("transaction_id", "")),
            external_id=str(data.get("external_id", "")),
            order_id=str(data.get("order_id", "")),
            transaction_status=str(data.get("transaction_status", "")),
            payment_channel=str(data.get("payment_channel", "")),
            payment_system=str(data.get("payment_system", "")),
            va_number=str(details.get("va_number", "")),
            is_multi_use=bool(details.get("is_multi_use", False)),
            amount=_rupiah(details.get("amount")),
            total_paid_amount=_rupiah(details.get("total_paid_amount")),
            remaining_amount=_rupiah(details.get("remaining_amount")),
            expired_time=str(details.get("expired_time", "")),
            payment_history=[
                VaPayment(str(p.get("reference_id", "")), _rupiah(p.get("amount")), str(p.get("paid_time", "")))
                for p in history
                if isinstance(p, dict)
            ],
            raw=body,
            replayed=_replayed(response),
            request_id=_request_id(response),
        )

    @classmethod
    def _va_payment(cls, response: httpx.Response) -> VaPaymentResult:
        body, data = cls._va_data(response)
        return VaPaymentResult(
            response_code=str(body.get("response_code", "")),
            transaction_id=str(data.get("transaction_id", "")),
            external_id=str(data.get("external_id", "")),
            order_id=str(data.get("order_id", "")),
            va_number=str(data.get("va_number", "")),
            reference_id=str(data.get("reference_id", "")),
            amount=_rupiah(data.get("amount")),
            paid_time=str(data.get("paid_time", "")),
            transaction_status=str(data.get("transaction_status", "")),
            raw=body,
            replayed=_replayed(response),
            request_id=_request_id(response),
        )

    @classmethod
    def _payment_link(cls, response: httpx.Response) -> PaymentLinkResult:
        body, data = cls._va_data(response)  # the same envelope: a refusal has no `data`
        return PaymentLinkResult(
            response_code=str(body.get("response_code", "")),
            response_message=str(body.get("response_message", "")),
            transaction_id=str(data.get("transaction_id", "")),
            external_id=str(data.get("external_id", "")),
            order_id=str(data.get("order_id", "")),
            transaction_status=str(data.get("transaction_status", "")),
            amount=_rupiah(data.get("amount")),
            currency=str(data.get("currency", "")),
            description=str(data.get("description", "")),
            payment_url=str(data.get("payment_url", "")),
            transaction_time=str(data.get("transaction_time", "")),
            expired_time=str(data.get("expired_time", "")),
            selected_channels=selected_channels_of(data.get("selected_channels")),
            raw=body,
            payment_method=str(data.get("payment_method") or ""),
            payment_channel=str(data.get("payment_channel") or ""),
            acq=str(data.get("acq") or ""),
            paid_date=str(data.get("paid_date") or ""),
            replayed=_replayed(response),
            request_id=_request_id(response),
        )

    @staticmethod
    def _charge(response: httpx.Response) -> ChargeResult:
        body = _json(response)
        data = body.get("data") if isinstance(body, dict) and isinstance(body.get("data"), dict) else {}
        assert isinstance(data, dict)
        status_code = str(body.get("statusCode", response.status_code)) if isinstance(body, dict) else "500"
        errors = body.get("errors", []) if isinstance(body, dict) else []
        message = str(body.get("statusMessage", "")) if isinstance(body, dict) else ""
        if errors:
            message = "; ".join(f"{e.get('field')}: {e.get('message')}" for e in errors if isinstance(e, dict))
        success = status_code == "00"
        request_id = _request_id(response)
        return ChargeResult(
            is_success=success,
            status_code=status_code,
            message=message,
            http_status=response.status_code,
            transaction_id=data.get("transactionId"),
            payment_status=data.get("paymentStatus"),
            link=data.get("link") if success else None,
            errors=[e for e in errors if isinstance(e, dict)],
            replayed=_replayed(response),
            raw=body,
            request_id=request_id,
            error=None if success else error_for(response.status_code, body, request_id),
        )

    # --- confirming a callback by inquiry ----------------------------------------------

    @staticmethod
    def _wallet_reference(event: WalletPaymentRef) -> WalletReference:
        if isinstance(event, WalletCallback):
            return {
                "transaction_id": event.transaction_id,
                "external_id": event.external_id,
                "order_id": event.order_id,
            }
        return {
            "transaction_id": event["transaction_id"],
            "external_id": event["external_id"],
            "order_id": event["order_id"],
        }

    @staticmethod
    def _confirm_wallet(
        reference: WalletReference, result: WalletResult, amount: int | Decimal | str | None, status: str
    ) -> WalletResult:
        if result.transaction_status != status:
            raise ConfirmationError(
                f"transaction {reference['transaction_id']} is {result.transaction_status}, not {status}", result
            )
        for name in ("external_id", "order_id"):
            answered = getattr(result, name)
            if answered is not None and answered != reference[name]:
                raise ConfirmationError(f"transaction {reference['transaction_id']} belongs to another {name}", result)
        if amount is not None and (result.amount is None or Decimal(result.amount) != _decimal(amount)):
            raise ConfirmationError(
                f"transaction {reference['transaction_id']} is for {result.amount}, not {amount}", result
            )
        return result

    @staticmethod
    def _va_reference(event: VaCallback) -> VaReference:
        return {"transaction_id": event.transaction_id, "external_id": event.external_id, "order_id": event.order_id}

    @staticmethod
    def _confirm_va(event: VaCallback, result: VaResult, amount: int | Decimal | str | None) -> VaResult:
        va = event.transaction_id
        if (result.external_id, result.order_id) != (event.external_id, event.order_id):
            raise ConfirmationError(f"virtual account {va} belongs to another order", result)
        if not event.reference_id:  # EXPIRED or CANCELLED: no payment, the state is the news
            if result.transaction_status != event.transaction_status:
                raise ConfirmationError(f"virtual account {va} is {result.transaction_status}", result)
            return result
        payment = next((p for p in result.payment_history if p.reference_id == event.reference_id), None)
        if payment is None:
            raise ConfirmationError(f"virtual account {va} has no payment {event.reference_id} among its last", result)
        if event.amount is not None and Decimal(payment.amount) != event.amount:
            raise ConfirmationError(f"payment {event.reference_id} is for {payment.amount}, not {event.amount}", result)
        if amount is not None and Decimal(payment.amount) != _decimal(amount):
            raise ConfirmationError(f"payment {event.reference_id} is for {payment.amount}, not {amount}", result)
        return result

    @staticmethod
    def _confirm_link(
        event: PaymentPageCallback, result: PaymentLinkResult, amount: int | Decimal | str | None
    ) -> PaymentLinkResult:
        link = event.transaction_id
        if (result.external_id, result.order_id) != (event.external_id, event.order_id):
            raise ConfirmationError(f"payment link {link} belongs to another order", result)
        # FAILED reports an attempt: the link stays PENDING, or is EXPIRED after the third.
        allowed = {"FAILED": ("PENDING", "EXPIRED")}.get(event.transaction_status, (event.transaction_status,))
        if result.transaction_status not in allowed:
            raise ConfirmationError(f"payment link {link} is {result.transaction_status}", result)
        if event.transaction_status == "SUCCESS":
            if event.amount is not None and Decimal(result.amount) != event.amount:
                raise ConfirmationError(f"payment link {link} is for {result.amount}, not {event.amount}", result)
            if amount is not None and Decimal(result.amount) != _decimal(amount):
                raise ConfirmationError(f"payment link {link} is for {result.amount}, not {amount}", result)
        return result

    @staticmethod
    def _confirm_bnpl(
        event: BnplNotification, result: BnplTransaction, amount: Decimal | str | int | None, status: str
    ) -> BnplTransaction:
        if result.status != status:
            raise ConfirmationError(
                f"BNPL transaction {event.original_reference_no} is {result.status}, not {status}", result
            )
        if event.original_partner_reference_no and result.partner_reference_no != event.original_partner_reference_no:
            raise ConfirmationError(f"BNPL transaction {event.original_reference_no} belongs to another order", result)
        if amount is not None:
            details = result.raw.get("paymentDetails")
            value = details.get("amount", {}).get("value") if isinstance(details, dict) else None
            if value is None or _decimal(value) != _decimal(amount):
                raise ConfirmationError(
                    f"BNPL transaction {event.original_reference_no} is for {value}, not {amount}", result
                )
        return result


class Client(_Core):
    """Synchronous client.

        client = Client("http://127.0.0.1:8000", Credentials.from_files("credentials.json", "private.pem"))
        result = client.card_charge({...})
        if result.is_success: redirect(result.link)

    Options (keyword only): timeout=15.0 (seconds, each try), max_retries=3, backoff=0.5,
    max_delay=5.0 (seconds), signing="symmetric" (BNPL; or "asymmetric"), transport (an
    httpx.BaseTransport, e.g. httpx.MockTransport in your tests or one with a proxy or
    retries=0), on_request (a hook called with a RequestLog after every try), logger (default
    logging.getLogger("kasir_client"): each try at DEBUG, a try that is retried at WARNING).
    Every request says `User-Agent: kasir-client/<version>`.

    Idempotency and retries (the SDK's one rule; AsyncClient follows it too):

    - The calls that create or move money (card_charge, wallet_create_payment, wallet_create_qr,
      wallet_refund, wallet_void, wallet_dummy_payment, create_va, cancel_va, simulate_va_payment,
      create_payment_link, bnpl_checkout, transfer) send an X-Idempotency-Key:
      a new uuid4 per call, or `idempotency_key=` (1 to 255 printable ASCII characters). Every try
      of one call sends the same key and the same body (BNPL: the same X-EXTERNAL-ID too, with a
      fresh X-TIMESTAMP and signature).
    - Every call is tried again, up to max_retries times, after a transport error (refused
      connection, timeout, connection dropped before the answer) and after HTTP 500, 502, 503 or
      504 (Kasir's outage answers, with Retry-After: wallet `98` and SNAP `500xx00` as HTTP 500,
      the card's 503 SERVICE_UNAVAILABLE); a money-moving call also after a 409 with Retry-After
      (the first try with its key is still running). Other 4xx never are: not a 409 without
      Retry-After (a duplicate order, a refused state change), not a 422 (the key was used before
      with another body).
    - Between tries: exponential backoff with full jitter (up to backoff * 2**try), at least the
      answer's Retry-After (seconds) when it has one, and never more than max_delay.
    - Why a retry cannot act twice: Kasir keeps the first complete answer to a key and gives it
      again, byte for byte, to a repeat with the same key and body (the result's `replayed` is
      then True); a 5xx or a lost connection lets go of the key, so the next try is the one that
      acts. Reads (wallet_inquiry, va_inquiry, payment_link, bnpl_status, bnpl_calculate, access_token,
      account_inquiry, balance, transfer_status, history, history_detail) change nothing.
    - When the tries run out, the failure is raised (card_charge returns it as a ChargeResult). To
      repeat such a call later without acting twice, send it again with the same key: pass your
      own `idempotency_key` (one per intended operation, e.g. your order id) if you may need to.
    """

    def __init__(
        self,
        base_url: str,
        credentials: Credentials,
        *,
        timeout: float = 15.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        max_delay: float = 5.0,
        signing: Signing = "symmetric",
        transport: httpx.BaseTransport | None = None,
        on_request: RequestHook | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        super().__init__(
            base_url,
            credentials,
            timeout=timeout,
            max_retries=max_retries,
            backoff=backoff,
            max_delay=max_delay,
            signing=signing,
            on_request=on_request,
            logger=logger,
        )
        self._http = httpx.Client(
            base_url=self.base_url, timeout=self.timeout, transport=transport, headers={"User-Agent": USER_AGENT}
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(self, build: Callable[[], _Request]) -> httpx.Response:
        """One call: tries, each built afresh by `build`, as the class docstring says."""
        for attempt in range(self.max_retries + 1):
            request = build()
            started = time.monotonic()
            try:
                response = self._http.request(
                    request.method, request.path, headers=request.headers, content=request.body
                )
            except httpx.TransportError as exc:
                final = attempt == self.max_retries
                self._record(request, attempt, started, None, exc, not final)
                if final:
                    raise TransportError(f"{type(exc).__name__}: {exc}") from exc
                retry_after = None
            else:
                final = attempt == self.max_retries or not _retryable(request, response)
                self._record(request, attempt, started, response, None, not final)
                if final:
                    return response
                retry_after = _retry_after(response)
            time.sleep(self._delay(attempt, retry_after))
        raise AssertionError("unreachable")

    def access_token(self, product: Product = "payment") -> str:
        """A valid token of `product`, cached and refreshed before it expires."""
        cached = self._cached_token(product)
        if cached is not None:
            return cached
        return self._parse_token(product, self._send(lambda: self._token_request(product)))

    def _snap(
        self, path: str, payload: Mapping[str, Any], signing: Signing | None, idempotency_key: str | None = None
    ) -> httpx.Response:
        body = _encode(payload)
        external_id = str(uuid.uuid4().int)[:36]  # fresh per call, kept across its retries
        mode = signing or self.signing
        token = self.access_token("payment") if mode == "symmetric" else None
        return self._send(lambda: self._snap_request(path, body, external_id, token, idempotency_key))

    def bnpl_calculate(self, payload: BnplCalculate, *, signing: Signing | None = None) -> BnplCalculation:
        return self._calculation(self._snap("/v1.0/bnpl/payment-calculation", payload, signing))

    def bnpl_checkout(
        self, payload: BnplCheckout, *, signing: Signing | None = None, idempotency_key: str | None = None
    ) -> BnplTransaction:
        key = _idempotency_key(idempotency_key)
        return self._bnpl_transaction(self._snap("/v1.0/bnpl/qr-checkout", payload, signing, key))

    def bnpl_status(
        self,
        *,
        partner_reference_no: str | None = None,
        reference_no: str | None = None,
        signing: Signing | None = None,
    ) -> BnplTransaction:
        payload = {
            k: v
            for k, v in (("originalPartnerReferenceNo", partner_reference_no), ("originalReferenceNo", reference_no))
            if v is not None
        }
        return self._bnpl_transaction(self._snap("/v1.0/bnpl/status", payload, signing))

    # --- disbursement: the disbursement token, the symmetric signature (docs/merchant/payouts.md) ---

    def _payout(self, path: str, payload: Mapping[str, Any], idempotency_key: str | None = None) -> httpx.Response:
        body = _encode(payload)
        external_id = str(uuid.uuid4().int)[:36]  # fresh per call, kept across its retries
        token = self.access_token("disbursement")
        return self._send(
            lambda: self._snap_request(path, body, external_id, token, idempotency_key, PAYOUT_CHANNEL_ID)
        )

    def account_inquiry(self, payload: AccountInquiry) -> PayoutAccount:
        """Whose account a bank code and account number name (advisory: a transfer never compares the name)."""
        return self._payout_account(self._payout(PAYOUT_PATHS["account_inquiry"], payload))

    def balance(self, payload: BalanceInquiry | None = None) -> PayoutBalance:
        """Your disbursement balance: available, hold, ledger."""
        return self._payout_balance(self._payout(PAYOUT_PATHS["balance"], payload or {}))

    def transfer(
        self, payload: TransferInterbank, *, idempotency_key: str | None = None, version: TransferVersion = "v1.2"
    ) -> PayoutTransfer:
        """Send money: accepted transfers hold their amount at once; `status` says where it is (`is_final`)."""
        key = _idempotency_key(idempotency_key)
        return self._payout_transfer(self._payout(_transfer_path(version), payload, key))

    def transfer_status(
        self, *, partner_reference_no: str | None = None, reference_no: str | None = None
    ) -> PayoutTransfer:
        """A transfer's state now, by your partnerReferenceNo or Kasir's referenceNo."""
        body = _status_body(partner_reference_no, reference_no)
        return self._payout_transfer(self._payout(PAYOUT_PATHS["transfer_status"], body))

    def history(self, payload: HistoryList | None = None) -> PayoutHistory:
        """Transfers, returns and top-ups, newest first (default: today, Asia/Jakarta; 10 a page)."""
        return self._payout_history(self._payout(PAYOUT_PATHS["history"], payload or {}))

    def history_detail(self, partner_reference_no: str) -> PayoutHistoryEntry:
        """One transfer's line of the history."""
        body = {"originalPartnerReferenceNo": partner_reference_no}
        return self._payout_history_detail(self._payout(PAYOUT_PATHS["history_detail"], body))

    def _wallet_call(self, path: str, payload: Mapping[str, Any], idempotency_key: str | None) -> WalletResult:
        response = self._send(lambda: self._wallet_request(path, payload, idempotency_key))
        return self._wallet(response, payload)

    def wallet_create_payment(
        self, payload: WalletCreatePayment, *, idempotency_key: str | None = None
    ) -> WalletResult:
        return self._wallet_call("/ewallet/v2/create-payment", payload, _idempotency_key(idempotency_key))

    def wallet_create_qr(self, payload: WalletCreatePayment, *, idempotency_key: str | None = None) -> WalletResult:
        return self._wallet_call("/ewallet/v2/create-qr", payload, _idempotency_key(idempotency_key))

    def wallet_inquiry(self, payload: WalletReference) -> WalletResult:
        return self._wallet_call("/ewallet/v2/inquiry", payload, None)

    def wallet_refund(self, payload: WalletRefund, *, idempotency_key: str | None = None) -> WalletResult:
        return self._wallet_call("/ewallet/v2/refund", payload, _idempotency_key(idempotency_key))

    def wallet_void(self, payload: WalletVoid, *, idempotency_key: str | None = None) -> WalletResult:
        return self._wallet_call("/ewallet/v2/void", payload, _idempotency_key(idempotency_key))

    def wallet_dummy_payment(self, payload: WalletDummyPayment, *, idempotency_key: str | None = None) -> WalletResult:
        return self._wallet_call("/ewallet/v2/dummy-payment", payload, _idempotency_key(idempotency_key))

    def _va_send(
        self, path: str, payload: Mapping[str, Any], idempotency_key: str | None, sub_merchant_id: str | None
    ) -> httpx.Response:
        return self._send(lambda: self._wallet_request(path, payload, idempotency_key, sub_merchant_id))

    def create_va(
        self, payload: VaCreate, *, sub_merchant_id: str | None = None, idempotency_key: str | None = None
    ) -> VaResult:
        """Create a virtual account (PENDING): give the customer `result.va_number` and the bank (its channel).

        `sub_merchant_id`: one of your sub-merchants; it signs the VA's callbacks (verify_va_callback)."""
        return self._va(self._va_send("/va", payload, _idempotency_key(idempotency_key), sub_merchant_id))

    def va_inquiry(self, payload: VaReference, *, sub_merchant_id: str | None = None) -> VaResult:
        """The virtual account as Kasir has it now, with its last five payments."""
        return self._va(self._va_send("/va/inquiry", payload, None, sub_merchant_id))

    def cancel_va(
        self, payload: VaReference, *, sub_merchant_id: str | None = None, idempotency_key: str | None = None
    ) -> VaResult:
        """Stop further payments into an open virtual account (CANCELLED); what was paid stays paid."""
        return self._va(self._va_send("/va/cancel", payload, _idempotency_key(idempotency_key), sub_merchant_id))

    def simulate_va_payment(
        self, payload: VaDummyPayment, *, sub_merchant_id: str | None = None, idempotency_key: str | None = None
    ) -> VaPaymentResult:
        """Staging only (404 in production): one payment into the virtual account, as a bank would make it."""
        key = _idempotency_key(idempotency_key)
        return self._va_payment(self._va_send("/va/dummy-payment", payload, key, sub_merchant_id))

    def create_payment_link(
        self, payload: PaymentLinkCreate, *, sub_merchant_id: str | None = None, idempotency_key: str | None = None
    ) -> PaymentLinkResult:
        """Create a payment link (PENDING): send the customer to `result.payment_url`, where they pay by any of
        `selected_channels` (card, wallet, QRIS, virtual account). Its callbacks are payment-page callbacks
        (verify_payment_page_callback). `sub_merchant_id`: one of your sub-merchants; it signs them."""
        key = _idempotency_key(idempotency_key)
        return self._payment_link(self._va_send("/payment-page/payment", payload, key, sub_merchant_id))

    def payment_link(self, transaction_id: str) -> PaymentLinkResult:
        """The payment link as Kasir has it now (PENDING, SUCCESS or EXPIRED) and how it was paid."""
        return self._payment_link(self._send(lambda: self._link_request(transaction_id)))

    def confirm_payment_link(
        self, event: PaymentPageCallback, *, amount: int | Decimal | str | None = None
    ) -> PaymentLinkResult:
        """Confirm a payment link's callback by asking Kasir before you fulfil the order.

        The callback's svc-signature covers neither its status nor its amount: returns payment_link's answer
        when the link is the same order's and in the callback's state (SUCCESS for the callback's amount, and
        `amount` when you give it; EXPIRED; for FAILED, PENDING or EXPIRED); raises ConfirmationError otherwise.
        """
        return self._confirm_link(event, self.payment_link(event.transaction_id), amount)

    def card_charge(self, payload: CardCharge, *, idempotency_key: str | None = None) -> ChargeResult:
        """Charge; an answer that is not a success is returned, not raised (the interface's SDK mapping)."""
        key = _idempotency_key(idempotency_key)
        return self._charge(self._send(lambda: self._card_request(payload, key)))

    def confirm_wallet_payment(
        self, event: WalletPaymentRef, *, amount: int | Decimal | str | None = None, status: str = "PAID"
    ) -> WalletResult:
        """Confirm a wallet callback by inquiry before you fulfil the order.

        The callback's svc-signature covers neither its status nor its amount, so ask Kasir:
        returns the inquiry's WalletResult when the transaction is `status` (PAID), for the same
        order and, when you give it, for `amount` (from YOUR order, whole rupiah); raises
        ConfirmationError otherwise (and APIError or TransportError as wallet_inquiry does).
        """
        reference = self._wallet_reference(event)
        return self._confirm_wallet(reference, self.wallet_inquiry(reference), amount, status)

    def confirm_va_payment(self, event: VaCallback, *, amount: int | Decimal | str | None = None) -> VaResult:
        """Confirm a VA callback by inquiry before you fulfil the order.

        The callback's svc-signature covers neither its status nor its amount, so ask Kasir: returns the
        inquiry's VaResult when the VA is the same order's and, for a payment, its `reference_id` is among
        the VA's last five payments with the callback's amount (and `amount`, when you give it); for
        EXPIRED and CANCELLED, when the VA is in that state. Raises ConfirmationError otherwise.
        """
        return self._confirm_va(event, self.va_inquiry(self._va_reference(event)), amount)

    def confirm_bnpl_payment(
        self, event: BnplNotification, *, amount: Decimal | str | int | None = None, status: str = "00"
    ) -> BnplTransaction:
        """Confirm a BNPL notification by a status inquiry: latestTransactionStatus `status` (00,
        approved) for the same partnerReferenceNo and, when given, `amount`; else ConfirmationError."""
        result = self.bnpl_status(
            partner_reference_no=event.original_partner_reference_no or None,
            reference_no=event.original_reference_no or None,
        )
        return self._confirm_bnpl(event, result, amount, status)


class AsyncClient(_Core):
    """Asynchronous client; the same methods, options and retry rule as Client, awaited."""

    def __init__(
        self,
        base_url: str,
        credentials: Credentials,
        *,
        timeout: float = 15.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        max_delay: float = 5.0,
        signing: Signing = "symmetric",
        transport: httpx.AsyncBaseTransport | None = None,
        on_request: RequestHook | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        super().__init__(
            base_url,
            credentials,
            timeout=timeout,
            max_retries=max_retries,
            backoff=backoff,
            max_delay=max_delay,
            signing=signing,
            on_request=on_request,
            logger=logger,
        )
        self._http = httpx.AsyncClient(
            base_url=self.base_url, timeout=self.timeout, transport=transport, headers={"User-Agent": USER_AGENT}
        )
        self._token_lock = asyncio.Lock()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _send(self, build: Callable[[], _Request]) -> httpx.Response:
        for attempt in range(self.max_retries + 1):
            request = build()
            started = time.monotonic()
            try:
                response = await self._http.request(
                    request.method, request.path, headers=request.headers, content=request.body
                )
            except httpx.TransportError as exc:
                final = attempt == self.max_retries
                self._record(request, attempt, started, None, exc, not final)
                if final:
                    raise TransportError(f"{type(exc).__name__}: {exc}") from exc
                retry_after = None
            else:
                final = attempt == self.max_retries or not _retryable(request, response)
                self._record(request, attempt, started, response, None, not final)
                if final:
                    return response
                retry_after = _retry_after(response)
            await asyncio.sleep(self._delay(attempt, retry_after))
        raise AssertionError("unreachable")

    async def access_token(self, product: Product = "payment") -> str:
        async with self._token_lock:  # one refresh for many concurrent callers
            cached = self._cached_token(product)
            if cached is not None:
                return cached
            return self._parse_token(product, await self._send(lambda: self._token_request(product)))

    async def _snap(
        self, path: str, payload: Mapping[str, Any], signing: Signing | None, idempotency_key: str | None = None
    ) -> httpx.Response:
        body = _encode(payload)
        external_id = str(uuid.uuid4().int)[:36]
        mode = signing or self.signing
        token = await self.access_token("payment") if mode == "symmetric" else None
        return await self._send(lambda: self._snap_request(path, body, external_id, token, idempotency_key))

    async def bnpl_calculate(self, payload: BnplCalculate, *, signing: Signing | None = None) -> BnplCalculation:
        return self._calculation(await self._snap("/v1.0/bnpl/payment-calculation", payload, signing))

    async def bnpl_checkout(
        self, payload: BnplCheckout, *, signing: Signing | None = None, idempotency_key: str | None = None
    ) -> BnplTransaction:
        key = _idempotency_key(idempotency_key)
        return self._bnpl_transaction(await self._snap("/v1.0/bnpl/qr-checkout", payload, signing, key))

    async def bnpl_status(
        self,
        *,
        partner_reference_no: str | None = None,
        reference_no: str | None = None,
        signing: Signing | None = None,
    ) -> BnplTransaction:
        payload = {
            k: v
            for k, v in (("originalPartnerReferenceNo", partner_reference_no), ("originalReferenceNo", reference_no))
            if v is not None
        }
        return self._bnpl_transaction(await self._snap("/v1.0/bnpl/status", payload, signing))

    # --- disbursement: the disbursement token, the symmetric signature (docs/merchant/payouts.md) ---

    async def _payout(
        self, path: str, payload: Mapping[str, Any], idempotency_key: str | None = None
    ) -> httpx.Response:
        body = _encode(payload)
        external_id = str(uuid.uuid4().int)[:36]
        token = await self.access_token("disbursement")
        return await self._send(
            lambda: self._snap_request(path, body, external_id, token, idempotency_key, PAYOUT_CHANNEL_ID)
        )

    async def account_inquiry(self, payload: AccountInquiry) -> PayoutAccount:
        return self._payout_account(await self._payout(PAYOUT_PATHS["account_inquiry"], payload))

    async def balance(self, payload: BalanceInquiry | None = None) -> PayoutBalance:
        return self._payout_balance(await self._payout(PAYOUT_PATHS["balance"], payload or {}))

    async def transfer(
        self, payload: TransferInterbank, *, idempotency_key: str | None = None, version: TransferVersion = "v1.2"
    ) -> PayoutTransfer:
        key = _idempotency_key(idempotency_key)
        return self._payout_transfer(await self._payout(_transfer_path(version), payload, key))

    async def transfer_status(
        self, *, partner_reference_no: str | None = None, reference_no: str | None = None
    ) -> PayoutTransfer:
        body = _status_body(partner_reference_no, reference_no)
        return self._payout_transfer(await self._payout(PAYOUT_PATHS["transfer_status"], body))

    async def history(self, payload: HistoryList | None = None) -> PayoutHistory:
        return self._payout_history(await self._payout(PAYOUT_PATHS["history"], payload or {}))

    async def history_detail(self, partner_reference_no: str) -> PayoutHistoryEntry:
        body = {"originalPartnerReferenceNo": partner_reference_no}
        return self._payout_history_detail(await self._payout(PAYOUT_PATHS["history_detail"], body))

    async def _wallet_call(self, path: str, payload: Mapping[str, Any], idempotency_key: str | None) -> WalletResult:
        response = await self._send(lambda: self._wallet_request(path, payload, idempotency_key))
        return self._wallet(response, payload)

    async def wallet_create_payment(
        self, payload: WalletCreatePayment, *, idempotency_key: str | None = None
    ) -> WalletResult:
        return await self._wallet_call("/ewallet/v2/create-payment", payload, _idempotency_key(idempotency_key))

    async def wallet_create_qr(
        self, payload: WalletCreatePayment, *, idempotency_key: str | None = None
    ) -> WalletResult:
        return await self._wallet_call("/ewallet/v2/create-qr", payload, _idempotency_key(idempotency_key))

    async def wallet_inquiry(self, payload: WalletReference) -> WalletResult:
        return await self._wallet_call("/ewallet/v2/inquiry", payload, None)

    async def wallet_refund(self, payload: WalletRefund, *, idempotency_key: str | None = None) -> WalletResult:
        return await self._wallet_call("/ewallet/v2/refund", payload, _idempotency_key(idempotency_key))

    async def wallet_void(self, payload: WalletVoid, *, idempotency_key: str | None = None) -> WalletResult:
        return await self._wallet_call("/ewallet/v2/void", payload, _idempotency_key(idempotency_key))

    async def wallet_dummy_payment(
        self, payload: WalletDummyPayment, *, idempotency_key: str | None = None
    ) -> WalletResult:
        return await self._wallet_call("/ewallet/v2/dummy-payment", payload, _idempotency_key(idempotency_key))

    async def _va_send(
        self, path: str, payload: Mapping[str, Any], idempotency_key: str | None, sub_merchant_id: str | None
    ) -> httpx.Response:
        return await self._send(lambda: self._wallet_request(path, payload, idempotency_key, sub_merchant_id))

    async def create_va(
        self, payload: VaCreate, *, sub_merchant_id: str | None = None, idempotency_key: str | None = None
    ) -> VaResult:
        """Create a virtual account: see Client.create_va."""
        return self._va(await self._va_send("/va", payload, _idempotency_key(idempotency_key), sub_merchant_id))

    async def va_inquiry(self, payload: VaReference, *, sub_merchant_id: str | None = None) -> VaResult:
        return self._va(await self._va_send("/va/inquiry", payload, None, sub_merchant_id))

    async def cancel_va(
        self, payload: VaReference, *, sub_merchant_id: str | None = None, idempotency_key: str | None = None
    ) -> VaResult:
        key = _idempotency_key(idempotency_key)
        return self._va(await self._va_send("/va/cancel", payload, key, sub_merchant_id))

    async def simulate_va_payment(
        self, payload: VaDummyPayment, *, sub_merchant_id: str | None = None, idempotency_key: str | None = None
    ) -> VaPaymentResult:
        """Staging only: see Client.simulate_va_payment."""
        key = _idempotency_key(idempotency_key)
        return self._va_payment(await self._va_send("/va/dummy-payment", payload, key, sub_merchant_id))

    async def create_payment_link(
        self, payload: PaymentLinkCreate, *, sub_merchant_id: str | None = None, idempotency_key: str | None = None
    ) -> PaymentLinkResult:
        """Create a payment link: see Client.create_payment_link."""
        key = _idempotency_key(idempotency_key)
        return self._payment_link(await self._va_send("/payment-page/payment", payload, key, sub_merchant_id))

    async def payment_link(self, transaction_id: str) -> PaymentLinkResult:
        """The payment link as Kasir has it now: see Client.payment_link."""
        return self._payment_link(await self._send(lambda: self._link_request(transaction_id)))

    async def confirm_payment_link(
        self, event: PaymentPageCallback, *, amount: int | Decimal | str | None = None
    ) -> PaymentLinkResult:
        """Confirm a payment link's callback: see Client.confirm_payment_link."""
        return self._confirm_link(event, await self.payment_link(event.transaction_id), amount)

    async def card_charge(self, payload: CardCharge, *, idempotency_key: str | None = None) -> ChargeResult:
        key = _idempotency_key(idempotency_key)
        return self._charge(await self._send(lambda: self._card_request(payload, key)))

    async def confirm_wallet_payment(
        self, event: WalletPaymentRef, *, amount: int | Decimal | str | None = None, status: str = "PAID"
    ) -> WalletResult:
        """Confirm a wallet callback by inquiry: see Client.confirm_wallet_payment."""
        reference = self._wallet_reference(event)
        return self._confirm_wallet(reference, await self.wallet_inquiry(reference), amount, status)

    async def confirm_va_payment(self, event: VaCallback, *, amount: int | Decimal | str | None = None) -> VaResult:
        """Confirm a VA callback by inquiry: see Client.confirm_va_payment."""
        return self._confirm_va(event, await self.va_inquiry(self._va_reference(event)), amount)

    async def confirm_bnpl_payment(
        self, event: BnplNotification, *, amount: Decimal | str | int | None = None, status: str = "00"
    ) -> BnplTransaction:
        """Confirm a BNPL notification by a status inquiry: see Client.confirm_bnpl_payment."""
        result = await self.bnpl_status(
            partner_reference_no=event.original_partner_reference_no or None,
            reference_no=event.original_reference_no or None,
        )
        return self._confirm_bnpl(event, result, amount, status)
