from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field
from pydantic.json_schema import SkipJsonSchema

from kasir.callbacks.repository import CallbackAttemptRow, CallbackRow
from kasir.callbacks.service import Deliveries, Recovery
from kasir.kit.fields import Moment
from kasir.va.schemas import VaAnswerAddress, VaAnswerCustomer, VaAnswerItem


class CallbackAttemptView(BaseModel):
    number: int = Field(description="X-Kasir-Attempt: counted across the event, its replays included")
    worker: str
    started_at: datetime
    latency_ms: int
    http_status: int | None
    error: str | None
    response_excerpt: str | None
    accepted: bool

    @classmethod
    def of(cls, attempt: CallbackAttemptRow) -> CallbackAttemptView:
        return cls(
            number=attempt.number,
            worker=attempt.worker,
            started_at=attempt.started_at,
            latency_ms=attempt.latency_ms,
            http_status=attempt.http_status,
            error=attempt.error,
            response_excerpt=attempt.response_excerpt,
            accepted=attempt.accepted,
        )


class CallbackView(BaseModel):
    id: int = Field(description="This delivery's id: the event's first one, or a replay of it")
    event_id: int = Field(description="The event's id, X-Kasir-Callback-Id of every delivery of it")
    merchant_id: str
    kind: str
    transaction_ref: str
    event: str
    url: str
    status: str
    attempts_made: int
    max_attempts: int
    next_attempt_at: datetime
    created_at: datetime
    delivered_at: datetime | None
    last_error: str | None
    replay_of: int | None
    payload: Any = None
    attempts: list[CallbackAttemptView] | None = None
    deliveries: list[CallbackView] | None = Field(
        None, description="Every delivery of the event (its first, then each replay) with its attempts"
    )

    @classmethod
    def of(
        cls,
        callback: CallbackRow,
        attempts: list[CallbackAttemptRow] | None = None,
        *,
        with_payload: bool = False,
        event: Deliveries | None = None,
    ) -> CallbackView:
        return cls(
            id=callback.id,
            event_id=callback.event_key,
            merchant_id=callback.merchant_id,
            kind=callback.kind,
            transaction_ref=callback.transaction_ref,
            event=callback.event,
            url=callback.url,
            status=callback.status,
            attempts_made=callback.attempts_made,
            max_attempts=callback.max_attempts,
            next_attempt_at=callback.next_attempt_at,
            created_at=callback.created_at,
            delivered_at=callback.delivered_at,
            last_error=callback.last_error,
            replay_of=callback.replay_of,
            payload=json.loads(callback.payload) if with_payload else None,
            attempts=[CallbackAttemptView.of(a) for a in attempts] if attempts is not None else None,
            deliveries=None if event is None else [cls.of(d, tried) for d, tried in event.deliveries],
        )


class CallbackList(BaseModel):
    callbacks: list[CallbackView]


class RecoverRequest(BaseModel):
    merchant_id: str
    since: Moment = Field(description="ISO 8601 with offset: events recorded since then")
    url: str | None = Field(
        None,
        max_length=2048,
        description="Deliver them all here (the rules of callback URLs apply); by default, to the URL as it is now: "
        "the merchant's default callback URL for wallet and payment-page events where one is set, else the event's",
    )
    dry_run: bool = Field(False, description="Review: answer how many and where, send nothing")


class RecoverTarget(BaseModel):
    url: str
    events: int


class RecoverAnswer(BaseModel):
    merchant_id: str
    since: datetime
    dry_run: bool
    events: int = Field(description="Given-up events (no delivery delivered, none in flight) recorded since then")
    targets: list[RecoverTarget]
    event_ids: list[int]
    replays: list[int] = Field(description="Ids of the new deliveries (none for a dry run)")

    @classmethod
    def of(cls, recovery: Recovery, *, dry_run: bool) -> RecoverAnswer:
        return cls(
            merchant_id=recovery.merchant_id,
            since=recovery.since,
            dry_run=dry_run,
            events=len(recovery.events),
            targets=[RecoverTarget(url=url, events=count) for url, count in recovery.targets()],
            event_ids=[event.id for event, _ in recovery.events],
            replays=[replay.id for replay in recovery.replays],
        )


# --- the callbacks' payloads, as the OpenAPI document's `webhooks` (kasir.openapi) ---------------------------
# Built by the rooms (wallet.service.callback_payload, va.service.callback_payload, card.callbacks.callback_payload,
# bnpl.service.notification_payload); documented here as the merchant receives them. A string with no value
# is "", never null; a field marked optional is absent from some callbacks.


class WalletNotificationPaymentDetails(BaseModel):
    amount: int
    total_amount: int
    transaction_description: str
    transaction_time: str
    expired_time: str
    paid_time: str = Field(description='"" until paid')


class WalletNotificationCustomer(BaseModel):
    phone: str
    email: str
    full_name: str


class WalletNotificationItem(BaseModel):
    item_id: str
    name: str
    amount: int
    qty: int
    description: str = Field(description='"" when the item had none')


class WalletNotificationAddress(BaseModel):
    full_name: str
    phone: str
    address: str
    city: str
    postal_code: str
    country: str


