"""Card routes: the charge API (interface.md endpoint 6) and the staging payment pages.

    POST /card-v2/v1/charge               Basic auth, X-Idempotency-Key; card error format
    GET  /card/pages/{id}                 hosted payment page (or the paid / closed page)
    POST /card/pages/{id}/pay             one attempt with the card entered on the page
    GET  /card/pages/{id}/3ds             3-D Secure one-time-password page (OTP shown in staging)
    POST /card/pages/{id}/3ds             the OTP

Idempotency (decisions.md §7): a request that passes authentication and validation claims
its (merchant, key) row in its own committed transaction (under SQLite group commit, in the
charge's own unit of work, and a key never used before is written after the charge, complete:
see _charge_in_one_unit). The charge and its stored response
commit together; a 4xx refusal from then on (409 DUPLICATE_ORDER) is stored as the first
complete response too; a 5xx lets go of the key so a retry runs afresh. Requests refused by
validation (400, 422 INVALID_CARD) are answered before the key is claimed: their answer
depends on the body alone.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.ext.asyncio import AsyncSession

from kasir.card import pages
from kasir.card.cards import ParsedCard
from kasir.card.repository import card_repository
from kasir.card.schemas import CardErrorBody, ChargeRequest, ChargeResponse
from kasir.card.service import (
    EXPIRED_BY_TIME,
    IDEMPOTENCY_KEY_MAX,
    AttemptAlreadySubmitted,
    InvalidCard,
    card_from_fields,
    card_service,
    charge_body,
    check_page_token,
    one_time_password,
    page_token,
    request_fingerprint,
    return_redirect,
)
from kasir.card.states import CardOrderStatus
from kasir.db import Database, ReadSession, WriteSession, rollback_unit
from kasir.errors import (
    InvalidFieldFormat,
    KasirError,
    NotFound,
    RequestInProgress,
    ServiceUnavailable,
    WireFormat,
    render,
    wire,
)
from kasir.kit.back_to_back import BackToBack
from kasir.kit.clock import clock
from kasir.kit.logs import forget_request_field
from kasir.merchants.basic_auth import BasicCaller
from kasir.snap.openapi import snap_route
from kasir.staging import Staging

log = logging.getLogger("kasir.card")

# The charge bodies of one event-loop iteration are parsed and validated together, with
# pydantic-core's code and the schema warm in the CPU's caches (kit/back_to_back.py): at 64
# connections, 0.53x -> 0.58-0.60x the benchmark's ceiling.
_charge_parsings = BackToBack()

router = APIRouter(tags=["card"])

REPLAYED = "Idempotent-Replayed"

_CARD = wire(WireFormat.CARD)
_CHARGE_OPENAPI = {
    **_CARD,
    # The body is read raw (its hash keys idempotency); its schema is documented from the model.
    "requestBody": snap_route("00", ChargeRequest)["requestBody"],
    "parameters": [
        {"name": "Authorization", "in": "header", "required": True, "schema": {"type": "string"}},
        {"name": "X-Idempotency-Key", "in": "header", "required": False, "schema": {"type": "string"}},
    ],
}


def _error_responses() -> dict[int | str, dict[str, Any]]:
    described = {
        400: "VALIDATION_ERROR",
        401: "UNAUTHORIZED",
        409: "DUPLICATE_ORDER or REQUEST_IN_PROGRESS",
        422: "INVALID_CARD or IDEMPOTENCY_KEY_REUSED",
        500: "INTERNAL_ERROR",
        503: "SERVICE_UNAVAILABLE",
    }
    return {status: {"model": CardErrorBody, "description": text} for status, text in described.items()}


@router.post(
    "/card-v2/v1/charge",
    summary="Card charge",
    openapi_extra=_CHARGE_OPENAPI,
    response_model=ChargeResponse,
    responses=_error_responses(),
)
async def charge(request: Request) -> Response:
    try:
        return await _charge(request)
    except (OperationalError, InterfaceError, PoolTimeout, ConnectionError):
        # The database is unreachable or overloaded: retry later (interface.md: 503, exponential backoff).
        # Logged with its cause: an OperationalError can also be a bug, which must not pass for an outage.
        log.exception("card charge: database unavailable")
        raise ServiceUnavailable(
            "Service temporarily unavailable; retry with exponential backoff", field="", headers={"Retry-After": "1"}
        ) from None


async def _charge(request: Request) -> Response:
    database = request.app.state.database
    caller = await card_service.authenticate(database, request.headers.get("authorization"))
    key = request.headers.get("x-idempotency-key")
    if key is not None and not 1 <= len(key) <= IDEMPOTENCY_KEY_MAX:
        raise InvalidFieldFormat("X-Idempotency-Key", f"must be 1 to {IDEMPOTENCY_KEY_MAX} characters")
    body = await request.body()
    charge_request, card = await _charge_parsings.run(card_service.parse, body)
    await card_service.check_callback_url(charge_request)
    if key is None:
        async with database.unit_of_work() as session:
            outcome = await card_service.charge(session, caller, charge_request, card)
            return JSONResponse(charge_body(outcome))

    fingerprint = request_fingerprint(body)
    if database.group is not None:
        keyed = _KeyedCharge(caller, key, fingerprint, charge_request, card)
        return await _charge_in_one_unit(request, database, keyed)
    claim = await card_service.claim_key(database, caller.merchant.id, key, fingerprint)
    if claim.replay is not None:
        return _replayed(claim.replay)
    assert claim.key_id is not None
    try:
        async with database.unit_of_work() as session:
            outcome = await card_service.charge(session, caller, charge_request, card)
            response = JSONResponse(charge_body(outcome))
            await card_service.complete_key(session, claim.key_id, 200, bytes(response.body).decode())
        return response
    except KasirError as error:
        if error.http_status >= 500:
            await card_service.forget_key(database, claim.key_id)
            raise
        refused = render(request, error)
        await card_service.store_key_response(database, claim.key_id, refused.status_code, bytes(refused.body).decode())
        return refused
    except BaseException:
        await card_service.forget_key(database, claim.key_id)
        raise


@dataclass(frozen=True, slots=True)
class _KeyedCharge:
    """A charge that passed authentication and validation, sent with an X-Idempotency-Key."""

    caller: BasicCaller
    key: str
    fingerprint: str
    request: ChargeRequest
    card: ParsedCard | None


async def _charge_in_one_unit(request: Request, database: Database, charge: _KeyedCharge) -> Response:
    """Under SQLite group commit: the key, the charge and its answer in one unit of work.

    A key written in a unit of its own would be seen by no one before the charge anyway: the
    writers of this process take turns in the shared transaction (one unit at a time), and
    other processes see committed batches only. So "in progress" is never seen here, and the
    common case, a key never used before, charges first and then writes the key complete with
    its answer: one statement where claiming and completing it are two. When the key is
    already there, or the charge is refused (which may be the replay of a refused first
    request), that unit is undone and `_claim_then_charge` decides as it does everywhere.
    A 5xx, or a crash, rolls all of it back and leaves the key free for the retry.
    """
    merchant_id = charge.caller.merchant.id
    if charge.card is None and charge.request.payment_method == "card":
        # OPEN mode, the common case: two INSERTs known in full before anything runs, so they go to
        # the batch as one program (GroupCommit.run) and the request waits once, for its batch.
        order, outcome = card_service.open_charge(charge.caller, charge.request)
        response = JSONResponse(charge_body(outcome))
        answer = (200, bytes(response.body).decode())
        if await card_service.write_open_charge(database, charge.caller, order, charge.key, charge.fingerprint, answer):
            return response
        return await _claim_then_charge(request, database, charge)  # orderId, externalId or the key taken
    try:
        async with database.unit_of_work() as session:
            outcome = await card_service.charge(session, charge.caller, charge.request, charge.card)
            response = JSONResponse(charge_body(outcome))
            answer = (200, bytes(response.body).decode())
            if not await card_service.add_answered_key(session, merchant_id, charge.key, charge.fingerprint, answer):
                raise _KeyAlreadyThere
        return response
    except _KeyAlreadyThere:
        pass
    except KasirError as error:
        if error.http_status >= 500:
            raise
    forget_request_field("transaction_id")  # that of the undone charge, if it got so far
    return await _claim_then_charge(request, database, charge)


class _KeyAlreadyThere(Exception):
    """Undoes a charge made before its key was written: the key's first answer decides instead."""


