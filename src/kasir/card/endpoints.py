"""Card routes: the charge API (interface.md endpoint 6) and the hosted payment page.

    POST /card-v2/v1/charge               Basic auth, X-Idempotency-Key; card error format
    POST /card-v2/inquiry                 the provider SDK's card inquiry (inquiry_endpoints.py)
    GET  /card/pages/{id}                 hosted payment page (or the paid / closed page)
    POST /card/pages/{id}/pay             one attempt with the card entered on the page
    GET  /card/pages/{id}/return          back from the acquirer's 3-D Secure challenge

The pages are the product's, in staging and production: the card goes to the configured
acquirer (kasir.processors), which may send the customer to a challenge and back. The
simulator's challenge page is the simulator's own (kasir.simulator).

The charge has one path on every database and setting: authenticate (`CardCharger`: Basic, or
Basic + x-req-signature for the provider SDK's dialect, kasir.auth), parse (400 for the request's
fields, 422 for the card's), check the callback URL (DNS: before any unit of work), then one
unit of work through the idempotency room (`Keyed`, kasir.idempotency), which claims the key,
runs the charge in a savepoint and keeps its answer, a 2xx or a 4xx, with the key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from pydantic import BaseModel, ConfigDict, RootModel

from kasir.auth import PUBLIC, Authenticator, BasicCaller, OneOf, WalletCaller, basic, wallet_signature
from kasir.card import pages
from kasir.card.attempts import EXPIRED_BY_TIME
from kasir.card.dialect import DialectChargeRequest, response_type_of
from kasir.card.dialect_endpoints import (
    DIALECT_CHARGE_HEADERS,
    RESPONSE_TYPE_HEADER,
    DialectChargeResponse,
    dialect_charge,
    dialect_router,
    speaks_dialect,
)
from kasir.card.inquiry_endpoints import inquiry_router
from kasir.card.page_links import check_page_token, page_token, return_redirect
from kasir.card.schemas import (
    CHARGE_ANSWER_EXAMPLE,
    CardErrorBody,
    CardValidationError,
    ChargeRequest,
    ChargeResponse,
)
from kasir.card.service import AttemptAlreadySubmitted, InvalidCard, card_from_fields, card_service, charge_body
from kasir.card.states import CardOrderClosed, CardOrderStatus
from kasir.config import get_settings
from kasir.db import ReadSession, Session
from kasir.errors import FieldError, KasirError, NotFound, WireFormat, speak, wire
from kasir.idempotency.service import KEY_HEADER, Keyed
from kasir.kit.clock import clock
from kasir.kit.pages import form_fields, html_page
from kasir.processors.calls import CallInProgress, PendingCall
from kasir.processors.registry import card_acquirer, page_of
from kasir.snap.openapi import one_of, one_of_body
from kasir.wallet.schemas import WalletErrorBody

router = APIRouter(tags=["card"])

CHARGE_PATH = "/card-v2/v1/charge"
_SCOPE = f"POST {CHARGE_PATH}"  # the X-Idempotency-Key's scope
_CARD = wire(WireFormat.CARD)
_CHARGE_OPENAPI = {
    **_CARD,
    # The body is read raw (its hash keys idempotency); its schema is documented from the models: Kasir's
    # camelCase charge or the provider SDK's snake_case one, as the body's keys say (docs/decisions.md §12.3).
    "requestBody": one_of_body(
        "CardChargeBody",
        "Kasir's camelCase card charge (CardChargeRequest) or the provider SDK's snake_case charge "
        "(DialectChargeRequest, docs/merchant/card-dialect.md): a body with external_id, payment_details or "
        "card_details is the SDK's, answered in its format (DialectChargeResponse, WalletErrorBody).",
        ChargeRequest,
        DialectChargeRequest,
    ),
    "parameters": [
        {"name": "Authorization", "in": "header", "required": True, "schema": {"type": "string"}},
        {"name": KEY_HEADER, "in": "header", "required": False, "schema": {"type": "string", "maxLength": 255}},
        *DIALECT_CHARGE_HEADERS,
    ],
}


class CardChargeAnswer(RootModel[ChargeResponse | DialectChargeResponse]):
    """The charge's answer in the request's API: camelCase (ChargeResponse) or the SDK's (DialectChargeResponse)."""

    model_config = ConfigDict(json_schema_extra=one_of)


