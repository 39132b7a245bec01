"""The card service: the charge's rules (interface.md endpoint 6), and `card_service`, the one
object the card routes, the simulator, the processors' action and the expiry job call.

The card room besides this module:

    attempts.py     what an attempt's decision does to its order (3-D Secure, failures, expiry);
                    the service finds, locks and refuses, then hands it the rows
    processing.py   the card offer to the processors, and CardChargeAction: the acquirer's call
    callbacks.py    the payment-page callback: its payload and its record in the outbox
    page_links.py   the pages' URLs, their forms' tokens, the redirect to returnUrl
    ewallet.py      a charge for an ewallet channel translated onto the wallet room, and back
    dialect.py      the provider SDK's snake_case dialect, translated onto the charge

The card room's errors: rendered in the card format (`statusCode`, `statusMessage`,
`errors[]`), those of dialect.py in the wallet format (`response_code`):

    KasirError
    ├── BadRequest
    │   ├── CardValidationError (schemas.py)     400 VALIDATION_ERROR, every violated field
    │   ├── (the wallet room's refusals of an ewallet charge, fields renamed to camelCase: ewallet.py)
    │   ├── DialectValidationError (dialect.py)  01  every violated field, `field reason; ...`
    │   └── UnknownStoredCard (dialect.py)       01  card_details.token not this merchant's
    ├── FeatureNotAllowed
    │   └── UnknownSubMerchant (dialect.py)      04  sub-merchant-id not one of the merchant's
    ├── NotFound
    │   └── CardOrderNotFound                    404 NOT_FOUND
    ├── Conflict
    │   ├── DuplicateOrder                       409 DUPLICATE_ORDER (DuplicateReference)
    │   ├── DialectDuplicate (dialect.py)        03  external_id / order_id already used
    │   ├── CardOrderClosed (states.py)          409 CONFLICT
    │   └── AttemptAlreadySubmitted              409 CONFLICT (a page form sent twice)
    └── UnprocessableEntity
        └── InvalidCard                          422 INVALID_CARD, every rejected card field

X-Idempotency-Key is the idempotency room's (kasir.idempotency), as on every money-moving route.

An attempt's outcome is decided by the configured card acquirer (kasir.processors): approved,
declined, no answer, or a challenge (3-D Secure) whose completion comes back through
`finish_challenge`. The acquirer is never asked inside a unit of work (kasir.processors.calls
explains the three steps): the charge, or the page's attempt, holds the attempt SUBMITTED in the
request's unit; once that unit has committed the acquirer is asked with no unit open, bounded by
its own timeout; its decision is recorded in a unit of its own (`record_attempt`), or, when no
decision was made, the attempt is taken back (`undo_attempt`). Each failed attempt records a
payment-page callback FAILED, success records SUCCESS, and the third failure or the order's
expiry records the final EXPIRED, each in the unit of work of the change (kasir.callbacks sends
it after commit, signed per docs/decisions.md §3.5).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from kasir.auth.basic import BasicCaller
from kasir.callbacks.ssrf import check_callback_url
from kasir.card.attempts import end_challenge, expire_order, hold_attempt, record_decision, refuse_unless_open
from kasir.card.cards import InvalidCardData, ParsedCard, parse_card
from kasir.card.ewallet import in_card_fields, wallet_request
from kasir.card.page_links import page_url
from kasir.card.repository import CardAttemptRow, CardOrderRow, card_repository
from kasir.card.schemas import TENORS, ChargeRequest, parse_charge_request
from kasir.card.states import PAYMENT_STATUS, CardAttemptStatus, CardOrderStatus
from kasir.config import get_settings
from kasir.db import Session
from kasir.errors import Conflict, DuplicateReference, InvalidFieldFormat, KasirError, NotFound, UnprocessableEntity
from kasir.kit.clock import clock, parse_aware
from kasir.kit.ids import new_sortable_id
from kasir.kit.logs import annotate_request
from kasir.merchants.repository import MerchantRow
from kasir.payments import metrics as payment_metrics
from kasir.processors.calls import PendingCall
from kasir.processors.protocols import CardDecision, CardResult
from kasir.processors.registry import ProductUnavailable, require
from kasir.processors.repository import processor_call_repository
from kasir.wallet.service import DuplicateExternalId, payment_url, wallet_service

CURRENCY = "IDR"
VALIDITY = timedelta(hours=24)  # docs/decisions.md §7: expiredTime defaults to 24 h


# --- errors ----------------------------------------------------------------------------


class InvalidCard(UnprocessableEntity):
    card_status = "INVALID_CARD"
    default_message = "Card data rejected"


class DuplicateOrder(DuplicateReference):
    def __init__(self, field: str) -> None:
        super().__init__(f"{field} is already used; use a new unused {field}", field=field)


class CardOrderNotFound(NotFound):
    pass


class AttemptAlreadySubmitted(Conflict):
    default_message = "This payment attempt was already submitted"


# --- the charge's answer ---------------------------------------------------------------


def payment_status(order: CardOrderRow) -> str:
    return PAYMENT_STATUS[CardOrderStatus(order.status)]


@dataclass(frozen=True, slots=True)
class LinkCardOrder:
    """What a payment link's card order is made of (kasir.links builds it; this room never imports that one)."""

    link_id: str
    reference: str  # the order's external_id and order_id: Kasir's own, never the merchant's
    shown_order_id: str  # the link's order_id, the merchant's: what the customer reads on the card page
    offers_save_card: bool  # the link's save_card (docs/decisions.md §10.1): the page offers "save this card"
    channel: str  # a card channel (CARD, BCACC, ...)
    amount: int
    details: dict[str, Any]  # as a charge's stored details (camelCase): paymentDetails, itemDetails, customerDetails
    return_url: str  # the link's page: it sends the customer on
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class ChargeOutcome:
    """What the charge answers: a card order, or a wallet transaction (`paymentMethod` ewallet)."""

    transaction_id: str
    external_id: str
    payment_status: str
    link: str

    @classmethod
    def of(cls, order: CardOrderRow, challenge_url: str | None = None) -> ChargeOutcome:
        """`link`: the challenge's page while the card is behind 3-D Secure, else the payment page."""
        link = page_url(order.id)
        if order.status == CardOrderStatus.AUTHENTICATING.value and challenge_url:
            link = challenge_url
        return cls(order.id, order.external_id, payment_status(order), link)