async def _claim_then_charge(request: Request, database: Database, charge: _KeyedCharge) -> Response:
    """Claim the key, charge and keep the answer in one unit (SQLite group commit, see above).

    The key's answer comes first: a replay, a reuse with another body (422), a first request
    still running (409), or a stale key taken over. A refusal (4xx) of the charge is kept as
    the key's answer in a unit of its own, as the charge's writes are undone.
    """
    merchant_id, key, fingerprint = charge.caller.merchant.id, charge.key, charge.fingerprint
    charging = False
    try:
        async with database.unit_of_work() as session:
            claim = await card_service.claim_key_in(session, merchant_id, key, fingerprint)
            if claim is None:
                raise RequestInProgress(field="X-Idempotency-Key")
            if claim.replay is not None:
                return _replayed(claim.replay)
            assert claim.key_id is not None
            charging = True
            outcome = await card_service.charge(session, charge.caller, charge.request, charge.card)
            response = JSONResponse(charge_body(outcome))
            await card_service.complete_key(session, claim.key_id, 200, bytes(response.body).decode())
        return response
    except KasirError as error:
        if not charging or error.http_status >= 500:
            raise
        refused = render(request, error)
        answer = bytes(refused.body).decode()
        await card_service.store_refusal(database, merchant_id, key, fingerprint, refused.status_code, answer)
        return refused


