"""The simulator's routes: each answers 404 unless the simulator is the product's processor (never
in production), exactly as the staging-only routes did.

    GET  /card/pages/{id}/3ds              the 3-D Secure OTP page (the OTP is shown)
    POST /card/pages/{id}/3ds              the OTP: the challenge passed, a wrong code to type again
                                           (OTP_TRIES in all), or the challenge failed
    POST /ewallet/pages/{id}/pay           Pay on the wallet checkout page
    POST /ewallet/pages/{id}/fail          Fail on it (OVO reports failures)
    POST /ewallet/v2/dummy-payment         the dummy payment API (interface.md endpoint 3)
    POST /va/dummy-payment                 one payment into a virtual account (docs/decisions.md §9.6)
    POST /bnpl/pages/{id}/approve          Approve on the BNPL approval page (tenure)
    POST /bnpl/pages/{id}/reject           Reject on it

Each change goes through kasir.processors.service.apply, as a processor's notification would; what a
page reads of a payment it reads through the product's public service. They are the simulator's
`router()`, included by the app where the simulator is a configured processor.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from kasir.auth import PUBLIC, WalletSigned
from kasir.bnpl.service import UnknownTenure, bnpl_service
from kasir.card import pages as card_pages
from kasir.card.page_links import check_page_token, page_token, return_redirect
from kasir.card.service import AttemptAlreadySubmitted, card_service
from kasir.card.states import CardOrderStatus
from kasir.db import ReadSession, Session, WriteSession, rollback_unit
from kasir.errors import KasirError, NotFound, WireFormat, wire
from kasir.idempotency.service import Keyed
from kasir.kit.clock import clock
from kasir.kit.pages import check_form_token, form_fields, html_page
from kasir.processors.protocols import Event, Notification, Product, WalletPayment
from kasir.processors.registry import SIMULATOR, simulator_serves
from kasir.processors.service import apply
from kasir.simulator import pages
from kasir.simulator.cards import OTP_FAILED_MESSAGE, OTP_TRIES, check_one_time_password, one_time_password
from kasir.simulator.repository import wrong_otps
from kasir.va.endpoints import ERROR_RESPONSES as VA_ERROR_RESPONSES
from kasir.va.endpoints import sub_merchant_of, va_route_openapi
from kasir.va.schemas import DummyVaPaymentRequest, VaDummyPaymentAnswer
from kasir.va.service import dummy_payment_data, envelope, va_service
from kasir.wallet.endpoints import ERROR_RESPONSES, parse, route_openapi
from kasir.wallet.schemas import FAILURE_CHANNEL, DummyPaymentRequest, WalletDummyPaymentResponse
from kasir.wallet.service import (
    ChannelMismatch,
    NotTheFailureChannel,
    TransactionExpired,
    timestamp,
    wallet_service,
)

router = APIRouter(tags=["simulator"])


def _simulator_for(product: Product) -> Any:
    async def simulated() -> None:  # async: a plain def would run on a worker thread, a hop per request
        if not simulator_serves(product):
            raise NotFound("Not Found")

    return Depends(simulated)


_PLAIN = wire(WireFormat.PLAIN)
# The pages prove no caller (PUBLIC): their forms carry the page's own token instead.
_CARD_PAGE: dict[str, Any] = {"openapi_extra": _PLAIN, "include_in_schema": False,
                              "dependencies": [PUBLIC, _simulator_for("card")]}  # fmt: skip


# --- card: the 3-D Secure OTP page --------------------------------------------------------


def _see_other(url: str) -> RedirectResponse:
    return RedirectResponse(url, status_code=303)


async def _refused(session: Session, order: Any, heading: str, *, status: int) -> Response:
    return html_page(await card_pages.render_refusal(session, order, heading), status_code=status)


@router.get("/card/pages/{order_id}/3ds", response_class=HTMLResponse, **_CARD_PAGE)
async def otp_page(order_id: str, session: ReadSession) -> Response:
    order, attempt = await card_service.challenge(session, order_id)
    if attempt is None or card_service.is_due(order):
        return _see_other(f"/card/pages/{order.id}")
    csrf = page_token(order.id, attempt.number, "3ds")
    wrong = await wrong_otps.count(session, order.id, attempt.number)
    html = pages.render_otp(
        await card_pages.common(session, order),
        order_id=order.id,
        attempt=attempt.number,
        masked_card=attempt.masked_card,
        otp=one_time_password(order.id, attempt.number),
        csrf=csrf,
        tries_left=OTP_TRIES - wrong if wrong else None,
    )
    return html_page(html)


@router.post("/card/pages/{order_id}/3ds", **_CARD_PAGE)
async def verify_otp(order_id: str, request: Request, session: WriteSession) -> Response:
    form = await form_fields(request)
    order = await card_service.get(session, order_id)
    attempt_number = card_pages.attempt_number(form)
    if not check_page_token(order.id, attempt_number, "3ds", form.get("csrf", "")):
        return await _refused(session, order, "This form is no longer valid", status=403)
    passed = check_one_time_password(order.id, attempt_number, form.get("otp", "").strip())
    if not passed and await _try_again(session, order_id, attempt_number):
        return _see_other(f"/card/pages/{order_id}/3ds")  # the same challenge: the page says how many tries are left
    event = Event.PAID if passed else Event.FAILED
    notification = Notification(
        "card", order.id, event, attempt=attempt_number, message=None if passed else OTP_FAILED_MESSAGE
    )
    try:
        await apply(session, notification, by=SIMULATOR, strict=True)
    except AttemptAlreadySubmitted:
        await rollback_unit(session)
        order = await card_service.get(session, order_id)
        return await _refused(session, order, "This verification was already submitted", status=409)
    except KasirError as error:
        if isinstance(error, NotFound):
            raise
        await rollback_unit(session)
        return _see_other(f"/card/pages/{order_id}")
    order = await card_service.get(session, order_id)
    if order.status == CardOrderStatus.SUCCESS.value:
        return _see_other(return_redirect(order, "SUCCESS"))
    if order.status == CardOrderStatus.EXPIRED.value:
        return _see_other(return_redirect(order, "EXPIRED"))
    return _see_other(f"/card/pages/{order.id}")  # wrong OTP, attempts left: the page says why


async def _try_again(session: Session, order_id: str, attempt_number: int) -> bool:
    """A wrong code for the attempt waiting at its challenge: counted, and True while the customer may type it
    again (OTP_TRIES codes in all); False when it was the last, or the attempt waits no more (a form sent
    again, another tab): the notification's rules then decide, as before."""
    await card_service.get(session, order_id, lock=True)  # wrong codes of one attempt are counted one at a time
    _order, waiting = await card_service.challenge(session, order_id)
    if waiting is None or waiting.number != attempt_number:
        return False
    await wrong_otps.add(session, order_id, attempt_number, clock.now())
    return await wrong_otps.count(session, order_id, attempt_number) < OTP_TRIES


