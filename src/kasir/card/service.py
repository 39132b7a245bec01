"""Card charge rules: the charge, attempts, 3-D Secure, expiry, payment-page callbacks.

    KasirError
    ├── BadRequest
    │   ├── CardValidationError (schemas.py)  400 VALIDATION_ERROR, every violated field
    │   └── (the wallet room's refusals of an ewallet charge, fields renamed to camelCase)
    ├── NotFound
    │   └── CardOrderNotFound                 404 NOT_FOUND
    ├── Conflict
    │   ├── DuplicateOrder                    409 DUPLICATE_ORDER (DuplicateReference)
    │   ├── CardOrderClosed (states.py)       409 CONFLICT
    │   └── AttemptAlreadySubmitted           409 CONFLICT (a page form sent twice)
    └── UnprocessableEntity
        └── InvalidCard                       422 INVALID_CARD, every rejected card field

X-Idempotency-Key is the idempotency room's (kasir.idempotency), as on every money-moving route.

An attempt's outcome is decided by the configured card acquirer (kasir.processors): approved,
declined, no answer, or a challenge (3-D Secure) whose completion comes back through
`finish_challenge`. Each failed attempt records a payment-page callback FAILED, success
records SUCCESS, and the third failure or the order's expiry records the final EXPIRED, each
in the unit of work of the change (callbacks/service.py sends it after commit, signed per
docs/decisions.md §3.5). The acquirer is asked inside the charge's unit of work, so that its answer
and the record of it are one; its call is bounded by its own timeout (kasir.processors.protocols).
"""

from __future__ import annotations

import hmac
import json
import logging
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError
from pydantic.alias_generators import to_camel

from kasir.auth.basic import BasicCaller
from kasir.callbacks.models import CallbackKind
from kasir.callbacks.service import SignedIds, callback_outbox
from kasir.callbacks.ssrf import check_callback_url
from kasir.card.cards import InvalidCardData, ParsedCard, acquirer_for, card_channels, parse_card
from kasir.card.dialect import DIALECT_ANSWER, DIRECT_3DS_REFUSED, dialect_body, refuses_challenge
from kasir.card.repository import CardAttemptRow, CardOrderRow, card_repository
from kasir.card.schemas import TENORS, CardValidationError, ChargeRequest, parse_charge_request
from kasir.card.states import (
    MAX_FAILED_ATTEMPTS,
    PAYMENT_STATUS,
    CardAttemptStatus,
    CardOrderClosed,
    CardOrderStatus,
    transition,
)
from kasir.config import get_settings
from kasir.db import Session
from kasir.errors import (
    Conflict,
    DuplicateReference,
    FieldError,
    InvalidFieldFormat,
    KasirError,
    NotFound,
    UnprocessableEntity,
    from_pydantic_errors,
)
from kasir.kit.clock import JAKARTA, clock, isoformat_seconds, parse_aware
from kasir.kit.crypto import constant_time_equals, derive_key
from kasir.kit.ids import new_id, new_sortable_id
from kasir.kit.logs import annotate_request
from kasir.payments import metrics as payment_metrics
from kasir.processors.calls import Call, PendingCall, recorded_card
from kasir.processors.protocols import CardCharge, CardDecision, CardResult
from kasir.processors.registry import card_acquirer, require
from kasir.processors.repository import processor_call_repository

log = logging.getLogger("kasir.card")

CURRENCY = "IDR"
VALIDITY = timedelta(hours=24)  # docs/decisions.md §7: expiredTime defaults to 24 h
EXPIRED_BY_TIME = "Payment link expired"
EXPIRED_BY_ATTEMPTS = f"Payment failed {MAX_FAILED_ATTEMPTS} times; the payment link is closed"
APPROVED = "Approved"
CHALLENGE_REQUIRED = "3-D Secure authentication required"


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


# --- page and API helpers --------------------------------------------------------------


@lru_cache(maxsize=16)
def _key(secret_key: str, purpose: str) -> bytes:
    return derive_key(secret_key, purpose)


def _service_key(purpose: str, secret_key: str | None = None) -> bytes:
    return _key(secret_key or get_settings().resolved_secret_key(), purpose)