def _replayed(stored: tuple[int, str]) -> Response:
    status, body = stored
    return Response(body, status_code=status, media_type="application/json", headers={REPLAYED: "true"})


# --- the pages (staging simulator, decisions.md §1) --------------------------------------

_PLAIN = wire(WireFormat.PLAIN)


_PAGE = {"openapi_extra": _PLAIN, "dependencies": [Staging], "include_in_schema": False}


# Card forms are never cached, and never framed by another site (clickjacking).
_PAGE_HEADERS = {
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "frame-ancestors 'none'",
    "Referrer-Policy": "no-referrer",
}


def _html(content: str, status_code: int = 200) -> HTMLResponse:
    return HTMLResponse(content, status_code=status_code, headers=_PAGE_HEADERS)


def _see_other(url: str) -> RedirectResponse:
    return RedirectResponse(url, status_code=303)


def _page_path(order_id: str, suffix: str = "") -> str:
    return f"/card/pages/{order_id}{suffix}"


async def _form(request: Request) -> dict[str, str]:
    form = await request.form()
    return {name: value for name, value in form.items() if isinstance(value, str)}


def _attempt_number(form: dict[str, str]) -> int:
    value = form.get("attempt", "")
    return int(value) if value.isdigit() and len(value) < 6 else -1


@router.get("/card/pages/{order_id}", response_class=HTMLResponse, **_PAGE)  # type: ignore[arg-type]
async def payment_page(order_id: str, session: ReadSession) -> Response:
    order = await card_service.get(session, order_id)
    if card_service.is_due(order):
        return _html(
            await pages.render_closed(
                session,
                order,
                return_url=return_redirect(order, "EXPIRED"),
                message=EXPIRED_BY_TIME,
                status=CardOrderStatus.EXPIRED.value,
            )
        )
    if order.status == CardOrderStatus.AUTHENTICATING.value:
        return _see_other(_page_path(order.id, "/3ds"))
    if order.status != CardOrderStatus.PENDING.value:
        return _html(await pages.render_closed(session, order, return_url=return_redirect(order, order.status)))
    csrf = page_token(order.id, order.attempts_made + 1, "pay")
    return _html(await pages.render_payment(session, order, csrf=csrf))