class WalletNotificationWallet(BaseModel):
    id: str
    id_type: str = Field(json_schema_extra={"enum": ["HP", "EMAIL"]})


class WalletNotificationHistory(BaseModel):
    refund_time: str | SkipJsonSchema[None] = None
    refund_amount: int | SkipJsonSchema[None] = None
    void_time: str | SkipJsonSchema[None] = None
    void_amount: int | SkipJsonSchema[None] = None


class WalletNotification(BaseModel):
    """The wallet callback: sent on PAID, EXPIRED, failed (OVO), REFUNDED and VOID."""

    transaction_id: str
    external_id: str
    order_id: str
    merchant_id: str
    reference_id: str
    currency: str
    payment_method: str
    payment_channel: str
    payment_system: str
    transaction_status: str = Field(json_schema_extra={"enum": ["PAID", "EXPIRED", "failed", "REFUNDED", "VOID"]})
    payment_details: WalletNotificationPaymentDetails
    customer_details: WalletNotificationCustomer
    item_details: list[WalletNotificationItem]
    billing_address: WalletNotificationAddress
    shipping_address: WalletNotificationAddress
    response_code: str = Field(description="`00`, or `03` for a failed payment")
    response_message: str
    additional_data: str = Field(description='"" when the payment had none')
    wallet_details: WalletNotificationWallet
    terminal_id: str
    payer_name: str = Field(description='"" until paid')
    issuer: str | SkipJsonSchema[None] = Field(None, description="PAID only: who paid")
    acquirer_issuer_relation: str | SkipJsonSchema[None] = Field(
        None, description="PAID QRIS only", json_schema_extra={"enum": ["on_us", "off_us"]}
    )
    retrieval_reference_no: str | SkipJsonSchema[None] = Field(None, description="PAID QRIS only")
    payer_number: str | SkipJsonSchema[None] = Field(None, description='QRIS only; "" until paid')
    refund_history: list[WalletNotificationHistory] | SkipJsonSchema[None] = Field(None, description="REFUNDED only")
    void_history: list[WalletNotificationHistory] | SkipJsonSchema[None] = Field(None, description="VOID only")


class PaymentPageChannel(BaseModel):
    channel: str
    acq: str


class PaymentPageItem(BaseModel):
    item_id: str
    name: str
    amount: int
    qty: int
    description: str | SkipJsonSchema[None] = Field(None, description='Payment links: "" when not sent')


class PaymentPageCustomer(BaseModel):
    full_name: str
    email: str
    phone: str
    address: str
    is_email_show: bool
    is_phone_show: bool


class PaymentPageAddress(BaseModel):
    full_name: str
    phone: str
    address: str
    city: str
    postal_code: str
    country: str


class PaymentPageNotification(BaseModel):
    """The payment-page callback, sent on SUCCESS, FAILED and EXPIRED: of a card order, and of a payment link,
    whose money may come by card, wallet, QRIS or virtual account (docs/decisions.md §10.5)."""

    transaction_id: str
    order_id: str
    external_id: str
    currency: str
    transaction_status: str = Field(json_schema_extra={"enum": ["SUCCESS", "FAILED", "EXPIRED"]})
    response_message: str
    payment_method: str = Field(
        description='CARD; a payment link paid another way WALLET or VIRTUAL_ACCOUNT; "" for a link that expired '
        "never attempted",
        json_schema_extra={"enum": ["CARD", "WALLET", "VIRTUAL_ACCOUNT", ""]},
    )
    payment_channel: str = Field(
        description="CARD; a link's wallet or QRIS its code (DANA, QRIS, ...), a link's VA \"VA\"", examples=["CARD"]
    )
    acq: str = Field(
        description="The acquirer (BCA, CIMB, BRI); a link's wallet or QRIS its code, a link's VA its bank as the "
        'link names it (CIMB, BCA-MCP); "" for an order never attempted'
    )
    paid_date: str = Field(description='UTC ISO 8601; "" until paid')
    amount: int
    selected_channels: list[PaymentPageChannel]
    is_customer_paying_fee: bool
    item_details: list[PaymentPageItem]
    save_card: bool
    card_token: str = Field(description='"" when no card was saved')
    customer_details: PaymentPageCustomer
    shipping_address: PaymentPageAddress
    billing_address: PaymentPageAddress
    callback_url: str
    success_redirect_url: str
    failed_redirect_url: str
    expired_time: str
    token: str | SkipJsonSchema[None] = Field(None, description="Payment links: the same as card_token")
    fee: int | SkipJsonSchema[None] = Field(None, description="Payment links: 0 (Kasir charges no fee)")
    mis_version: int | SkipJsonSchema[None] = Field(None, description="Payment links: 3", examples=[3])
    sub_merchant_id: str | SkipJsonSchema[None] = Field(
        None,
        description="Only when the order or link has a sub-merchant (it then signs the callback: lowercase hex "
        "sha256(transaction_id + x_req_signature + sub_merchant_id))",
    )


class BnplNotificationAmount(BaseModel):
    value: str
    currency: str