def _accepted_keys() -> tuple[str | None, ...]:
    """The current key (None), then KASIR_SECRET_KEY_PREVIOUS: a page shown before a rotation still submits."""
    return (None, *get_settings().previous_secret_keys())


def page_token(order_id: str, attempt: int, purpose: str, secret_key: str | None = None) -> str:
    """The CSRF token of a page form: bound to the order, the attempt number and the form."""
    message = f"{order_id}:{attempt}:{purpose}".encode()
    return hmac.digest(_service_key("kasir/card-page-csrf", secret_key), message, "sha256").hex()


def check_page_token(order_id: str, attempt: int, purpose: str, token: str) -> bool:
    return any(constant_time_equals(page_token(order_id, attempt, purpose, key), token) for key in _accepted_keys())


def page_url(order_id: str) -> str:
    return f"{get_settings().public_url}/card/pages/{order_id}"


def challenge_return_url(order_id: str, attempt: int) -> str:
    """Where an acquirer's challenge sends the customer back (`finish_challenge` asks it the result)."""
    return f"{page_url(order_id)}/return?attempt={attempt}"


def return_redirect(order: CardOrderRow, status: str) -> str:
    """returnUrl with transaction_id, order_id and status added to its query."""
    parts = urlsplit(order.return_url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    query += [("transaction_id", order.id), ("order_id", order.order_id), ("status", status)]
    return urlunsplit(parts._replace(query=urlencode(query)))


def payment_status(order: CardOrderRow) -> str:
    return PAYMENT_STATUS[CardOrderStatus(order.status)]


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
            from kasir.processors.registry import ProductUnavailable

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
            from kasir.wallet.service import wallet_service

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
    ) -> dict[str, Any]:
        """The row of a card order for `request` (paymentMethod card), not yet written.

        `dialect` and `sub_merchant_id`: of a charge in the provider SDK's dialect (kasir.card.dialect).
        """
        merchant = caller.merchant
        now = clock.now()
        expires_at = parse_aware(request.payment_details.expired_time) if request.payment_details.expired_time else None
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
            "details": request.stored_details(),
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
        values = self.new_order(caller, request, dialect=dialect, sub_merchant_id=sub_merchant_id)
        if not await card_repository.add_order(session, values):
            await self._refuse_duplicate(session, merchant.id, request)
            raise DuplicateOrder("orderId")
        payment_metrics.created(session, "card", CardOrderStatus(values["status"]).name)
        order_id = values["id"]
        annotate_request(transaction_id=order_id, merchant_id=merchant.id)
        if card is None:
            return _pending(order_id, request)
        order = await self.get(session, order_id)
        return await self._begin_attempt(session, order, card, request.tenor, save_card=save_card, new_order=True)

    async def _refuse_duplicate(self, session: Session, merchant_id: str, request: ChargeRequest) -> None:
        """orderId and externalId are unique per merchant across card orders and wallet transactions."""
        used = await card_repository.used_reference(session, merchant_id, request.order_id, request.external_id)
        if used is not None:
            raise DuplicateOrder("orderId" if used[0] == request.order_id else "externalId")

    async def _charge_wallet(self, session: Session, caller: BasicCaller, request: ChargeRequest) -> ChargeOutcome:
        """docs/decisions.md §7: `paymentMethod` ewallet creates a wallet transaction (wallet callbacks follow)."""
        from kasir.wallet.schemas import CreatePaymentRequest
        from kasir.wallet.service import DuplicateExternalId, payment_url, wallet_service

        try:
            wallet_request = CreatePaymentRequest.model_validate(wallet_request_body(request))
        except ValidationError as exc:
            errors = from_pydantic_errors(exc.errors(include_input=False)).errors
            raise CardValidationError([FieldError(card_field(e.field), e.message) for e in errors]) from None
        try:
            tx = await wallet_service.create_payment(session, caller.merchant, wallet_request, qr=False)
        except DuplicateExternalId:
            raise DuplicateOrder("externalId") from None
        except KasirError as error:
            reason = getattr(error, "reason", None)
            error.errors = [
                FieldError(card_field(e.field), reason if (reason and not error.errors) else e.message)
                for e in error.field_errors()
            ]
            raise
        annotate_request(transaction_id=tx.id, merchant_id=caller.merchant.id)
        return ChargeOutcome(tx.id, tx.external_id, "PENDING", payment_url(tx))

    # --- attempts -------------------------------------------------------------------------

    async def get(self, session: Session, order_id: str, *, lock: bool = False) -> CardOrderRow:
        order = await card_repository.get(session, order_id, lock=lock)
        if order is None or order.payment_method != "card":
            raise CardOrderNotFound("Payment not found")
        return order

    def is_due(self, order: CardOrderRow) -> bool:
        """Open but past expiredTime: as good as expired (the expiry job records it within a second)."""
        open_statuses = (CardOrderStatus.PENDING.value, CardOrderStatus.AUTHENTICATING.value)
        return order.status in open_statuses and order.expires_at <= clock.now()

    def _refuse_unless_open(self, order: CardOrderRow, now: datetime, expected: CardOrderStatus) -> None:
        if order.status != expected.value:
            raise CardOrderClosed(f"The payment is {order.status.lower()}")
        if order.expires_at <= now:
            raise CardOrderClosed("The payment link has expired")

    async def pay_on_page(
        self, session: Session, order_id: str, attempt_number: int, card: ParsedCard, tenor: str, save_card: bool
    ) -> PendingCall:
        """An attempt with the card entered on the page: held, to be asked of the acquirer (kasir.processors.calls)."""
        order = await self.get(session, order_id, lock=True)
        if attempt_number != order.attempts_made + 1:
            raise AttemptAlreadySubmitted()
        if tenor not in TENORS:
            raise InvalidFieldFormat("tenor", "must be one of 0, 3, 6, 12")
        return await self._begin_attempt(session, order, card, tenor, save_card=save_card, new_order=False)

    async def _begin_attempt(
        self, session: Session, order: CardOrderRow, card: ParsedCard, tenor: str, *, save_card: bool, new_order: bool
    ) -> PendingCall:
        """The attempt, SUBMITTED: the acquirer is asked once this unit of work has committed."""
        now = clock.now()
        self._refuse_unless_open(order, now, CardOrderStatus.PENDING)
        card_acquirer(order.payment_channel)  # switched off: refused before anything is written
        order.attempts_made += 1
        acq = acquirer_for(order.payment_channel, card.brand)
        order.acq, order.tenor, order.save_card = acq, tenor, save_card
        order.updated_at = now
        await card_repository.save(session, order)
        attempt = {
            "card_order_id": order.id,
            "number": order.attempts_made,
            "status": CardAttemptStatus.SUBMITTED.value,
            "masked_card": card.masked,
            "card_brand": card.brand,
            "card_exp_month": card.exp_month,
            "card_exp_year": card.exp_year,
            "tenor": tenor,
            "acq": acq,
            "response_message": "",
            "challenge_url": None,
            "created_at": now,
            "completed_at": None,
        }
        await card_repository.add_attempt(session, attempt)
        charge = CardCharge(
            reference=order.id,
            attempt=order.attempts_made,
            amount=order.amount,
            currency=order.currency,
            channel=order.payment_channel,
            acquirer_code=acq,
            tenor=tenor,
            card=card,
            return_url=challenge_return_url(order.id, order.attempts_made),
        )
        details = {
            "attempt": order.attempts_made,
            "channel": order.payment_channel,
            "new_order": new_order,
            "masked": card.masked,  # not card data: the attempt keeps it too
        }
        return PendingCall(Call(CARD_CHARGE, "card", order.id, details, card=charge))

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
        now = clock.now()
        attempt.response_message, attempt.completed_at = decision.message, now
        if decision.result is CardResult.APPROVED:
            attempt.status = CardAttemptStatus.SUCCESS.value
            await card_repository.save_attempt(session, attempt)
            await self._succeed(session, order, now)
        elif decision.result is CardResult.CHALLENGE:
            attempt.status, attempt.completed_at = CardAttemptStatus.CHALLENGE.value, None
            attempt.challenge_url = decision.redirect_url
            await card_repository.save_attempt(session, attempt)
            transition(order, CardOrderStatus.AUTHENTICATING)
            order.response_message = CHALLENGE_REQUIRED
            order.updated_at = now
            await card_repository.save(session, order)
        else:
            attempt.status = CardAttemptStatus.FAILED.value
            await card_repository.save_attempt(session, attempt)
            await self._fail(session, order, decision.message, now)
        log.info(
            "card attempt",
            extra={"transaction_id": order.id, "attempt": attempt.number, "status": attempt.status},
        )
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
        self._refuse_unless_open(order, now, CardOrderStatus.AUTHENTICATING)
        attempt = await card_repository.attempt(session, order.id, attempt_number)
        if attempt is None or attempt.status != CardAttemptStatus.CHALLENGE.value:
            raise AttemptAlreadySubmitted()
        if decision.result is CardResult.CHALLENGE:
            return order  # not finished: the customer is still at the challenge
        attempt.completed_at = now
        if decision.result is CardResult.APPROVED:
            attempt.status = CardAttemptStatus.SUCCESS.value
            attempt.response_message = APPROVED
            await card_repository.save_attempt(session, attempt)
            await self._succeed(session, order, now)
        else:
            attempt.status = CardAttemptStatus.FAILED.value
            attempt.response_message = decision.message
            await card_repository.save_attempt(session, attempt)
            await self._fail(session, order, decision.message, now)
        return order

    async def _succeed(self, session: Session, order: CardOrderRow, now: datetime) -> None:
        self._settle(session, order, CardOrderStatus.SUCCESS)
        order.paid_at = now
        order.response_message = APPROVED
        if order.save_card:
            order.card_token = new_id("CTK", 32)  # opaque: derived from nothing about the card
            attempt = await card_repository.attempt(session, order.id, order.attempts_made)
            if attempt is not None:  # the card a later charge may name by the token (kasir.card.dialect)
                await card_repository.store_card(session, order, attempt, now)
        await self._changed(session, order, "SUCCESS", now)

    async def _fail(self, session: Session, order: CardOrderRow, message: str, now: datetime) -> None:
        order.attempts_failed += 1
        order.response_message = message
        final = order.attempts_failed >= MAX_FAILED_ATTEMPTS
        if order.status == CardOrderStatus.AUTHENTICATING.value and not final:
            transition(order, CardOrderStatus.PENDING)
        await self._changed(session, order, "FAILED", now)
        if final:
            self._settle(session, order, CardOrderStatus.EXPIRED)
            order.response_message = EXPIRED_BY_ATTEMPTS
            await self._changed(session, order, "EXPIRED", now)

    async def expire(self, session: Session, order_id: str) -> bool:
        order = await self.get(session, order_id, lock=True)
        now = clock.now()
        if order.status not in (CardOrderStatus.PENDING.value, CardOrderStatus.AUTHENTICATING.value):
            return False
        if order.expires_at > now:
            return False
        if await processor_call_repository.in_flight(session, "card", order.id):
            return False  # the acquirer is deciding an attempt: expired once that is recorded
        if order.status == CardOrderStatus.AUTHENTICATING.value:
            challenge = await card_repository.attempt(session, order.id, order.attempts_made)
            if challenge is not None and challenge.status == CardAttemptStatus.CHALLENGE.value:
                challenge.status, challenge.completed_at = CardAttemptStatus.FAILED.value, now
                challenge.response_message = EXPIRED_BY_TIME
                await card_repository.save_attempt(session, challenge)
        self._settle(session, order, CardOrderStatus.EXPIRED)
        order.response_message = EXPIRED_BY_TIME
        await self._changed(session, order, "EXPIRED", now)
        return True

    def _settle(self, session: Session, order: CardOrderRow, to: CardOrderStatus) -> None:
        """A transition to an outcome (SUCCESS, EXPIRED), counted in the payment metrics once the unit
        commits; `_changed` saves it."""
        transition(order, to)
        payment_metrics.settled_in(session, "card", to.name)

    # --- payment-page callbacks -------------------------------------------------------------

    async def _changed(self, session: Session, order: CardOrderRow, event: str, now: datetime) -> None:
        """Save the order's change and record its payment-page callback (sent after commit)."""
        order.updated_at = now
        await card_repository.save(session, order)
        if not order.callback_url:
            return  # neither the request nor the merchant named a callback URL
        await callback_outbox.record(
            session,
            kind=CallbackKind.PAYMENT_PAGE,
            merchant_id=order.merchant_id,
            transaction_ref=order.id,
            event=event,
            url=order.callback_url,
            payload=callback_payload(order, event),
            signed_ids=SignedIds(order.id, order.external_id, order.order_id, order.sub_merchant_id),
        )