# --- wallet: the checkout page's forms and the dummy payment --------------------------------

_WALLET_PAGE: dict[str, Any] = {
    "openapi_extra": _PLAIN, "include_in_schema": False, "dependencies": [PUBLIC, _simulator_for("wallet")],
}  # fmt: skip


RefusalPage = Callable[[Session, KasirError], Awaitable[str]]


async def _page_change(session: Session, notification: Notification, page: str, refusal: RefusalPage) -> Response:
    """Apply a page form's change as the simulator's notification; back to `page`, or a refusal in the shopper's
    words (read after the refused change is rolled back, so it says where the payment stands)."""
    try:
        await apply(session, notification, by=SIMULATOR, strict=True)
    except KasirError as error:
        if isinstance(error, NotFound):
            raise
        await rollback_unit(session)
        return html_page(await refusal(session, error), status_code=error.http_status)
    return RedirectResponse(page, status_code=303)


async def _wallet_page_change(session: Session, notification: Notification, then: str | None = None) -> Response:
    """`then`: where a successful change sends the customer, else back to the checkout page."""

    async def refusal(session: Session, error: KasirError) -> str:
        payment = await wallet_service.checkout(session, notification.reference)
        return pages.render_wallet_refusal(payment.reference, _shopper_refusal(error, payment), payment.merchant_name)

    return await _page_change(session, notification, then or f"/ewallet/pages/{notification.reference}", refusal)


