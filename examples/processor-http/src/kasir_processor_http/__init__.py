"""Kasir's reference processor over HTTP (PROTOCOL.md): card acquirer, wallet issuer, BNPL lender, VA issuer, payout
rail.

Registered as `http` in the entry-point group `kasir.processors`; configured from the
environment (KASIR_PROCESSOR_HTTP_URL, KASIR_PROCESSOR_HTTP_SECRET,
KASIR_PROCESSOR_HTTP_TIMEOUT_SECONDS). Every request is signed; every notification is
verified before Kasir applies it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from kasir.config import Settings
from kasir.errors import BadRequest
from kasir.processors.protocols import (
    AccountInfo,
    AccountStatus,
    BnplApplication,
    CardCharge,
    CardDecision,
    CardResult,
    Checkout,
    DeclineReason,
    Event,
    ForgedNotification,
    Notification,
    PayoutAnswer,
    PayoutOrder,
    PayoutState,
    ProcessorRefused,
    ProcessorUnavailable,
    VaOpening,
    WalletPayment,
)

NAME = "http"
NOTIFY_PATH = f"/processors/{NAME}/notify"
MAX_SKEW_SECONDS = 300


def signature(secret: str, timestamp: str, method: str, path: str, body: bytes) -> str:
    message = b"\n".join([timestamp.encode(), method.upper().encode(), path.encode(), body])
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def verify(secret: str, headers: Mapping[str, str], method: str, path: str, body: bytes) -> None:
    """ForgedNotification unless the headers sign (method, path, body) with `secret`, recently."""
    timestamp = headers.get("x-kasir-timestamp", "")
    given = headers.get("x-kasir-signature", "")
    if not timestamp.isdigit() or abs(time.time() - int(timestamp)) > MAX_SKEW_SECONDS:
        raise ForgedNotification("X-Kasir-Timestamp is missing or too far from now")
    if not hmac.compare_digest(signature(secret, timestamp, method, path, body).encode(), given.encode()):
        raise ForgedNotification()


class Upstream:
    """The money mover: signed POSTs, JSON answers, its timeout."""

    def __init__(self, base_url: str, secret: str, timeout: float) -> None:
        self.base_url = base_url.rstrip("/")
        self.secret = secret
        self.timeout = timeout

    async def post(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        body = json.dumps(payload, separators=(",", ":")).encode()
        timestamp = str(int(time.time()))
        headers = {
            "Content-Type": "application/json",
            "X-Kasir-Timestamp": timestamp,
            "X-Kasir-Signature": signature(self.secret, timestamp, "POST", path, body),
        }
        try:
            async with httpx.AsyncClient(timeout=self.timeout, trust_env=False) as http:
                answer = await http.post(self.base_url + path, content=body, headers=headers)
        except httpx.HTTPError as exc:
            raise ProcessorUnavailable(f"The payment processor did not answer ({type(exc).__name__})") from None
        if answer.status_code >= 500:
            raise ProcessorUnavailable(f"The payment processor answered {answer.status_code}")
        if answer.status_code >= 400:
            message = _message(answer) or f"the payment processor answered {answer.status_code}"
            raise ProcessorRefused(f"Failed Request: {message}")
        data: dict[str, Any] = answer.json()
        return data


def _message(answer: httpx.Response) -> str | None:
    try:
        return str(answer.json().get("message") or "") or None
    except ValueError:
        return None


def decision_of(data: Mapping[str, Any]) -> CardDecision:
    """A decision as PROTOCOL.md writes it, as Kasir's CardDecision (its reason, when it names one Kasir knows)."""
    result = CardResult(data["result"])
    reason = _reason(data.get("reason"))
    return CardDecision(result, str(data.get("message") or result.value), data.get("redirect_url"), reason=reason)


def _reason(value: Any) -> DeclineReason | None:
    """The decline's reason, when the money mover names one Kasir knows (any other: no reason)."""
    try:
        return DeclineReason(value) if value is not None else None
    except ValueError:
        return None