class BnplNotificationInfo(BaseModel):
    paymentChannel: str  # noqa: N815 (wire names)
    installment: dict[str, Any] | SkipJsonSchema[None] = Field(
        None, description="The chosen installment option, as in the payment calculation's `payments`"
    )


class BnplNotification(BaseModel):
    """The BNPL notification: sent on 00 Success, 05 Canceled and 06 Failed."""

    originalPartnerReferenceNo: str  # noqa: N815
    originalReferenceNo: str  # noqa: N815
    latestTransactionStatus: str = Field(json_schema_extra={"enum": ["00", "05", "06"]})  # noqa: N815
    transactionStatusDesc: str  # noqa: N815
    amount: BnplNotificationAmount
    tenure: int
    paidTime: str | SkipJsonSchema[None] = Field(None, description="Once paid")  # noqa: N815
    additionalInfo: BnplNotificationInfo  # noqa: N815


class VaNotificationPaymentDetails(BaseModel):
    billing_name: str
    va_number: str = Field(description="The full number paid into")
    payment_system: str = Field(json_schema_extra={"enum": ["CLOSED", "OPEN", "PARTIAL"]})
    is_multi_use: bool
    amount: int = Field(description="The virtual account's amount")
    total_amount: int = Field(description="This payment's amount; 0 on EXPIRED and CANCELLED")
    total_paid_amount: int = Field(description="The sum of the virtual account's payments")
    remaining_amount: int = Field(description="PARTIAL: what remains to pay; other payment systems 0")
    transaction_description: str
    expired_time: str
    paid_time: str = Field(description='This payment\'s; "" on EXPIRED and CANCELLED')


class VaNotification(BaseModel):
    """The virtual-account callback: one per payment (PAID, PARTIALLY_PAID), one on EXPIRED and on CANCELLED."""

    transaction_id: str
    external_id: str
    order_id: str
    merchant_id: str
    reference_id: str = Field(
        description="The payment's (key a multi-use VA's payments by it); \"\" on EXPIRED and CANCELLED"
    )
    currency: str
    payment_method: str = Field(examples=["BANK_TRANSFER"])
    payment_channel: str = Field(examples=["BCA"])
    payment_system: str = Field(json_schema_extra={"enum": ["CLOSED", "OPEN", "PARTIAL"]})
    transaction_status: str = Field(json_schema_extra={"enum": ["PAID", "PARTIALLY_PAID", "EXPIRED", "CANCELLED"]})
    transaction_time: str
    payment_details: VaNotificationPaymentDetails
    customer_details: VaAnswerCustomer
    item_details: list[VaAnswerItem]
    billing_address: VaAnswerAddress
    shipping_address: VaAnswerAddress
    response_code: str = Field(examples=["00"])
    response_message: str = Field(examples=["Success"])
    additional_data: str = Field(description='"" when the VA had none')
    sub_merchant_id: str | SkipJsonSchema[None] = Field(
        None, description="Only when the VA was created with a sub-merchant-id (it then signs the callback)"
    )


class PaymentPageAnswer(BaseModel):
    """What the merchant answers a payment-page callback: 200, application/json, a string `message`."""

    message: str = Field(examples=["OK"])


class TransferNotificationInfo(BaseModel):
    reason: str | SkipJsonSchema[None] = Field(None, description="Why, on 06 Failed and 04 Refunded")


class TransferNotification(BaseModel):
    """A transfer's notification (docs/decisions.md §11.8): sent on 00 Success, 06 Failed and 04 Refunded to the
    transfer's additionalInfo.callbackUrl."""

    originalPartnerReferenceNo: str  # noqa: N815 (wire names)
    originalReferenceNo: str = Field(description="Kasir's referenceNo (DSB and 20 letters and digits)")  # noqa: N815
    originalExternalId: str = Field(description="The accepting request's X-EXTERNAL-ID")  # noqa: N815
    serviceCode: str = Field(json_schema_extra={"enum": ["18"]})  # noqa: N815
    latestTransactionStatus: str = Field(json_schema_extra={"enum": ["00", "06", "04"]})  # noqa: N815
    transactionStatusDesc: str = Field(json_schema_extra={"enum": ["Success", "Failed", "Refunded"]})  # noqa: N815
    amount: BnplNotificationAmount
    beneficiaryAccountNo: str  # noqa: N815
    beneficiaryAccountName: str  # noqa: N815
    beneficiaryBankCode: str  # noqa: N815
    sourceAccountNo: str = Field(description="The merchant's disbursement account (account_no)")  # noqa: N815
    transactionDate: str = Field(description="The transfer's transactionDate, else its acceptance")  # noqa: N815
    finishedTime: str = Field(description="When it moved into this state: ISO 8601, +07:00")  # noqa: N815
    additionalInfo: TransferNotificationInfo  # noqa: N815


def webhook_payloads() -> list[type[BaseModel]]:
    """The models of the OpenAPI document's `webhooks` (kasir.openapi)."""
    return [
        WalletNotification,
        VaNotification,
        PaymentPageNotification,
        BnplNotification,
        TransferNotification,
        PaymentPageAnswer,
    ]