class CardChargeError(RootModel[CardErrorBody | WalletErrorBody]):
    """A refused charge in the request's API's format: camelCase (CardErrorBody) or the SDK's (WalletErrorBody)."""

    model_config = ConfigDict(json_schema_extra=one_of)


# Named examples, one per API: a documentation page shows the first alternative's example otherwise.
_ANSWER_EXAMPLES = {
    "camelCase": {
        "summary": "Kasir's card API",
        "value": CHARGE_ANSWER_EXAMPLE,
    },
    "sdk": {
        "summary": "The provider SDK's dialect, with response-type: url",
        "value": {
            "response_code": "00",
            "response_message": "Success",
            "data": {"link": "https://kasir.example/card/pages/CARD2611230001ABCD"},
        },
    },
}


def _error_responses() -> dict[int | str, dict[str, Any]]:
    # Each status in the camelCase format, then in the SDK dialect's (the wallet API's codes).
    described: dict[int, tuple[type[BaseModel], str]] = {
        400: (CardChargeError, "VALIDATION_ERROR; the SDK's `01`: names the field and the reason"),
        401: (CardChargeError, "UNAUTHORIZED; the SDK's `04`: credentials, x-req-signature or a disabled merchant"),
        403: (WalletErrorBody, "The SDK's `04`: sub-merchant-id is not one of the merchant's"),
        409: (CardChargeError, "DUPLICATE_ORDER or REQUEST_IN_PROGRESS; the SDK's `03`"),
        422: (CardChargeError, "INVALID_CARD or IDEMPOTENCY_KEY_REUSED; the SDK's `01`: the key reused"),
        429: (
            CardChargeError,
            "TOO_MANY_REQUESTS (the SDK's `04`): too many failed authentications from this address; retry after "
            "Retry-After",
        ),
        500: (CardChargeError, "INTERNAL_ERROR; the SDK's `98` (with Retry-After: unavailable; retry after it)"),
        503: (CardErrorBody, "SERVICE_UNAVAILABLE"),
    }
    return {status: {"model": model, "description": text} for status, (model, text) in described.items()}


async def _charge_scheme(request: Request) -> Authenticator[Any]:
    """The provider SDK's snake_case charge (its body's keys, docs/decisions.md §12.3) is the wallet API's
    scheme and speaks its error format; any other body is the camelCase charge: Basic, once its Content-Type
    is JSON, whatever `x-version` or `x-req-signature` it carries."""
    if speaks_dialect(request, await request.body()):
        speak(request, WireFormat.WALLET)  # every error of this request in the wallet format
        return wallet_signature
    _require_json(request)
    return basic


card_charger = OneOf(_charge_scheme, (basic, wallet_signature))
CardCharger = Annotated[BasicCaller | WalletCaller, Depends(card_charger)]


async def _dialect_answer(request: Request, caller: CardCharger) -> str | None:
    """The dialect's answer kind (its response-type header, checked after its signature); None for camelCase."""
    return response_type_of(request.headers.get(RESPONSE_TYPE_HEADER)) if isinstance(caller, WalletCaller) else None


@router.post(
    CHARGE_PATH,
    summary="Card charge",
    openapi_extra=_CHARGE_OPENAPI,
    responses={
        200: {
            "model": CardChargeAnswer,
            "description": "The payment's page: `data.link` (camelCase), or the SDK's `data.html` or `data.link`",
            "content": {"application/json": {"examples": _ANSWER_EXAMPLES}},
        },
        **_error_responses(),
    },
)
async def charge(
    request: Request,
    caller: CardCharger,
    answer_kind: Annotated[str | None, Depends(_dialect_answer)],
    once: Keyed,
) -> Response:
    if isinstance(caller, WalletCaller):  # the provider SDK's snake_case charge
        return await dialect_charge(request, caller, once, answer_kind or "html", scope=_SCOPE, cvn_required=True)
    charge_request, card = card_service.parse(await request.body())
    await card_service.check_callback_url(caller, charge_request)
    card_service.require_processor(charge_request)

    async def charge_in(session: Session) -> Response | PendingCall:
        outcome = await card_service.charge(session, caller, charge_request, card)
        return outcome if isinstance(outcome, PendingCall) else JSONResponse(charge_body(outcome))

    return await once.run(caller.merchant.id, charge_in, scope=_SCOPE)