def _notification(data: Mapping[str, Any] | None) -> Notification | None:
    if not data:
        return None
    return Notification(
        product=data["product"],
        reference=str(data["reference"]),
        event=Event(data["event"]),
        attempt=data.get("attempt"),
        message=data.get("message"),
        tenure=data.get("tenure"),
        issuer=data.get("issuer"),
        amount=data.get("amount"),
        bank_reference=data.get("bank_reference"),
    )


class HttpAcquirer:
    def __init__(self, upstream: Upstream) -> None:
        self.upstream = upstream

    async def charge(self, charge: CardCharge) -> CardDecision:
        card = charge.card
        data = await self.upstream.post(
            "/v1/card/charges",
            {
                "reference": charge.reference,
                "attempt": charge.attempt,
                "amount": charge.amount,
                "currency": charge.currency,
                "channel": charge.channel,
                "acquirer": charge.acquirer_code,
                "tenor": charge.tenor,
                "card": {
                    "number": card.number,
                    "cvn": card.cvn,
                    "exp_month": card.exp_month,
                    "exp_year": card.exp_year,
                    "holder_name": card.holder_name,
                },
                "return_url": charge.return_url,
            },
        )
        return decision_of(data)

    async def complete_challenge(self, reference: str, attempt: int, params: Mapping[str, str]) -> CardDecision:
        payload = {"reference": reference, "attempt": attempt, "params": dict(params)}
        return decision_of(await self.upstream.post("/v1/card/challenges", payload))

    async def status(self, reference: str, attempt: int) -> CardDecision:
        return decision_of(await self.upstream.post("/v1/card/status", {"reference": reference, "attempt": attempt}))

    def page_notice(self) -> str | None:
        return None


class HttpIssuer:
    def __init__(self, upstream: Upstream) -> None:
        self.upstream = upstream

    async def create(self, payment: WalletPayment) -> Checkout:
        data = await self.upstream.post(
            "/v1/wallet/payments",
            {
                "reference": payment.reference,
                "order_id": payment.order_id,
                "channel": payment.channel,
                "amount": payment.amount,
                "currency": payment.currency,
                "description": payment.description,
                "customer": {"name": payment.customer_name, "phone": payment.customer_phone},
                "expires_at": payment.expires_at.isoformat(),
                "return_url": payment.return_url,
            },
        )
        return Checkout(url=str(data["checkout_url"]))

    async def refund(self, reference: str, refund_reference: str, amount: int) -> None:
        payload = {"reference": reference, "refund_reference": refund_reference, "amount": amount}
        await self.upstream.post("/v1/wallet/refunds", payload)

    async def void(self, reference: str) -> None:
        await self.upstream.post("/v1/wallet/voids", {"reference": reference})

    async def status(self, reference: str) -> Notification | None:
        return _notification((await self.upstream.post("/v1/wallet/status", {"reference": reference}))["notification"])


class HttpLender:
    def __init__(self, upstream: Upstream) -> None:
        self.upstream = upstream

    async def checkout(self, application: BnplApplication) -> Checkout:
        data = await self.upstream.post(
            "/v1/bnpl/applications",
            {
                "reference": application.reference,
                "partner_reference_no": application.partner_reference_no,
                "amount": application.amount,
                "currency": application.currency,
                "customer_name": application.customer_name,
                "plans": [dict(plan) for plan in application.plans],
            },
        )
        return Checkout(url=str(data["approval_url"]))

    async def status(self, reference: str) -> Notification | None:
        return _notification((await self.upstream.post("/v1/bnpl/status", {"reference": reference}))["notification"])


class HttpVaIssuer:
    """The bank that opens virtual accounts: it numbers them, and notifies each payment into one."""

    def __init__(self, upstream: Upstream) -> None:
        self.upstream = upstream

    async def create(self, opening: VaOpening) -> str:
        data = await self.upstream.post(
            "/v1/va/accounts",
            {
                "reference": opening.reference,
                "channel": opening.channel,
                "bank": opening.bank,
                "payment_system": opening.payment_system,
                "chosen_digits": opening.chosen_digits,
                "amount": opening.amount,
                "billing_name": opening.billing_name,
                "expires_at": opening.expires_at.isoformat(),
                "draw": opening.draw,
            },
        )
        return str(data["number"])

    async def cancel(self, reference: str) -> None:
        await self.upstream.post("/v1/va/cancellations", {"reference": reference})

    async def status(self, reference: str) -> Notification | None:
        return _notification((await self.upstream.post("/v1/va/status", {"reference": reference}))["notification"])