card_service = CardService()

CARD_CHARGE = "card.charge"


class CardChargeAction:
    """An attempt's charge at the acquirer, asked outside any unit of work (kasir.processors.calls)."""

    async def ask(self, call: Call) -> CardDecision:
        assert call.card is not None
        return await card_acquirer(call.details["channel"]).charge(call.card)

    async def lock(self, session: Session, call: Call) -> None:
        await card_service.get(session, call.reference, lock=True)

    async def ask_again(self, call: Call) -> CardDecision:
        token = recorded_card.set(call.details.get("masked"))
        try:
            return await card_acquirer(call.details["channel"]).status(call.reference, call.details["attempt"])
        finally:
            recorded_card.reset(token)

    async def record(
        self, session: Session, call: Call, answer: CardDecision, *, fresh: bool
    ) -> tuple[CardOrderRow, CardAttemptRow, CardDecision | None]:
        order, attempt, _recorded = await card_service.record_attempt(
            session, call.reference, call.details["attempt"], answer if fresh else None
        )
        if fresh and refuses_challenge(call.details) and order.status == CardOrderStatus.AUTHENTICATING.value:
            # A direct charge of the provider SDK's dialect: no one will pass the challenge, the attempt fails.
            refused = CardDecision(CardResult.DECLINED, DIRECT_3DS_REFUSED)
            order = await card_service.finish_challenge(session, order.id, attempt.number, refused)
            # As finished: the dialect's answer says why the attempt failed.
            finished = await card_repository.attempt(session, order.id, attempt.number)
            assert finished is not None
            attempt = finished
        # The acquirer's decision, recorded now or by another unit (asked again, it answers the same):
        # the dialect's answer needs its decline reason, which is not stored.
        return order, attempt, answer

    async def undo(self, session: Session, call: Call, error: KasirError) -> None:
        await card_service.undo_attempt(
            session, call.reference, call.details["attempt"], new_order=call.details["new_order"]
        )

    async def respond(
        self, session: Session, call: Call, recorded: tuple[CardOrderRow, CardAttemptRow, CardDecision | None]
    ) -> Response:
        order, attempt, decision = recorded
        outcome = ChargeOutcome.of(order, attempt.challenge_url)
        if DIALECT_ANSWER in call.details:  # the provider SDK's dialect (kasir.card.dialect)
            reason = decision.reason if decision is not None else None
            return JSONResponse(dialect_body(call.details[DIALECT_ANSWER], order, attempt, outcome.link, reason))
        return JSONResponse(charge_body(outcome))