# The provider SDK's direct charges (its charge is the route above) and its inquiry.
router.include_router(dialect_router)
router.include_router(inquiry_router)


def _require_json(request: Request) -> None:
    """interface.md endpoint 6: Content-Type application/json is required (issue 26), as on the other routes."""
    content_type = request.headers.get("content-type")
    if content_type is None or not content_type.strip():
        raise CardValidationError([FieldError("Content-Type", "is required (application/json)")])
    if content_type.split(";", 1)[0].strip().lower() != "application/json":
        raise CardValidationError([FieldError("Content-Type", "must be application/json")])


# --- the hosted payment page ----------------------------------------------------------------

_PLAIN = wire(WireFormat.PLAIN)


def _card_is_live() -> None:
    page_of("card")


# The pages of a switched-off product are not served (404), as the staging-only pages were in production.
_PAGE = {"openapi_extra": _PLAIN, "include_in_schema": False, "dependencies": [PUBLIC, Depends(_card_is_live)]}


_STATIC = Path(pages.__file__).parent / "static"
_SCRIPTS = {path.name: path.read_bytes() for path in _STATIC.glob("*.js")}


@router.get("/card/static/{name}", include_in_schema=False, dependencies=[PUBLIC])
async def page_script(name: str) -> Response:
    """The pages' scripts, files of the package: the pages' Content-Security-Policy allows no inline script."""
    script = _SCRIPTS.get(name)
    if script is None:
        raise NotFound("Not Found")
    return Response(script, media_type="text/javascript", headers={"Cache-Control": "public, max-age=3600"})


def _see_other(url: str) -> RedirectResponse:
    return RedirectResponse(url, status_code=303)


def _same_site(url: str) -> str:
    """A URL on Kasir's own public URL as its path (a redirect within the site); others unchanged."""
    base = get_settings().public_url
    return url[len(base) :] if url.startswith(base + "/") else url


def _page_path(order_id: str, suffix: str = "") -> str:
    return f"/card/pages/{order_id}{suffix}"


@router.get("/card/pages/{order_id}", response_class=HTMLResponse, **_PAGE)  # type: ignore[arg-type]
async def payment_page(order_id: str, session: ReadSession) -> Response:
    order = await card_service.get(session, order_id)
    if card_service.is_due(order):
        return html_page(
            await pages.render_closed(
                session,
                order,
                return_url=return_redirect(order, "EXPIRED"),
                message=EXPIRED_BY_TIME,
                status=CardOrderStatus.EXPIRED.value,
            )
        )
    if order.status == CardOrderStatus.AUTHENTICATING.value:
        # Back to the challenge the acquirer is waiting on (its URL, as the acquirer gave it).
        _order, waiting = await card_service.challenge(session, order.id)
        if waiting is not None and waiting.challenge_url:
            return _see_other(_same_site(waiting.challenge_url))
    if order.status != CardOrderStatus.PENDING.value:
        return html_page(await pages.render_closed(session, order, return_url=return_redirect(order, order.status)))
    csrf = page_token(order.id, order.attempts_made + 1, "pay")
    return html_page(await pages.render_payment(session, order, csrf=csrf))


class _StaleForm(Exception):
    """The form's token is not this attempt's (another tab paid, or the form is not the page's)."""


