"""Client and AsyncClient: every endpoint, signed and retried correctly by construction."""

from __future__ import annotations

import asyncio
import json
import random
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

import httpx

from kasir_client._errors import ConfigurationError, TransportError, error_for
from kasir_client._models import (
    AccessToken,
    BnplCalculation,
    BnplTransaction,
    ChargeResult,
    Credentials,
    InstallmentOption,
    WalletResult,
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

Product = Literal["payment", "disbursement"]
Signing = Literal["symmetric", "asymmetric"]

TOKEN_PATHS: dict[str, str] = {
    "payment": "/auth/merchants/v1.0/access-token/b2b",
    "disbursement": "/api/v1.0/access-token/b2b",
}
TOKEN_REFRESH_MARGIN = 60.0  # seconds before expiry a cached token is replaced
RETRY_STATUSES = frozenset({500, 502, 503, 504})
# Failures after which the request certainly did not reach the service: always safe to send again.
UNSENT_ERRORS = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
# Answers after which the service certainly changed nothing (its unit of work rolled back, or it
# was not reached); a gateway's 502/504 may come after the service acted, so they are not among them.
UNCHANGED_STATUSES = frozenset({500, 503})


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


def _transport_error(exc: httpx.TransportError, replay_safe: bool) -> TransportError:
    message = f"{type(exc).__name__}: {exc}"
    if not replay_safe and not isinstance(exc, UNSENT_ERRORS):
        message += " (the service may have processed the request: check with wallet_inquiry before repeating it)"
    return TransportError(message)


class _Core:
    def __init__(
        self,
        base_url: str,
        credentials: Credentials,
        *,
        timeout: float = 15.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        signing: Signing = "symmetric",
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.credentials = credentials
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.signing = signing
        self._tokens: dict[str, AccessToken] = {}
        self._key = load_private_key(credentials.private_key_pem) if credentials.private_key_pem else None

    def _private_key(self) -> Any:
        if self._key is None:
            raise ConfigurationError("this call needs the merchant's RSA private key (Credentials.private_key_pem)")
        return self._key

    def _delay(self, attempt: int) -> float:
        """Exponential backoff with full jitter."""
        return random.uniform(0, self.backoff * (2**attempt))  # noqa: S311 (jitter)

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
            raise error_for(response.status_code, body)
        self._tokens[product] = AccessToken(
            body["accessToken"], product, time.monotonic() + float(body.get("expiresIn", "900"))
        )
        return str(body["accessToken"])

    def _snap_request(self, path: str, body: bytes, external_id: str, token: str | None) -> _Request:
        ts = timestamp()
        headers = {
            "Content-Type": "application/json",
            "X-TIMESTAMP": ts,
            "X-PARTNER-ID": self.credentials.merchant_id,
            "X-EXTERNAL-ID": external_id,
            "CHANNEL-ID": "95221",
        }
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
            headers["X-SIGNATURE"] = snap_symmetric(self.credentials.client_secret, "POST", path, token, body, ts)
        else:
            headers["X-SIGNATURE"] = snap_asymmetric(self._private_key(), "POST", path, body, ts)
        return _Request("POST", path, headers, body)

    def _wallet_request(self, path: str, payload: Mapping[str, Any]) -> _Request:
        credentials = self.credentials
        external_id, order_id = str(payload.get("external_id", "")), str(payload.get("order_id", ""))
        return _Request(
            "POST",
            path,
            {
                "Content-Type": "application/json",
                "Authorization": basic_authorization(credentials.merchant_id, credentials.secret, credentials.hash_key),
                "x-req-signature": x_req_signature(credentials.hash_key, external_id, order_id),
                "x-version": "v3",
            },
            _encode(payload),
        )

    def _card_request(self, payload: Mapping[str, Any], idempotency_key: str) -> _Request:
        credentials = self.credentials
        return _Request(
            "POST",
            "/card-v2/v1/charge",
            {
                "Content-Type": "application/json",
                "Authorization": basic_authorization(credentials.merchant_id, credentials.secret, credentials.hash_key),
                "X-Idempotency-Key": idempotency_key,
            },
            _encode({"source": "kasir-client", **payload}),
        )

    # --- answers ---------------------------------------------------------------------

    @staticmethod
    def _snap_ok(response: httpx.Response) -> dict[str, Any]:
        body = _json(response)
        if not 200 <= response.status_code < 300:
            raise error_for(response.status_code, body)
        assert isinstance(body, dict)
        return body

    @staticmethod
    def _calculation(body: dict[str, Any]) -> BnplCalculation:
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
        return BnplCalculation(str(body.get("responseCode")), options, body)

    @staticmethod
    def _bnpl_transaction(body: dict[str, Any]) -> BnplTransaction:
        return BnplTransaction(
            response_code=str(body.get("responseCode")),
            reference_no=str(body.get("referenceNo", body.get("originalReferenceNo", ""))),
            partner_reference_no=str(body.get("partnerReferenceNo", body.get("originalPartnerReferenceNo", ""))),
            status=str(body.get("latestTransactionStatus", "")),
            status_description=str(body.get("transactionStatusDesc", "")),
            qr_content=body.get("qrContent"),
            qr_url=body.get("qrUrl"),
            raw=body,
        )

    @staticmethod
    def _wallet(response: httpx.Response, payload: Mapping[str, Any]) -> WalletResult:
        body = _json(response)
        if not 200 <= response.status_code < 300 or not isinstance(body, dict):
            raise error_for(response.status_code, body)

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
            paid_time=text("paid_time"),
            expired_time=text("expired_time"),
            payment_url=text("payment_url"),
            qr_string=text("qr_string"),
            qr_url=text("qr_url"),
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
        return ChargeResult(
            is_success=success,
            status_code=status_code,
            message=message,
            http_status=response.status_code,
            transaction_id=data.get("transactionId"),
            payment_status=data.get("paymentStatus"),
            link=data.get("link") if success else None,
            errors=[e for e in errors if isinstance(e, dict)],
            replayed=response.headers.get("Idempotent-Replayed") == "true",
            raw=body,
        )


class Client(_Core):
    """Synchronous client.

    client = Client("http://127.0.0.1:8000", Credentials.from_files("credentials.json", "private.pem"))
    result = client.card_charge({...})
    if result.is_success: redirect(result.link)
    """

    def __init__(self, base_url: str, credentials: Credentials, **options: Any) -> None:
        super().__init__(base_url, credentials, **options)
        self._http = httpx.Client(base_url=self.base_url, timeout=self.timeout)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(self, build: Callable[[], _Request], *, replay_safe: bool = True) -> httpx.Response:
        """Retries connection errors and 5xx with backoff and jitter; never 4xx.

        `replay_safe=False` (wallet calls, which carry no idempotency key): a failure after the
        request may have reached the service (read timeout, dropped connection) is raised, not retried.
        """
        for attempt in range(self.max_retries + 1):
            request = build()
            try:
                response = self._http.request(
                    request.method, request.path, headers=request.headers, content=request.body
                )
            except httpx.TransportError as exc:
                if attempt == self.max_retries or not (replay_safe or isinstance(exc, UNSENT_ERRORS)):
                    raise _transport_error(exc, replay_safe) from exc
            else:
                retry_on = RETRY_STATUSES if replay_safe else UNCHANGED_STATUSES
                if response.status_code not in retry_on or attempt == self.max_retries:
                    return response
            time.sleep(self._delay(attempt))
        raise AssertionError("unreachable")

    def access_token(self, product: Product = "payment") -> str:
        """A valid token of `product`, cached and refreshed before it expires."""
        cached = self._cached_token(product)
        if cached is not None:
            return cached
        return self._parse_token(product, self._send(lambda: self._token_request(product)))

    def _snap(self, path: str, payload: Mapping[str, Any], signing: Signing | None) -> dict[str, Any]:
        body = _encode(payload)
        external_id = str(uuid.uuid4().int)[:36]  # fresh per request, kept across its retries
        mode = signing or self.signing
        token = self.access_token("payment") if mode == "symmetric" else None
        return self._snap_ok(self._send(lambda: self._snap_request(path, body, external_id, token)))

    def bnpl_calculate(self, payload: Mapping[str, Any], *, signing: Signing | None = None) -> BnplCalculation:
        return self._calculation(self._snap("/v1.0/bnpl/payment-calculation", payload, signing))

    def bnpl_checkout(self, payload: Mapping[str, Any], *, signing: Signing | None = None) -> BnplTransaction:
        return self._bnpl_transaction(self._snap("/v1.0/bnpl/qr-checkout", payload, signing))

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

    def _wallet_call(self, path: str, payload: Mapping[str, Any], *, replay_safe: bool = False) -> WalletResult:
        response = self._send(lambda: self._wallet_request(path, payload), replay_safe=replay_safe)
        return self._wallet(response, payload)

    def wallet_create_payment(self, payload: Mapping[str, Any]) -> WalletResult:
        return self._wallet_call("/ewallet/v2/create-payment", payload)

    def wallet_create_qr(self, payload: Mapping[str, Any]) -> WalletResult:
        return self._wallet_call("/ewallet/v2/create-qr", payload)

    def wallet_inquiry(self, payload: Mapping[str, Any]) -> WalletResult:
        return self._wallet_call("/ewallet/v2/inquiry", payload, replay_safe=True)

    def wallet_refund(self, payload: Mapping[str, Any]) -> WalletResult:
        return self._wallet_call("/ewallet/v2/refund", payload)

    def wallet_void(self, payload: Mapping[str, Any]) -> WalletResult:
        return self._wallet_call("/ewallet/v2/void", payload)

    def wallet_dummy_payment(self, payload: Mapping[str, Any]) -> WalletResult:
        return self._wallet_call("/ewallet/v2/dummy-payment", payload)

    def card_charge(self, payload: Mapping[str, Any], *, idempotency_key: str | None = None) -> ChargeResult:
        """Charge; the same X-Idempotency-Key is sent on every retry, so a retry never charges twice."""
        key = idempotency_key or str(uuid.uuid4())
        return self._charge(self._send(lambda: self._card_request(payload, key)))


class AsyncClient(_Core):
    """Asynchronous client; same methods as Client, awaited."""

    def __init__(self, base_url: str, credentials: Credentials, **options: Any) -> None:
        super().__init__(base_url, credentials, **options)
        self._http = httpx.AsyncClient(base_url=self.base_url, timeout=self.timeout)
        self._token_lock = asyncio.Lock()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _send(self, build: Callable[[], _Request], *, replay_safe: bool = True) -> httpx.Response:
        for attempt in range(self.max_retries + 1):
            request = build()
            try:
                response = await self._http.request(
                    request.method, request.path, headers=request.headers, content=request.body
                )
            except httpx.TransportError as exc:
                if attempt == self.max_retries or not (replay_safe or isinstance(exc, UNSENT_ERRORS)):
                    raise _transport_error(exc, replay_safe) from exc
            else:
                retry_on = RETRY_STATUSES if replay_safe else UNCHANGED_STATUSES
                if response.status_code not in retry_on or attempt == self.max_retries:
                    return response
            await asyncio.sleep(self._delay(attempt))
        raise AssertionError("unreachable")

    async def access_token(self, product: Product = "payment") -> str:
        async with self._token_lock:  # one refresh for many concurrent callers
            cached = self._cached_token(product)
            if cached is not None:
                return cached
            return self._parse_token(product, await self._send(lambda: self._token_request(product)))

    async def _snap(self, path: str, payload: Mapping[str, Any], signing: Signing | None) -> dict[str, Any]:
        body = _encode(payload)
        external_id = str(uuid.uuid4().int)[:36]
        mode = signing or self.signing
        token = await self.access_token("payment") if mode == "symmetric" else None
        return self._snap_ok(await self._send(lambda: self._snap_request(path, body, external_id, token)))

    async def bnpl_calculate(self, payload: Mapping[str, Any], *, signing: Signing | None = None) -> BnplCalculation:
        return self._calculation(await self._snap("/v1.0/bnpl/payment-calculation", payload, signing))

    async def bnpl_checkout(self, payload: Mapping[str, Any], *, signing: Signing | None = None) -> BnplTransaction:
        return self._bnpl_transaction(await self._snap("/v1.0/bnpl/qr-checkout", payload, signing))

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

    async def _wallet_call(self, path: str, payload: Mapping[str, Any], *, replay_safe: bool = False) -> WalletResult:
        response = await self._send(lambda: self._wallet_request(path, payload), replay_safe=replay_safe)
        return self._wallet(response, payload)

    async def wallet_create_payment(self, payload: Mapping[str, Any]) -> WalletResult:
        return await self._wallet_call("/ewallet/v2/create-payment", payload)

    async def wallet_create_qr(self, payload: Mapping[str, Any]) -> WalletResult:
        return await self._wallet_call("/ewallet/v2/create-qr", payload)

    async def wallet_inquiry(self, payload: Mapping[str, Any]) -> WalletResult:
        return await self._wallet_call("/ewallet/v2/inquiry", payload, replay_safe=True)

    async def wallet_refund(self, payload: Mapping[str, Any]) -> WalletResult:
        return await self._wallet_call("/ewallet/v2/refund", payload)

    async def wallet_void(self, payload: Mapping[str, Any]) -> WalletResult:
        return await self._wallet_call("/ewallet/v2/void", payload)

    async def wallet_dummy_payment(self, payload: Mapping[str, Any]) -> WalletResult:
        return await self._wallet_call("/ewallet/v2/dummy-payment", payload)

    async def card_charge(self, payload: Mapping[str, Any], *, idempotency_key: str | None = None) -> ChargeResult:
        key = idempotency_key or str(uuid.uuid4())
        return self._charge(await self._send(lambda: self._card_request(payload, key)))