def _pending(order_id: str, request: ChargeRequest) -> ChargeOutcome:
    """The answer to a charge whose customer still has to act at the payment page (OPEN mode)."""
    return ChargeOutcome(order_id, request.external_id, PAYMENT_STATUS[CardOrderStatus.PENDING], page_url(order_id))


def _address_body(address: Any) -> dict[str, Any]:
    return {
        "full_name": address.full_name,
        "phone": address.phone,
        "address": address.address,
        "city": address.city,
        "postal_code": address.postal_code,
        "country": address.country,
    }


def wallet_request_body(request: ChargeRequest) -> dict[str, Any]:
    """The card request as a wallet create-payment body (docs/decisions.md §5 field names)."""
    details = request.payment_details
    body: dict[str, Any] = {
        "external_id": request.external_id,
        "order_id": request.order_id,
        "currency": request.currency,
        "payment_method": "wallet",
        "payment_channel": request.payment_channel,
        "payment_details": {"amount": details.amount, "transaction_description": details.transaction_description},
        "customer_details": {
            "email": request.customer_details.email,
            "full_name": request.customer_details.full_name,
            "phone": request.customer_details.phone,
        },
        "item_details": [
            {"item_id": i.item_id, "name": i.name, "amount": i.amount, "qty": i.qty}
            | ({"description": i.description} if i.description else {})
            for i in request.item_details
        ],
        # The card request names no wallet account: the customer's phone is it.
        "wallet_details": {"id": request.customer_details.phone, "id_type": "HP"},
        "billing_address": _address_body(request.billing_address),
        "shipping_address": _address_body(request.shipping_address),
        "return_url": request.return_url,
    }
    if details.expired_time:
        body["payment_details"]["expired_time"] = details.expired_time
    if request.callback_url:
        body["callback_url"] = request.callback_url
    if request.additional_data:
        body["additional_data"] = request.additional_data
    return body