@router.post("/card/pages/{order_id}/pay", **_PAGE)  # type: ignore[arg-type]
async def pay(order_id: str, request: Request) -> Response:
    """One attempt: held in one unit of work, asked of the acquirer with none open, recorded in a
    second (kasir.processors.calls); the customer is sent on by what was recorded."""
    database = request.app.state.database
    form = await form_fields(request)
    attempt_number = pages.attempt_number(form)
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
        async with database.unit_of_work() as session:
            order = await card_service.get(session, order_id)
            if not check_page_token(order.id, attempt_number, "pay", form.get("csrf", "")):
                raise _StaleForm()
            card = card_from_fields(_page_card_fields(form), now=clock.local_now(), prefix="")
            save_card = save_card and pages.offers_save_card(order)
            pending = await card_service.pay_on_page(session, order.id, attempt_number, card, tenor, save_card)
            await pending.hold(session, None)
        order, attempt, _decision = (await pending.complete(database)).recorded
    except _StaleForm:
        return await _refused_now(database, order_id, "This form is no longer valid", status=403)
    except InvalidCard as error:
        errors = {e.field: e.message for e in error.field_errors()}
        async with database.unit_of_work(read_only=True) as session:
            order = await card_service.get(session, order_id)
            html = await pages.render_payment(
                session,
                order,
                csrf=form.get("csrf", ""),
                message="Check the card details and try again.",
                values=values,
                errors=errors,
            )
        return html_page(html, status_code=422)
    except (AttemptAlreadySubmitted, CallInProgress):
        return await _refused_now(database, order_id, "This payment attempt was already submitted", status=409)
    except KasirError as error:
        if isinstance(error, NotFound):
            raise
        async with database.unit_of_work(read_only=True) as session:
            order = await card_service.get(session, order_id)
            if order.status != CardOrderStatus.PENDING.value:
                return _see_other(_page_path(order.id))
        return await _refused_now(database, order_id, error.message, status=error.http_status)
    if order.status == CardOrderStatus.SUCCESS.value:
        return _see_other(return_redirect(order, "SUCCESS"))
    if order.status == CardOrderStatus.AUTHENTICATING.value:
        redirect = attempt.challenge_url
        return _see_other(_same_site(redirect) if redirect else _page_path(order.id))
    if order.status == CardOrderStatus.EXPIRED.value:
        return _see_other(return_redirect(order, "EXPIRED"))
    # Declined with attempts left: the same page, values kept, the reason said.
    csrf = page_token(order.id, order.attempts_made + 1, "pay")
    left = 3 - order.attempts_failed
    message = f"Payment failed: {attempt.response_message}. Enter the card number and CVN again ({left} left)."
    async with database.unit_of_work(read_only=True) as session:
        html = await pages.render_payment(session, order, csrf=csrf, message=message, values=values)
    return html_page(html)


async def _refused_now(database: Any, order_id: str, heading: str, *, status: int) -> HTMLResponse:
    async with database.unit_of_work(read_only=True) as session:
        order = await card_service.get(session, order_id)
        return await _refused(session, order, heading, status=status)


def _page_card_fields(form: dict[str, str]) -> dict[str, str]:
    """The page's own form takes a month typed as one digit (`9`); the API wants two (`09`)."""
    month = form.get("cardExpiredMonth", "").strip()
    if len(month) == 1 and month.isascii() and month.isdigit():
        return {**form, "cardExpiredMonth": "0" + month}
    return {**form, "cardExpiredMonth": month}


async def _refused(session: Session, order: Any, heading: str, *, status: int) -> HTMLResponse:
    return html_page(await pages.render_refusal(session, order, heading), status_code=status)


@router.get("/card/pages/{order_id}/return", **_PAGE)  # type: ignore[arg-type]
async def challenge_return(order_id: str, request: Request) -> Response:
    """Back from the acquirer's challenge: ask it the result (before any unit of work: it is the
    network), record it in one unit, and send the customer on (the merchant's returnUrl, or the
    page again with the reason when attempts are left)."""
    database = request.app.state.database
    attempt_number = pages.attempt_number(dict(request.query_params))
    async with database.unit_of_work(read_only=True) as session:
        order, attempt = await card_service.challenge(session, order_id)
    if attempt is None or attempt.number != attempt_number:
        return _see_other(_after_challenge(order))  # finished already (the acquirer's notification came first)
    params = {name: value for name, value in request.query_params.items() if name != "attempt"}
    decision = await card_acquirer(order.payment_channel).complete_challenge(order.id, attempt.number, params)
    try:
        async with database.unit_of_work() as session:
            order = await card_service.finish_challenge(session, order.id, attempt.number, decision)
    except (AttemptAlreadySubmitted, CardOrderClosed):
        return _see_other(_page_path(order_id))
    return _see_other(_after_challenge(order))


def _after_challenge(order: Any) -> str:
    if order.status == CardOrderStatus.SUCCESS.value:
        return return_redirect(order, "SUCCESS")
    if order.status == CardOrderStatus.EXPIRED.value:
        return return_redirect(order, "EXPIRED")
    return _page_path(order.id)  # a failed challenge with attempts left, or still at the challenge