def charge_body(outcome: ChargeOutcome) -> dict[str, Any]:
    """HTTP 200 of the charge (docs/decisions.md §4)."""
    return {
        "statusCode": "00",
        "statusMessage": "SUCCESS",
        "data": {
            "transactionId": outcome.transaction_id,
            "externalId": outcome.external_id,
            "paymentStatus": outcome.payment_status,
            "link": outcome.link,
        },
    }


def _pending(order_id: str, request: ChargeRequest) -> ChargeOutcome:
    """The answer to a charge whose customer still has to act at the payment page (OPEN mode)."""
    return ChargeOutcome(order_id, request.external_id, PAYMENT_STATUS[CardOrderStatus.PENDING], page_url(order_id))


# --- the card's fields, its instalments ------------------------------------------------


def installment(amount: int, tenor: str) -> int:
    """Installment per month at 0 % interest, rounded up to whole rupiah (the last month pays less)."""
    months = int(tenor)
    return amount if months == 0 else -(-amount // months)


def card_from_fields(fields: dict[str, Any], *, now: datetime, prefix: str = "cardDetails.") -> ParsedCard:
    """Parse card fields (wire names) or raise InvalidCard naming each rejected one."""
    try:
        return parse_card(
            number=str(fields.get("cardNumber") or ""),
            exp_month=str(fields.get("cardExpiredMonth") or ""),
            exp_year=str(fields.get("cardExpiredYear") or ""),
            cvn=str(fields.get("cardCvn") or ""),
            holder_name=str(fields.get("cardHolderName") or ""),
            now=now,
            prefix=prefix,
        )
    except InvalidCardData as exc:
        raise InvalidCard(errors=exc.errors) from None


class CardService:
    # --- the charge API (interface.md endpoint 6) ---------------------------------------

    def parse(self, body: bytes) -> tuple[ChargeRequest, ParsedCard | None]:
        """400 for the request's fields; else 422 for any rule of the card's (issue 26)."""
        now = clock.now()
        try:
            request = parse_charge_request(body, now)
        except InvalidCardData as exc:
            raise InvalidCard(errors=exc.errors) from None
        card = None
        if request.payment_method == "card" and request.payment_mode == "CLOSE":
            assert request.card_details is not None
            card = card_from_fields(request.card_details.model_dump(by_alias=True), now=clock.local_now())
        return request, card

    def require_processor(self, request: ChargeRequest) -> None:
        """A channel whose product has no processor is not available (400 VALIDATION_ERROR, paymentChannel)."""
        if request.payment_method == "ewallet":
            try:
                require("wallet", request.payment_channel)
            except ProductUnavailable:
                raise ProductUnavailable("card") from None
        else:
            require("card", request.payment_channel)

    async def check_callback_url(self, caller: BasicCaller, request: ChargeRequest) -> None:
        """callbackUrl's check, before any unit of work: in production it resolves the host (DNS), and
        nothing slow may run inside a unit of work (kasir.db.sqlite)."""
        if request.payment_method == "ewallet":
            await wallet_service.check_callback_url(caller.merchant, request.callback_url, field="callbackUrl")
        elif request.callback_url:
            await check_callback_url(request.callback_url, production=get_settings().is_production, field="callbackUrl")

    def new_order(
        self,
        caller: BasicCaller,
        request: ChargeRequest,
        *,
        dialect: str | None = None,
        sub_merchant_id: str | None = None,
        dialect_details: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The row of a card order for `request` (paymentMethod card), not yet written.

        `dialect`, `sub_merchant_id` and `dialect_details` (what only the dialect's request said, kept in the
        order's details under "dialect"): of a charge in the provider SDK's dialect (kasir.card.dialect).
        """
        merchant = caller.merchant
        now = clock.now()
        expires_at = parse_aware(request.payment_details.expired_time) if request.payment_details.expired_time else None
        details = request.stored_details()
        if dialect_details:
            details = json.dumps({**json.loads(details), "dialect": dialect_details}, ensure_ascii=False)
        return {
            "id": new_sortable_id("CARD", 20),
            "merchant_id": merchant.id,
            "external_id": request.external_id,
            "order_id": request.order_id,
            "currency": CURRENCY,
            "amount": request.payment_details.amount,
            "payment_method": request.payment_method,
            "payment_channel": request.payment_channel,
            "payment_mode": request.payment_mode,
            "status": CardOrderStatus.PENDING.value,
            "tenor": request.payment_options.tenor if request.payment_options else None,
            "attempts_made": 0,
            "attempts_failed": 0,
            "details": details,
            "return_url": request.return_url,
            "callback_url": request.callback_url or merchant.callback_url,
            "acq": None,
            "response_message": None,
            "save_card": False,
            "card_token": None,
            "created_at": now,
            "expires_at": (expires_at or now + VALIDITY).astimezone(UTC),
            "updated_at": now,
            "paid_at": None,
            "dialect": dialect,
            "sub_merchant_id": sub_merchant_id,
            "link_id": None,
        }

    async def charge(
        self,
        session: Session,
        caller: BasicCaller,
        request: ChargeRequest,
        card: ParsedCard | None,
        *,
        save_card: bool = False,
        dialect: str | None = None,
        sub_merchant_id: str | None = None,
        dialect_details: dict[str, Any] | None = None,
    ) -> ChargeOutcome | PendingCall:
        """The charge of a request that passed `parse` and `check_callback_url`: its answer, or (a CLOSE
        charge) its attempt held for the acquirer, answered once asked (kasir.processors.calls).

        `save_card`: store the card on success (a token, `StoredCard`); `dialect`, `sub_merchant_id`:
        of a charge in the provider SDK's dialect (kasir.card.dialect).
        """
        merchant = caller.merchant
        if request.payment_method == "ewallet":
            await self._refuse_duplicate(session, merchant.id, request)
            return await self._charge_wallet(session, caller, request)
        values = self.new_order(
            caller, request, dialect=dialect, sub_merchant_id=sub_merchant_id, dialect_details=dialect_details
        )
        if not await card_repository.add_order(session, values):
            await self._refuse_duplicate(session, merchant.id, request)
            raise DuplicateOrder("orderId")
        payment_metrics.created(session, "card", CardOrderStatus(values["status"]).name)
        order_id = values["id"]
        annotate_request(transaction_id=order_id, merchant_id=merchant.id)
        if card is None:
            return _pending(order_id, request)
        order = await self.get(session, order_id)
        return await hold_attempt(session, order, card, request.tenor, save_card=save_card, new_order=True)

    async def open_for_link(self, session: Session, merchant: MerchantRow, link: LinkCardOrder) -> CardOrderRow:
        """A payment link's card order (docs/decisions.md §10.3): OPEN, full payment, on the link's channel,
        sending no callback of its own (no callback_url: the link is told, kasir.payments.owners)."""
        now = clock.now()
        order_id = new_sortable_id("CARD", 20)
        values: dict[str, Any] = {
            "id": order_id,
            "merchant_id": merchant.id,
            # Kasir's own references, never the merchant's: they take no place in its namespace.
            "external_id": link.reference,
            "order_id": link.reference,
            "currency": CURRENCY,
            "amount": link.amount,
            "payment_method": "card",
            "payment_channel": link.channel,
            "payment_mode": "OPEN",
            "status": CardOrderStatus.PENDING.value,
            "tenor": "0",
            "attempts_made": 0,
            "attempts_failed": 0,
            "details": json.dumps(
                {**link.details, "shownOrderId": link.shown_order_id, "offersSaveCard": link.offers_save_card},
                ensure_ascii=False,
            ),
            "return_url": link.return_url,
            "callback_url": None,
            "acq": None,
            "response_message": None,
            "save_card": False,
            "card_token": None,
            "created_at": now,
            "expires_at": link.expires_at.astimezone(UTC),
            "updated_at": now,
            "paid_at": None,
            "dialect": None,
            "sub_merchant_id": None,
            "link_id": link.link_id,
        }
        if not await card_repository.add_order(session, values):
            raise DuplicateOrder("orderId")
        payment_metrics.created(session, "card", CardOrderStatus.PENDING.name)
        return await self.get(session, order_id)

    async def _refuse_duplicate(self, session: Session, merchant_id: str, request: ChargeRequest) -> None:
        """orderId and externalId are unique per merchant across card orders and wallet transactions."""
        used = await card_repository.used_reference(session, merchant_id, request.order_id, request.external_id)
        if used is not None:
            raise DuplicateOrder("orderId" if used[0] == request.order_id else "externalId")

    async def _charge_wallet(self, session: Session, caller: BasicCaller, request: ChargeRequest) -> ChargeOutcome:
        """docs/decisions.md §7: `paymentMethod` ewallet creates a wallet transaction (wallet callbacks follow)."""
        try:
            tx = await wallet_service.create_payment(session, caller.merchant, wallet_request(request), qr=False)
        except DuplicateExternalId:
            raise DuplicateOrder("externalId") from None
        except KasirError as error:
            in_card_fields(error)
            raise
        annotate_request(transaction_id=tx.id, merchant_id=caller.merchant.id)
        return ChargeOutcome(tx.id, tx.external_id, "PENDING", payment_url(tx))

    # --- an order's attempts: found, locked and refused here; applied in card/attempts.py ---

    async def get(self, session: Session, order_id: str, *, lock: bool = False) -> CardOrderRow:
        order = await card_repository.get(session, order_id, lock=lock)
        if order is None or order.payment_method != "card":
            raise CardOrderNotFound("Payment not found")
        return order

    def is_due(self, order: CardOrderRow) -> bool:
        """Open but past expiredTime: as good as expired (the expiry job records it within a second)."""
        open_statuses = (CardOrderStatus.PENDING.value, CardOrderStatus.AUTHENTICATING.value)
        return order.status in open_statuses and order.expires_at <= clock.now()

    async def pay_on_page(
        self, session: Session, order_id: str, attempt_number: int, card: ParsedCard, tenor: str, save_card: bool
    ) -> PendingCall:
        """An attempt with the card entered on the page: held, to be asked of the acquirer (kasir.processors.calls)."""
        order = await self.get(session, order_id, lock=True)
        if attempt_number != order.attempts_made + 1:
            raise AttemptAlreadySubmitted()
        if tenor not in TENORS:
            raise InvalidFieldFormat("tenor", "must be one of 0, 3, 6, 12")
        if order.link_id is not None and tenor != "0":
            raise InvalidFieldFormat("tenor", "must be 0: a payment link is paid in full")
        return await hold_attempt(session, order, card, tenor, save_card=save_card, new_order=False)

    async def record_attempt(
        self, session: Session, order_id: str, number: int, decision: CardDecision | None
    ) -> tuple[CardOrderRow, CardAttemptRow, CardDecision | None]:
        """The acquirer's decision on a SUBMITTED attempt (None: recorded already, read it back)."""
        order = await self.get(session, order_id, lock=True)
        attempt = await card_repository.attempt(session, order.id, number)
        if attempt is None:
            raise CardOrderNotFound("Payment not found")
        if decision is None or attempt.status != CardAttemptStatus.SUBMITTED.value:
            return order, attempt, decision
        await record_decision(session, order, attempt, decision)
        return order, attempt, decision

    async def undo_attempt(self, session: Session, order_id: str, number: int, *, new_order: bool) -> None:
        """The acquirer could not be asked (no decision was made): the attempt, and the order it came
        with (a CLOSE charge), are taken back, as if the request had never come."""
        order = await self.get(session, order_id, lock=True)
        await card_repository.remove_attempt(session, order.id, number)
        if new_order:
            await card_repository.remove_order(session, order)
        else:
            order.attempts_made -= 1
            await card_repository.save(session, order)

    # --- 3-D Secure ------------------------------------------------------------------------

    async def challenge(self, session: Session, order_id: str) -> tuple[CardOrderRow, CardAttemptRow | None]:
        """The order and its attempt waiting behind a challenge (None when none waits)."""
        order = await self.get(session, order_id)
        if order.status != CardOrderStatus.AUTHENTICATING.value:
            return order, None
        attempt = await card_repository.attempt(session, order.id, order.attempts_made)
        if attempt is None or attempt.status != CardAttemptStatus.CHALLENGE.value:
            return order, None
        return order, attempt

    async def finish_challenge(
        self, session: Session, order_id: str, attempt_number: int, decision: CardDecision
    ) -> CardOrderRow:
        """The acquirer's result of a challenge (APPROVED or not): SUCCESS, or a failed attempt."""
        order = await self.get(session, order_id, lock=True)
        now = clock.now()
        if order.status == CardOrderStatus.AUTHENTICATING.value and attempt_number != order.attempts_made:
            raise AttemptAlreadySubmitted()
        refuse_unless_open(order, now, CardOrderStatus.AUTHENTICATING)
        attempt = await card_repository.attempt(session, order.id, attempt_number)
        if attempt is None or attempt.status != CardAttemptStatus.CHALLENGE.value:
            raise AttemptAlreadySubmitted()
        if decision.result is CardResult.CHALLENGE:
            return order  # not finished: the customer is still at the challenge
        await end_challenge(session, order, attempt, decision, now)
        return order

    # --- expiry ----------------------------------------------------------------------------

    async def expire(self, session: Session, order_id: str) -> bool:
        """The expiry job's close of one order (kasir.card.jobs); False when it is not due (any more)."""
        order = await self.get(session, order_id, lock=True)
        now = clock.now()
        if order.status not in (CardOrderStatus.PENDING.value, CardOrderStatus.AUTHENTICATING.value):
            return False
        if order.expires_at > now:
            return False
        if await processor_call_repository.in_flight(session, "card", order.id):
            return False  # the acquirer is deciding an attempt: expired once that is recorded
        await expire_order(session, order, now)
        return True


card_service = CardService()