def _shopper_refusal(error: KasirError, payment: WalletPayment) -> str:
    """The refusal in a shopper's words (the wire's message names states and codes)."""
    if isinstance(error, NotTheFailureChannel):
        return f"Only {FAILURE_CHANNEL} payments can be declined here: this one is paid with {payment.channel}."
    if isinstance(error, TransactionExpired):
        return pages.WALLET_CLOSED["EXPIRED"]
    return pages.WALLET_CLOSED.get(payment.status, "This payment cannot be changed now.")


_Csrf = Annotated[str | None, Form(max_length=128)]


def _forged(message: str, refusal: Any, reference: str) -> Response:
    """A form without its page's token (another site's form, or none): refused, nothing changed."""
    return html_page(refusal(reference, message), status_code=403)


_FORGED = "This form did not come from this payment's page; nothing was changed. Open the page and try again."


@router.post("/ewallet/pages/{transaction_id}/pay", summary="Pay on the checkout page (staging)", **_WALLET_PAGE)
async def pay_on_page(transaction_id: str, session: WriteSession, csrf: _Csrf = None) -> Response:
    tx = await wallet_service.get(session, transaction_id, lock=True)  # 404 first; locked as the change will be
    if not check_form_token("wallet-pay", transaction_id, csrf):
        return _forged(_FORGED, pages.render_wallet_refusal, transaction_id)
    # A payment link's wallet or QRIS attempt: paid, the customer goes straight on to the link's page, which sends
    # them to the merchant (docs/decisions.md §10.4: every page redirects once paid), as an issuer's app would.
    then = tx.return_url if tx.link_id is not None else None
    return await _wallet_page_change(session, Notification("wallet", transaction_id, Event.PAID), then)


@router.post(
    "/ewallet/pages/{transaction_id}/fail",
    summary="Fail on the checkout page (staging; OVO reports failures)",
    **_WALLET_PAGE,
)
async def fail_on_page(
    transaction_id: str,
    session: WriteSession,
    reason: Annotated[str | None, Form(max_length=255)] = None,
    csrf: _Csrf = None,
) -> Response:
    await wallet_service.get(session, transaction_id, lock=True)
    if not check_form_token("wallet-fail", transaction_id, csrf):
        return _forged(_FORGED, pages.render_wallet_refusal, transaction_id)
    return await _wallet_page_change(session, Notification("wallet", transaction_id, Event.FAILED, message=reason))


_DUMMY_EVENTS = {"PAID": Event.PAID, "FAILED": Event.FAILED, "EXPIRED": Event.EXPIRED}


@router.post(
    "/ewallet/v2/dummy-payment",
    summary="Simulate the customer's payment (staging)",
    openapi_extra=route_openapi(DummyPaymentRequest, keyed=True),
    responses={
        **ERROR_RESPONSES,
        200: {"model": WalletDummyPaymentResponse, "description": "`00` Success: the result, six fields"},
    },
    dependencies=[_simulator_for("wallet")],
)
async def dummy_payment(caller: WalletSigned, once: Keyed) -> Response:
    """interface.md endpoint 3, with docs/decisions.md §5's simulate_status (PAID, FAILED, EXPIRED)."""
    payment = parse(DummyPaymentRequest, caller.body)

    async def pay(session: Session) -> Response:
        tx = await wallet_service.find(session, caller.merchant.merchant, payment, lock=True)
        if payment.payment_channel != tx.payment_channel:
            raise ChannelMismatch()
        event = _DUMMY_EVENTS[payment.simulate_status]
        notification = Notification("wallet", tx.id, event, message=payment.failure_reason)
        await apply(session, notification, by=SIMULATOR, strict=True)
        return JSONResponse(dummy_payment_result(await wallet_service.get(session, tx.id, lock=True)))  # as changed

    # Once per X-Idempotency-Key, scoped by the route's path as every wallet route's (kasir.idempotency).
    return await once.run(caller.merchant_id, pay)