# The wallet room's field names that are not the camelCase of the card request's.
_WALLET_FIELDS = {"wallet_details.id": "customerDetails.phone", "wallet_details": "customerDetails.phone"}


def card_field(field: str) -> str:
    """`payment_details.expired_time` -> `paymentDetails.expiredTime` (errors of an ewallet charge)."""
    if field in _WALLET_FIELDS:
        return _WALLET_FIELDS[field]
    return ".".join(re.sub(r"^[a-z_]+", lambda m: to_camel(m.group(0)), part) for part in field.split("."))


def _utc_iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _text(value: Any) -> str:
    """A string field of a callback: "" when it has no value (issue 26: never null)."""
    return "" if value is None else str(value)


def _address(address: dict[str, Any]) -> dict[str, Any]:
    return {
        "full_name": _text(address.get("fullName")),
        "phone": _text(address.get("phone")),
        "address": _text(address.get("address")),
        "city": _text(address.get("city")),
        "postal_code": _text(address.get("postalCode")),
        "country": _text(address.get("country")),
    }


def callback_payload(order: CardOrderRow, transaction_status: str) -> dict[str, Any]:
    """interface.md "Payment-page callback payload": every field, snake_case."""
    details: dict[str, Any] = json.loads(order.details)
    customer = details.get("customerDetails", {})
    billing = details.get("billingAddress", {})
    # The acquirer that processed an attempt; "" when none was tried (issue 26: not a guess).
    acq = order.acq or ""
    channel_acq = card_channels().get(order.payment_channel)
    return {
        "transaction_id": order.id,
        "order_id": order.order_id,
        "external_id": order.external_id,
        "currency": order.currency,
        "transaction_status": transaction_status,
        "response_message": order.response_message or "",
        "payment_method": "CARD",
        "payment_channel": "CARD",
        "acq": acq,
        "paid_date": _utc_iso(order.paid_at) if order.paid_at is not None else "",
        "amount": order.amount,
        # The channel's own acquirer where it has one (BCACC: BCA), else the one that processed an attempt.
        "selected_channels": [{"channel": order.payment_channel, "acq": channel_acq or acq}],
        "is_customer_paying_fee": bool(details.get("paymentDetails", {}).get("isCustomerPayingFee", False)),
        "item_details": [
            {"item_id": item["itemId"], "name": item["name"], "amount": item["amount"], "qty": item["qty"]}
            for item in details.get("itemDetails", [])
        ],
        "save_card": order.save_card,
        "card_token": order.card_token or "",
        "customer_details": {
            "full_name": _text(customer.get("fullName")),
            "email": _text(customer.get("email")),
            "phone": _text(customer.get("phone")),
            "address": _text(billing.get("address")),
            "is_email_show": True,
            "is_phone_show": True,
        },
        "shipping_address": _address(details.get("shippingAddress", {})),
        "billing_address": _address(billing),
        "callback_url": order.callback_url or "",
        "success_redirect_url": return_redirect(order, "SUCCESS"),
        "failed_redirect_url": return_redirect(order, "EXPIRED"),
        "expired_time": isoformat_seconds(order.expires_at, JAKARTA),
    } | (dialect_callback_fields(order) if order.dialect else {})


def dialect_callback_fields(order: CardOrderRow) -> dict[str, Any]:
    """What a payment in the provider SDK's dialect adds to its callbacks: the instalments, the sub-merchant."""
    tenor = int(order.tenor or "0")
    return {
        "payment_mode": "INSTALLMENT" if tenor else "CLOSE",
        "tenor": tenor,
        "sub_merchant_id": order.sub_merchant_id,
    }