class HttpPayoutRail:
    """The bank that sends money out (docs/decisions.md §11.9). Kasir asks `transfer` only after it accepted and
    held the transfer; a call that does not answer leaves it `01` and Kasir asks `status` until it is known
    (`unknown`: the rail never received the reference, and Kasir sends it, once). Idempotent by `reference`."""

    def __init__(self, upstream: Upstream) -> None:
        self.upstream = upstream
        # Kasir's worker asks `status` about a transfer left unanswered after twice this, and holds its check as long.
        self.timeout_seconds = upstream.timeout

    async def account_inquiry(self, bank_code: str, account_no: str) -> AccountInfo:
        data = await self.upstream.post("/v1/payout/accounts", {"bank_code": bank_code, "account_no": account_no})
        name = data.get("name")
        return AccountInfo(AccountStatus(data["status"]), None if name is None else str(name))

    async def transfer(self, order: PayoutOrder) -> PayoutAnswer:
        return _payout_answer(
            await self.upstream.post(
                "/v1/payout/transfers",
                {
                    "reference": order.reference,
                    "partner_reference_no": order.partner_reference_no,
                    "amount": order.amount,
                    "currency": order.currency,
                    "bank_code": order.bank_code,
                    "account_no": order.account_no,
                    "account_name": order.account_name,
                    "fee_type": order.fee_type,
                    "remark": order.remark,
                    "accepted_at": order.accepted_at.isoformat(),
                },
            )
        )

    async def status(self, order: PayoutOrder) -> PayoutAnswer:
        return _payout_answer(await self.upstream.post("/v1/payout/status", {"reference": order.reference}))


def _payout_answer(data: Mapping[str, Any]) -> PayoutAnswer:
    rail_reference, reason = data.get("rail_reference"), data.get("reason")
    return PayoutAnswer(
        PayoutState(data["state"]),
        None if rail_reference is None else str(rail_reference),
        None if reason is None else str(reason),
    )


class HttpProcessor:
    name = NAME
    simulates = False

    def __init__(self, base_url: str, secret: str, timeout: float = 5.0) -> None:
        self.secret = secret
        self.timeout_seconds = timeout  # Kasir's worker asks again about an unrecorded call after twice this
        upstream = Upstream(base_url, secret, timeout)
        self.card = HttpAcquirer(upstream)
        self.wallet = HttpIssuer(upstream)
        self.bnpl = HttpLender(upstream)
        self.va = HttpVaIssuer(upstream)
        self.payout = HttpPayoutRail(upstream)

    def router(self) -> None:
        return None

    async def notifications(self, headers: Mapping[str, str], body: bytes) -> Sequence[Notification]:
        verify(self.secret, headers, "POST", NOTIFY_PATH, body)
        try:
            items = json.loads(body)["notifications"]
            found = [_notification(item) for item in items]
        except (ValueError, KeyError, TypeError) as exc:
            raise BadRequest("The notification is not the protocol's JSON", field="body") from exc
        return [item for item in found if item is not None]


def create(settings: Settings) -> HttpProcessor:
    """The entry point: configured from the environment (the connector's own settings)."""
    base_url = os.environ.get("KASIR_PROCESSOR_HTTP_URL", "")
    secret = os.environ.get("KASIR_PROCESSOR_HTTP_SECRET", "")
    if not base_url or not secret:
        raise ValueError("the http processor needs KASIR_PROCESSOR_HTTP_URL and KASIR_PROCESSOR_HTTP_SECRET")
    timeout = float(os.environ.get("KASIR_PROCESSOR_HTTP_TIMEOUT_SECONDS", "5"))
    return HttpProcessor(base_url, secret, timeout)