def dummy_payment_result(tx: Any) -> dict[str, Any]:
    """interface.md: the dummy payment result fields, exactly."""
    return {
        "external_id": tx.external_id,
        "order_id": tx.order_id,
        "transaction_status": tx.status,
        "paid_time": timestamp(tx.paid_at),
        "reference_id": tx.reference_id,
        "response_code": "00",
    }


# --- VA: the dummy payment ----------------------------------------------------------------------


@router.post(
    "/va/dummy-payment",
    summary="Simulate a payment into a virtual account (staging)",
    openapi_extra=va_route_openapi(DummyVaPaymentRequest, keyed=True),
    responses={
        **VA_ERROR_RESPONSES,
        200: {"model": VaDummyPaymentAnswer, "description": "`00` Success: the payment in `data`"},
    },
    dependencies=[_simulator_for("va")],
)
async def va_dummy_payment(request: Request, caller: WalletSigned, once: Keyed) -> Response:
    """One payment into the VA, applied as an issuer's notification is; one reference_id, one callback."""
    payment = parse(DummyVaPaymentRequest, caller.body)
    await va_service.check_sub_merchant(request.app.state.database, caller.merchant_id, sub_merchant_of(request))

    async def pay(session: Session) -> Response:
        va = await va_service.find(session, caller.merchant.merchant, payment, lock=True)
        await apply(session, Notification("va", va.id, Event.PAID, amount=payment.amount), by=SIMULATOR, strict=True)
        paid = await va_service.latest_payment(session, va.id)
        return JSONResponse(envelope(dummy_payment_data(await va_service.get(session, va.id, lock=True), paid)))

    return await once.run(caller.merchant_id, pay)


# --- BNPL: the approval page's forms ----------------------------------------------------------

_BNPL_PAGE: dict[str, Any] = {
    "openapi_extra": _PLAIN, "include_in_schema": False, "dependencies": [PUBLIC, _simulator_for("bnpl")],
}  # fmt: skip


async def _bnpl_page_change(session: Session, notification: Notification) -> Response:
    async def refusal(session: Session, error: KasirError) -> str:
        application = await bnpl_service.application(session, notification.reference)
        message = _bnpl_shopper_refusal(error, application.status)
        return pages.render_bnpl_refusal(application.reference, message, application.merchant_name)

    return await _page_change(session, notification, f"/bnpl/pages/{notification.reference}", refusal)


def _bnpl_shopper_refusal(error: KasirError, status: str) -> str:
    """The refusal in the customer's words (the wire's message names codes and fields)."""
    if isinstance(error, UnknownTenure):
        return "Choose one of the plans on the page."
    if status == "01":  # still waiting, yet refused: past its validity, the expiry job has not recorded it yet
        return pages.BNPL_CLOSED["05"]
    return pages.BNPL_CLOSED.get(status, "This application cannot be changed now.")


@router.post("/bnpl/pages/{reference_no}/approve", summary="Approve on the BNPL page (staging)", **_BNPL_PAGE)
async def approve(
    reference_no: str, tenure: Annotated[int, Form()], session: WriteSession, csrf: _Csrf = None
) -> Response:
    await bnpl_service.get(session, reference_no, lock=True)  # locked first, as the change will be
    if not check_form_token("bnpl-approve", reference_no, csrf):
        return _forged(_FORGED, pages.render_bnpl_refusal, reference_no)
    return await _bnpl_page_change(session, Notification("bnpl", reference_no, Event.APPROVED, tenure=tenure))


@router.post("/bnpl/pages/{reference_no}/reject", summary="Reject on the BNPL page (staging)", **_BNPL_PAGE)
async def reject(reference_no: str, session: WriteSession, csrf: _Csrf = None) -> Response:
    await bnpl_service.get(session, reference_no, lock=True)  # locked first, as the change will be
    if not check_form_token("bnpl-reject", reference_no, csrf):
        return _forged(_FORGED, pages.render_bnpl_refusal, reference_no)
    return await _bnpl_page_change(session, Notification("bnpl", reference_no, Event.REJECTED))
