"""Payment-link API (docs/decisions.md §10.1, §10.2): `POST /payment-page/payment` and
`GET /payment-page/payment/{transaction_id}`.

Create is `WalletSigned` (Basic + x-req-signature over external_id and order_id, `x-version: v3`) and
`Keyed` (X-Idempotency-Key), as the VA's create; an optional `sub-merchant-id` must be one of the
merchant's (`04`, 403) and signs the link's callbacks. The read is Basic only (no x-req-signature, no
x-version). Both answer `{response_code, response_message, data}` (the wallet family's codes, §4).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from kasir.auth import PUBLIC, BasicAuthenticated, WalletSigned
from kasir.config import get_settings
from kasir.db import ReadSession, Session
from kasir.errors import KasirError, NotFound, WireFormat, wire
from kasir.idempotency.service import Keyed
from kasir.kit.pages import check_form_token, form_fields, form_token, html_page
from kasir.links.pages import render_checkout, render_result, render_va
from kasir.links.repository import LinkRow
from kasir.links.schemas import CreateLinkRequest, LinkAnswer, LinkCreatedAnswer, LinkErrorBody
from kasir.links.service import (
    created_data,
    envelope,
    link_data,
    link_pages,
    link_service,
    page_path,
    payable,
)
from kasir.links.states import LinkStatus
from kasir.merchants.service import merchant_service
from kasir.processors.registry import simulator_serves
from kasir.va.endpoints import sub_merchant_of, va_route_openapi
from kasir.va.service import va_service
from kasir.wallet.endpoints import ERROR_RESPONSES as WALLET_ERRORS
from kasir.wallet.endpoints import database, parse

router = APIRouter(tags=["payment links"])

ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    **{status: {**answer, "model": LinkErrorBody} for status, answer in WALLET_ERRORS.items()},
    200: {"model": LinkCreatedAnswer, "description": "`00` Success: the payment link in `data`"},
    403: {"model": LinkErrorBody, "description": "`04`: sub-merchant-id is not one of the merchant's"},
}
_READ_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: answer for status, answer in ERROR_RESPONSES.items() if status not in (403, 409, 422)
} | {200: {"model": LinkAnswer, "description": "`00` Success: the payment link as it is now"}}
# Basic only: no x-req-signature, no x-version (the Authorization header is the merchantBasic scheme).
_BASIC_ONLY = wire(WireFormat.WALLET)


@router.post(
    "/payment-page/payment",
    summary="Create a payment link (the hosted checkout)",
    openapi_extra=va_route_openapi(CreateLinkRequest, keyed=True),
    responses=ERROR_RESPONSES,
)
async def create_link(request: Request, caller: WalletSigned, once: Keyed) -> Response:
    body = parse(CreateLinkRequest, caller.body)
    merchant = caller.merchant.merchant
    sub_merchant_id = sub_merchant_of(request)
    plan = link_service.plan(merchant, body, sub_merchant_id)
    await va_service.check_sub_merchant(database(request), merchant.id, sub_merchant_id)
    await link_service.check_callback_url(merchant, body.callback_url)  # DNS: before the unit of work

    async def create(session: Session) -> Response:
        link = await link_service.open(session, merchant, plan)
        return JSONResponse(envelope(created_data(link)))

    return await once.run(caller.merchant_id, create)


@router.get(
    "/payment-page/payment/{transaction_id}",
    summary="A payment link as it is now (the provider's order details)",
    openapi_extra=_BASIC_ONLY,
    responses=_READ_RESPONSES,
)
async def read_link(transaction_id: str, request: Request, caller: BasicAuthenticated) -> JSONResponse:
    async with database(request).unit_of_work(read_only=True) as session:
        link = await link_service.find(session, caller.merchant, transaction_id)
        return JSONResponse(envelope(link_data(link)))


# --- the customer's pages (§10.4): public, HTML, no inline script (kasir.kit.pages' headers) -------------

_PAGE: dict[str, Any] = {"openapi_extra": wire(WireFormat.PLAIN), "include_in_schema": False, "dependencies": [PUBLIC]}
CHOOSE_FORM = "link-choose"
VA_PAY_FORM = "link-va-pay"


def _see_other(url: str) -> RedirectResponse:
    return RedirectResponse(url, status_code=303)


def with_transaction_id(url: str, link_id: str) -> str:
    """The merchant's URL with `transaction_id=<id>` added to its query (Villanesia reads it)."""
    parts = urlsplit(url)
    query = [*parse_qsl(parts.query, keep_blank_values=True), ("transaction_id", link_id)]
    return urlunsplit(parts._replace(query=urlencode(query)))