@router.post("/card/pages/{order_id}/pay", **_PAGE)  # type: ignore[arg-type]
async def pay(order_id: str, request: Request, session: WriteSession) -> Response:
    form = await _form(request)
    order = await card_service.get(session, order_id)
    attempt_number = _attempt_number(form)
    if not check_page_token(order.id, attempt_number, "pay", form.get("csrf", "")):
        return await _refused(session, order, "This form is no longer valid", status=403)
    # Kept for the page after a refusal: never the card number, never the CVN.
    tenor, save_card = form.get("tenor", "0"), form.get("saveCard") == "true"
    values: dict[str, Any] = {
        "cardExpiredMonth": form.get("cardExpiredMonth", "")[:2],
        "cardExpiredYear": form.get("cardExpiredYear", "")[:4],
        "cardHolderName": form.get("cardHolderName", "").upper()[:64],
        "tenor": tenor,
        "saveCard": save_card,
    }
    try:
        card = card_from_fields(form, now=clock.local_now(), prefix="")
        order, attempt = await card_service.pay_on_page(session, order.id, attempt_number, card, tenor, save_card)
    except InvalidCard as error:
        await rollback_unit(session)
        order = await card_service.get(session, order_id)
        errors = {e.field: e.message for e in error.field_errors()}
        html = await pages.render_payment(
            session,
            order,
            csrf=form.get("csrf", ""),
            message="Check the card details and try again.",
            values=values,
            errors=errors,
        )
        return _html(html, status_code=422)
    except AttemptAlreadySubmitted:
        await rollback_unit(session)
        order = await card_service.get(session, order_id)
        return await _refused(session, order, "This payment attempt was already submitted", status=409)
    except KasirError as error:
        if isinstance(error, NotFound):
            raise
        await rollback_unit(session)
        order = await card_service.get(session, order_id)
        if order.status != CardOrderStatus.PENDING.value:
            return _see_other(_page_path(order.id))
        return await _refused(session, order, error.message, status=error.http_status)
    if order.status == CardOrderStatus.SUCCESS.value:
        return _see_other(return_redirect(order, "SUCCESS"))
    if order.status == CardOrderStatus.AUTHENTICATING.value:
        return _see_other(_page_path(order.id, "/3ds"))
    if order.status == CardOrderStatus.EXPIRED.value:
        return _see_other(return_redirect(order, "EXPIRED"))
    # Declined with attempts left: the same page, values kept, the reason said.
    csrf = page_token(order.id, order.attempts_made + 1, "pay")
    left = 3 - order.attempts_failed
    message = f"Payment failed: {attempt.response_message}. Enter the card number and CVN again ({left} left)."
    return _html(await pages.render_payment(session, order, csrf=csrf, message=message, values=values))


async def _refused(session: AsyncSession, order: Any, heading: str, *, status: int) -> HTMLResponse:
    html = await pages.render_notice(
        session,
        order,
        heading=heading,
        message="Nothing was charged by this request. Open the payment page again to see where the payment stands.",
        link=_page_path(order.id),
    )
    return _html(html, status_code=status)


@router.get("/card/pages/{order_id}/3ds", response_class=HTMLResponse, **_PAGE)  # type: ignore[arg-type]
async def otp_page(order_id: str, session: ReadSession) -> Response:
    order = await card_service.get(session, order_id)
    if order.status != CardOrderStatus.AUTHENTICATING.value or card_service.is_due(order):
        return _see_other(_page_path(order.id))
    attempt = await card_repository.attempt(session, order.id, order.attempts_made)
    assert attempt is not None
    csrf = page_token(order.id, attempt.number, "3ds")
    html = await pages.render_otp(session, order, attempt, otp=one_time_password(order.id, attempt.number), csrf=csrf)
    return _html(html)


@router.post("/card/pages/{order_id}/3ds", **_PAGE)  # type: ignore[arg-type]
async def verify_otp(order_id: str, request: Request, session: WriteSession) -> Response:
    form = await _form(request)
    order = await card_service.get(session, order_id)
    attempt_number = _attempt_number(form)
    if not check_page_token(order.id, attempt_number, "3ds", form.get("csrf", "")):
        return await _refused(session, order, "This form is no longer valid", status=403)
    try:
        order = await card_service.verify_otp(session, order.id, attempt_number, form.get("otp", ""))
    except AttemptAlreadySubmitted:
        await rollback_unit(session)
        order = await card_service.get(session, order_id)
        return await _refused(session, order, "This verification was already submitted", status=409)
    except KasirError as error:
        if isinstance(error, NotFound):
            raise
        await rollback_unit(session)
        return _see_other(_page_path(order_id))
    if order.status == CardOrderStatus.SUCCESS.value:
        return _see_other(return_redirect(order, "SUCCESS"))
    if order.status == CardOrderStatus.EXPIRED.value:
        return _see_other(return_redirect(order, "EXPIRED"))
    return _see_other(_page_path(order.id))  # wrong OTP, attempts left: the page says why