async def _ended(session: Session, link: LinkRow) -> Response | None:
    """Paid: to success_redirect_url; expired: to failed_redirect_url (each with transaction_id), else Kasir's
    own result page; None while the link is payable."""
    if payable(link):
        return None
    status = link.status if link.status != LinkStatus.PENDING.value else LinkStatus.EXPIRED.value
    target = link.success_redirect_url if status == LinkStatus.SUCCESS.value else link.failed_redirect_url
    if target:
        return _see_other(with_transaction_id(target, link.id))
    merchant = await merchant_service.get(session, link.merchant_id)
    return html_page(render_result(link, merchant.name, status))


def _failure_message(link: LinkRow) -> str | None:
    if link.attempts_failed and link.response_message:
        return f"Payment failed: {link.response_message}. Choose a method to try again."
    return None


async def _checkout(session: Session, link: LinkRow, message: str | None = None, status_code: int = 200) -> Response:
    merchant = await merchant_service.get(session, link.merchant_id)
    csrf = form_token(CHOOSE_FORM, link.id)
    return html_page(
        render_checkout(link, merchant.name, csrf=csrf, message=message or _failure_message(link)),
        status_code=status_code,
    )


@router.get("/payment-page/pages/{link_id}", response_class=HTMLResponse, **_PAGE)
async def checkout_page(link_id: str, session: ReadSession) -> Response:
    link = await link_service.get(session, link_id)
    return await _ended(session, link) or await _checkout(session, link)


@router.post("/payment-page/pages/{link_id}/choose", **_PAGE)
async def choose(link_id: str, request: Request) -> Response:
    """The method chosen: its inner payment made (or the open one found again), and the customer sent to its page."""
    database_ = database(request)
    form = await form_fields(request)
    if not check_form_token(CHOOSE_FORM, link_id, form.get("csrf")):
        async with database_.unit_of_work(read_only=True) as session:
            link = await link_service.get(session, link_id)
            message = "This form did not come from this payment's page; nothing was changed. Choose again."
            return await _checkout(session, link, message, status_code=403)
    try:
        return _see_other(await link_pages.choose(database_, link_id, form))
    except KasirError as error:
        if isinstance(error, NotFound):
            raise
        async with database_.unit_of_work(read_only=True) as session:
            link = await link_service.get(session, link_id)
            if not payable(link):
                return _see_other(page_path(link_id))
            return await _checkout(
                session, link, f"This method cannot be used now: {error.message}", status_code=error.http_status
            )


@router.get("/payment-page/pages/{link_id}/va", response_class=HTMLResponse, **_PAGE)
async def va_page(link_id: str, session: ReadSession) -> Response:
    link = await link_service.get(session, link_id)
    ended = await _ended(session, link)
    if ended is not None:
        return ended
    found = await link_pages.open_va(session, link)
    if found is None:
        return _see_other(page_path(link.id))
    _attempt, va = found
    merchant = await merchant_service.get(session, link.merchant_id)
    simulated = not get_settings().is_production and simulator_serves("va", va.bank)
    token = form_token(VA_PAY_FORM, link.id)
    return html_page(render_va(link, merchant.name, va, simulated=simulated, pay_token=token))


@router.post("/payment-page/pages/{link_id}/va/pay", **_PAGE)
async def va_pay(link_id: str, request: Request) -> Response:
    """Staging (404 in production): the link's VA paid exactly its amount, as `/va/dummy-payment` would."""
    if get_settings().is_production:
        raise NotFound("Not Found")
    form = await form_fields(request)
    database_ = database(request)
    if not check_form_token(VA_PAY_FORM, link_id, form.get("csrf")):
        return _see_other(f"{page_path(link_id)}/va")
    try:
        async with database_.unit_of_work() as session:
            va = await va_service.get(session, form.get("va", ""))
            if not simulator_serves("va", va.bank):
                raise NotFound("Not Found")
            await link_pages.pay_va(session, link_id, va.id)
    except KasirError as error:
        if isinstance(error, NotFound):
            raise
        async with database_.unit_of_work(read_only=True) as session:
            link = await link_service.get(session, link_id)
            if not payable(link):  # paid another way meanwhile, or expired: its page says which
                return _see_other(page_path(link_id))
            return await _checkout(
                session, link, f"The transfer was refused: {error.message}", status_code=error.http_status
            )
    return _see_other(page_path(link_id))
