"""The console's pages (`/console/...`): thin, one service call each, rendered with Jinja2.

Every route checks the viewer on the server: merchant users see only their merchant
(anything else answers 404, as if it did not exist), operators see everything; merchant and
audit pages are operators' only. Every state-changing request carries the session's CSRF token.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Form, Path, Query, Request, Response
from fastapi.responses import FileResponse, RedirectResponse, StreamingResponse

from kasir.audit.service import audit
from kasir.auth.console import (
    COOKIE,
    Checked,
    CheckedOperator,
    CheckedUserManager,
    Operator,
    SignedIn,
    SignIn,
    UserManager,
    client_ip,
)
from kasir.auth.scheme import PUBLIC
from kasir.callbacks.models import CallbackKind
from kasir.config import get_settings
from kasir.console.charts import overview_charts, trend_charts
from kasir.console.models import Role
from kasir.console.service import AccountLocked, NotYours, SignInRefused, Viewer, console_sessions, console_users
from kasir.console.service import SignedIn as NewSession
from kasir.console.web import SIGN_IN_CSRF_COOKIE, STATIC, ConsoleRoute, database, render
from kasir.db import Database, ReadSession, Session, WriteSession
from kasir.errors import BadRequest
from kasir.kit.clock import clock, parse_aware
from kasir.kit.crypto import constant_time_equals, generate_rsa_private_key, private_key_pem, public_key_pem
from kasir.kit.ids import INT32_MAX, INT64_MAX
from kasir.merchants.service import CredentialKind, merchant_service
from kasir.payments.repository import OUTCOME_NAMES, PRODUCTS
from kasir.payments.service import parse_filter as payment_filter
from kasir.payments.service import payment_actions, payments_service
from kasir.payouts.reports import TransferFilter, payout_reports
from kasir.payouts.reports import parse_filter as payout_filter
from kasir.payouts.schemas import AMOUNT_MAX
from kasir.payouts.service import payout_service
from kasir.payouts.states import DESCRIPTIONS, TransferStatus
from kasir.ratelimit.service import AuthenticationLocked
from kasir.staging import staging_only

# An export's page after a position (None: from the start), and the position after it (None: the last page).
CsvPageReader = Callable[[Session, Any], Awaitable[tuple[str, Any]]]

router = APIRouter(prefix="/console", route_class=ConsoleRoute, include_in_schema=False)

DONE = {
    "refunded": "Refund recorded; the merchant's callback is on its way.",
    "voided": "Payment voided; the merchant's callback is on its way.",
    "simulated": "Simulated; the merchant's callback is on its way.",
    "cancelled": "Virtual account cancelled: it takes no more payments; the merchant's callback is on its way.",
    "replayed": "Callback queued for delivery again.",
    "callback_url": "Default callback URL changed.",
    "disabled": "Merchant disabled: its credentials and tokens are refused; pending callbacks still go out.",
    "enabled": "Merchant enabled.",
    "confirmed": "Switch confirmed: the merchant's callbacks are signed with the new value from the next attempt.",
    "user_disabled": "User disabled: its sessions ended at once.",
    "user_enabled": "User enabled.",
    "user_unlocked": "User unlocked: it may sign in again.",
    "topped_up": "Disbursement balance topped up (audited); the merchant's history shows it as TOP_UP.",
}
RECENT_TOP_UPS = 10
STATIC_TYPES = {".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml", ".txt": "text/plain"}


# --- signing in and out ------------------------------------------------------------------


_TOO_MANY_SIGN_INS = "Too many failed sign-ins from this address. Please try again later."


@router.get("/sign-in", dependencies=[PUBLIC])
async def sign_in_page(request: Request, next: str = "/console/overview") -> Response:  # noqa: A002
    token = secrets.token_urlsafe(24)
    response = render(request, "sign_in.html", csrf_token=token, next=_local(next))
    _sign_in_cookie(response, token)
    return response


@router.post("/sign-in")
async def sign_in(
    request: Request,
    signer: SignIn,
    email: Annotated[str, Form(max_length=254)],
    password: Annotated[str, Form(max_length=1024)],
    csrf_token: Annotated[str, Form(max_length=64)] = "",
    next: Annotated[str, Form(max_length=2048)] = "/console/overview",  # noqa: A002
) -> Response:
    expected = request.cookies.get(SIGN_IN_CSRF_COOKIE, "")
    headers: dict[str, str] = {}
    if not expected or not constant_time_equals(expected, csrf_token):
        error, status = "This form has expired. Please try again.", 403
    else:
        try:
            ip = client_ip(request)
            signed_in = await signer.sign_in(request, lambda: _sign_in(database(request), email, password, ip))
        except AuthenticationLocked as exc:
            error, status, headers = _TOO_MANY_SIGN_INS, exc.http_status, exc.headers
        except (SignInRefused, AccountLocked) as exc:
            error, status, headers = exc.message, exc.http_status, exc.headers
        else:
            redirect = RedirectResponse(_local(next), status_code=303)
            redirect.set_cookie(
                COOKIE,
                signed_in.token,
                max_age=signed_in.max_age,
                path="/console",
                httponly=True,
                secure=get_settings().console_cookie_secure,
                samesite="lax",
            )
            redirect.delete_cookie(SIGN_IN_CSRF_COOKIE, path="/console/sign-in")
            return redirect
    token = secrets.token_urlsafe(24)
    response = render(request, "sign_in.html", status, csrf_token=token, next=_local(next), email=email, error=error)
    response.headers.update(headers)
    _sign_in_cookie(response, token)
    return response


async def _sign_in(database: Database, email: str, password: str, ip: str | None) -> NewSession:
    """A new session, or SignInRefused / AccountLocked: each step in a short unit of its own, the password
    verified between them, never inside one (kasir.console.service.ConsoleSessionService)."""
    async with database.unit_of_work(read_only=True) as session:
        signing_in = await console_sessions.signing_in(session, email)
    checked = await console_sessions.check_password(signing_in, password)
    if not checked.right:
        async with database.unit_of_work() as session:
            failed = await console_sessions.record_failure(session, checked, ip)
        await console_sessions.refuse(failed)
    async with database.unit_of_work() as session:
        return await console_sessions.start_session(session, checked, ip)


def _sign_in_cookie(response: Response, token: str) -> None:
    response.set_cookie(
        SIGN_IN_CSRF_COOKIE,
        token,
        path="/console/sign-in",
        httponly=True,
        secure=get_settings().console_cookie_secure,
        samesite="strict",
    )


def _local(target: str) -> str:
    """Only a path of the console itself (no open redirect)."""
    if not target.startswith("/console/") or target.startswith("//") or "\\" in target:
        return "/console/overview"
    return target


@router.post("/sign-out")
async def sign_out(request: Request, viewer: Checked, session: WriteSession) -> Response:
    await console_sessions.sign_out(session, viewer, client_ip(request))
    response = RedirectResponse("/console/sign-in?signed_out=1", status_code=303)
    response.delete_cookie(COOKIE, path="/console")
    return response


@router.get("", dependencies=[PUBLIC])
@router.get("/", dependencies=[PUBLIC])
async def home() -> Response:
    return RedirectResponse("/console/overview", status_code=303)


# --- overview ------------------------------------------------------------------------------


@router.get("/overview")
async def overview(
    request: Request, viewer: SignedIn, session: ReadSession, period: str = "today", days: int = 7
) -> Response:
    numbers = await payments_service.overview(session, viewer.scope, period, days)
    name = "overview_panel.html" if "hx-request" in request.headers else "overview.html"
    return render(request, name, viewer=viewer, o=numbers, charts=overview_charts(numbers), trend=trend_charts(numbers))


# --- payments --------------------------------------------------------------------------------


@router.get("/payments")
async def payments(
    request: Request,
    viewer: SignedIn,
    session: ReadSession,
    q: str = "",
    product: str = "",
    status: str = "",
    channel: str = "",
    merchant: str = "",
    since: str = "",
    until: str = "",
    cursor: str = "",
) -> Response:
    filters = {
        "q": q,
        "product": product,
        "status": status,
        "channel": channel,
        "merchant": merchant,
        "since": since,
        "until": until,
    }
    where = payment_filter(
        scope=viewer.scope,
        merchant_id=merchant,
        product=product,
        status=status,
        channel=channel,
        since=since,
        until=until,
        query=q,
    )
    page = await payments_service.list(session, where, cursor=cursor or None)
    if q and len(page.rows) == 1 and not cursor and "hx-request" not in request.headers:
        return RedirectResponse(f"/console/payments/{page.rows[0].id}", status_code=303)  # found it
    query = urlencode({k: v for k, v in filters.items() if v})
    name = "payment_rows.html" if "hx-request" in request.headers else "payments.html"
    names = (
        await payments_service.merchant_names(session, (r.merchant_id for r in page.rows)) if viewer.is_operator else {}
    )
    return render(
        request,
        name,
        viewer=viewer,
        page=page,
        names=names,
        filters=filters,
        query=query,
        cursor=cursor,
        products=PRODUCTS,
        outcomes=OUTCOME_NAMES,
    )


@router.get("/payments.csv")
async def payments_csv(
    request: Request,
    viewer: SignedIn,
    q: str = "",
    product: str = "",
    status: str = "",
    channel: str = "",
    merchant: str = "",
    since: str = "",
    until: str = "",
) -> Response:
    where = payment_filter(
        scope=viewer.scope,
        merchant_id=merchant,
        product=product,
        status=status,
        channel=channel,
        since=since,
        until=until,
        query=q,
    )
    return _csv_download(
        database(request),
        "payments",
        payments_service.csv_header(),
        lambda session, after: payments_service.csv_page(session, where, after),
    )


def _csv_download(database: Database, name: str, header: str, read_page: CsvPageReader) -> StreamingResponse:
    """An export streamed a page at a time, each page read in a short read-only unit of its own: `read_page`
    answers the page after a position and the next position (None: that was the last)."""

    async def pages() -> AsyncIterator[str]:
        yield header
        after = None
        while True:
            async with database.unit_of_work(read_only=True) as session:
                page, after = await read_page(session, after)
            if page:
                yield page
            if after is None:
                return

    stamp = clock.local_now().strftime("%Y%m%d-%H%M%S")
    return StreamingResponse(
        pages(),
        media_type="text/csv; charset=utf-8",
        headers={
            "content-disposition": f'attachment; filename="kasir-{name}-{stamp}.csv"',
            "cache-control": "no-store",
        },
    )


@router.get("/payments/{payment_id}")
async def payment(
    request: Request, payment_id: str, viewer: SignedIn, session: ReadSession, done: str = ""
) -> Response:
    detail = await payments_service.detail(session, viewer.scope, payment_id)
    name = "payment_live.html" if "hx-request" in request.headers else "payment.html"
    return render(request, name, viewer=viewer, d=detail, done=DONE.get(done))


@router.post("/payments/{payment_id}/refund")
async def refund(
    request: Request,
    payment_id: str,
    viewer: Checked,
    amount: Annotated[int, Form(ge=1)],
    reason: Annotated[str, Form(max_length=255)] = "",
    confirmed: Annotated[str, Form()] = "",
) -> Response:
    if confirmed != "yes":
        # The second look (issue 41): the amount, the payment and what is left after, before anything moves.
        async with database(request).unit_of_work(read_only=True) as session:
            review = await payment_actions.review_refund(session, viewer.scope, payment_id, amount, reason or None)
        return render(request, "confirm_refund.html", viewer=viewer, r=review)
    async with database(request).unit_of_work() as session:
        held = await payment_actions.refund(
            session, viewer.scope, payment_id, amount, reason or None, viewer.actor(client_ip(request))
        )
    await held.complete(database(request))
    return _back(payment_id, "refunded")


@router.post("/payments/{payment_id}/void")
async def void(request: Request, payment_id: str, viewer: Checked, confirmed: Annotated[str, Form()] = "") -> Response:
    if confirmed != "yes":
        async with database(request).unit_of_work(read_only=True) as session:
            row = await payment_actions.review_void(session, viewer.scope, payment_id)
        return render(request, "confirm_void.html", viewer=viewer, row=row)
    async with database(request).unit_of_work() as session:
        held = await payment_actions.void(session, viewer.scope, payment_id, viewer.actor(client_ip(request)))
    await held.complete(database(request))
    return _back(payment_id, "voided")


@router.post("/payments/{payment_id}/simulate")
async def simulate(
    request: Request,
    payment_id: str,
    viewer: Checked,
    session: WriteSession,
    outcome: Annotated[str, Form(pattern="^(pay|fail|expire)$")],
    amount: Annotated[str, Form(max_length=20)] = "",
) -> Response:
    staging_only()
    await payment_actions.simulate(
        session, viewer.scope, payment_id, outcome, viewer.actor(client_ip(request)), amount=_rupiah_field(amount)
    )
    return _back(payment_id, "simulated")


@router.post("/payments/{payment_id}/cancel")
async def cancel(
    request: Request, payment_id: str, viewer: Checked, confirmed: Annotated[str, Form()] = ""
) -> Response:
    if confirmed != "yes":
        async with database(request).unit_of_work(read_only=True) as session:
            va = await payment_actions.review_cancel(session, viewer.scope, payment_id)
        return render(request, "confirm_cancel.html", viewer=viewer, va=va)
    async with database(request).unit_of_work() as session:
        await payment_actions.cancel(session, viewer.scope, payment_id, viewer.actor(client_ip(request)))
    return _back(payment_id, "cancelled")


def _rupiah_field(text: str) -> int | None:
    """A whole-rupiah form field (a VA's simulated payment); empty: none given."""
    value = text.strip()
    if not value:
        return None
    if not value.isdigit() or len(value) > 13:
        raise BadRequest("amount must be whole rupiah", field="amount")
    return int(value)


def _back(payment_id: str, done: str) -> Response:
    return RedirectResponse(f"/console/payments/{payment_id}?done={done}", status_code=303)


# --- payouts (docs/decisions.md §11): transfers, newest first; merchant users see their own --------------------

PAYOUT_BADGES = {"01": "pending", "03": "pending", "00": "paid", "06": "failed", "04": "failed", "05": "failed"}


def _payout_filter(viewer: Viewer, q: str, status: str, merchant: str, since: str, until: str) -> TransferFilter:
    return payout_filter(scope=viewer.scope, merchant_id=merchant, status=status, query=q, since=since, until=until)


@router.get("/payouts")
async def payouts(
    request: Request,
    viewer: SignedIn,
    session: ReadSession,
    q: str = "",
    status: str = "",
    merchant: str = "",
    since: str = "",
    until: str = "",
    cursor: str = "",
) -> Response:
    filters = {"q": q, "status": status, "merchant": merchant, "since": since, "until": until}
    where = _payout_filter(viewer, q, status, merchant, since, until)
    page = await payout_reports.list(session, where, cursor or None)
    if q and len(page.rows) == 1 and not cursor:
        return RedirectResponse(f"/console/payouts/{page.rows[0].id}", status_code=303)  # found it
    # Merchant users see their own balance here; an operator, the balance of the merchant filtered on.
    owner = viewer.scope or (merchant.strip() if merchant.strip() else None)
    balance, top_ups = None, []
    if owner and not where.matches_nothing:
        balance = await payout_service.balance(session, owner)
        top_ups = await payout_service.latest_top_ups(session, owner, RECENT_TOP_UPS)
    names = (
        await payments_service.merchant_names(session, (r.merchant_id for r in page.rows)) if viewer.is_operator else {}
    )
    return render(
        request,
        "payouts.html",
        viewer=viewer,
        page=page,
        names=names,
        filters=filters,
        query=urlencode({k: v for k, v in filters.items() if v}),
        states=[(s, DESCRIPTIONS[s]) for s in TransferStatus],
        badges=PAYOUT_BADGES,
        balance=balance,
        top_ups=top_ups,
    )


@router.get("/payouts.csv")
async def payouts_csv(
    request: Request,
    viewer: SignedIn,
    q: str = "",
    status: str = "",
    merchant: str = "",
    since: str = "",
    until: str = "",
) -> Response:
    where = _payout_filter(viewer, q, status, merchant, since, until)
    return _csv_download(
        database(request),
        "payouts",
        payout_reports.csv_header(),
        lambda session, after: payout_reports.csv_page(session, where, after),
    )


@router.get("/payouts/{transfer_id}")
async def payout(
    request: Request, transfer_id: str, viewer: SignedIn, session: ReadSession, done: str = ""
) -> Response:
    detail = await payout_reports.detail(session, viewer.scope, transfer_id)
    names = await payments_service.merchant_names(session, [detail.row.merchant_id])
    return render(
        request,
        "payout.html",
        viewer=viewer,
        d=detail,
        badges=PAYOUT_BADGES,
        descriptions={status.value: words for status, words in DESCRIPTIONS.items()},
        done=DONE.get(done),
        merchant_name=names.get(detail.row.merchant_id, ""),
    )


# --- callbacks ---------------------------------------------------------------------------------

QUEUES = {
    "pending": ("pending", "delivering"),
    "retrying": ("pending", "delivering"),
    "given_up": ("failed",),
    "delivered": ("delivered",),
}


@router.get("/callbacks")
async def callbacks(
    request: Request,
    viewer: SignedIn,
    session: ReadSession,
    state: str = "given_up",
    merchant: str = "",
    product: str = "",
    before: Annotated[int | None, Query(ge=1, le=INT64_MAX)] = None,
    done: str = "",
) -> Response:
    if state not in QUEUES:
        raise BadRequest("state must be pending, retrying, given_up or delivered", field="state")
    kinds = {
        "wallet": CallbackKind.WALLET.value,
        "card": CallbackKind.PAYMENT_PAGE.value,
        "bnpl": CallbackKind.BNPL.value,
        "va": CallbackKind.VA.value,
        "link": CallbackKind.PAYMENT_PAGE.value,  # a link's callbacks are payment-page callbacks (§10.5)
        "payout": CallbackKind.PAYOUT.value,
    }
    from kasir.payments.repository import payments_repository

    merchant_id = viewer.scope or merchant or None
    if viewer.scope and merchant and merchant != viewer.scope:
        raise NotYours()
    rows = await payments_repository.callback_queue(
        session,
        statuses=QUEUES[state],
        merchant_id=merchant_id,
        kind=kinds.get(product),
        retrying_only=state == "retrying",
        before_id=before,
        limit=50,
    )
    if state == "pending":
        rows = [row for row in rows if row.attempts_made == 0]
    merchants = await merchant_service.list(session) if viewer.is_operator else []
    return render(
        request,
        "callbacks.html",
        viewer=viewer,
        rows=rows,
        state=state,
        merchant=merchant,
        product=product,
        merchants=merchants,
        names={m.id: m.name for m in merchants},  # the filter's list, already read: no query per row
        now=clock.now(),
        done=DONE.get(done),
        next_before=rows[-1].id if len(rows) == 50 else None,
    )


@router.post("/callbacks/{callback_id}/replay")
async def replay(
    request: Request,
    callback_id: Annotated[int, Path(ge=1, le=INT64_MAX)],
    viewer: Checked,
    session: WriteSession,
    target: Annotated[str, Form(pattern="^(original|current)$")] = "original",
) -> Response:
    replayed = await payment_actions.replay(
        session, viewer.scope, callback_id, target, viewer.actor(client_ip(request))
    )
    room = "payouts" if replayed.kind == CallbackKind.PAYOUT.value else "payments"  # a transfer's notification
    return RedirectResponse(f"/console/{room}/{replayed.transaction_ref}?done=replayed", status_code=303)


@router.post("/callbacks/replay-given-up")
async def replay_given_up(
    request: Request,
    viewer: Checked,
    session: WriteSession,
    merchant: Annotated[str, Form(max_length=32)],
    since: Annotated[str, Form(max_length=40)],
    confirmed: Annotated[str, Form()] = "",
) -> Response:
    moment = _since(since)
    if confirmed != "yes":
        from kasir.payments.repository import payments_repository

        if viewer.scope is not None and merchant != viewer.scope:
            raise NotYours()
        waiting = await payments_repository.given_up_since(session, merchant, moment)
        return render(request, "confirm_replay.html", viewer=viewer, merchant=merchant, since=since, count=len(waiting))
    replays = await payment_actions.replay_given_up(
        session, viewer.scope, merchant, moment, viewer.actor(client_ip(request))
    )
    return render(request, "replayed.html", viewer=viewer, merchant=merchant, replays=replays)


def _since(text: str) -> datetime:
    value = text.strip()
    try:
        if len(value) == 16:  # an <input type="datetime-local">: Asia/Jakarta
            value += ":00+07:00"
        elif len(value) == 10:
            value += "T00:00:00+07:00"
        return parse_aware(value)
    except ValueError as exc:
        raise BadRequest("since must be a date and time", field="since") from exc


# --- merchants (operators) ------------------------------------------------------------------------


@router.get("/merchants")
async def merchants(request: Request, viewer: Operator, session: ReadSession) -> Response:
    rows = await merchant_service.list(session)
    return render(request, "merchants.html", viewer=viewer, merchants=rows)


@router.get("/merchants/new")
async def new_merchant(request: Request, viewer: Operator) -> Response:
    return render(request, "merchant_new.html", viewer=viewer)


@router.post("/merchants")
async def create_merchant(
    request: Request,
    viewer: CheckedOperator,
    session: WriteSession,
    name: Annotated[str, Form(max_length=100)],
    callback_url: Annotated[str, Form(max_length=2048)] = "",
    public_key: Annotated[str, Form(max_length=10_000)] = "",
    key: Annotated[str, Form(pattern="^(upload|generate)$")] = "generate",
) -> Response:
    private_pem = None
    if key == "generate":
        private = generate_rsa_private_key()
        public_key, private_pem = public_key_pem(private.public_key()).decode(), private_key_pem(private).decode()
    merchant, credentials = await merchant_service.create(
        session,
        name=name,
        public_key=public_key,
        callback_url=callback_url or None,
        actor=viewer.actor(client_ip(request)),
    )
    return render(
        request,
        "merchant_created.html",
        viewer=viewer,
        merchant=merchant,
        credentials=credentials,
        private_pem=private_pem,
    )


@router.get("/merchants/{merchant_id}")
async def merchant(
    request: Request, merchant_id: str, viewer: Operator, session: ReadSession, done: str = ""
) -> Response:
    row = await merchant_service.get(session, merchant_id)
    grace = await merchant_service.grace(session, merchant_id)
    events = await audit.search(session, merchant_id=merchant_id, limit=20)
    return render(
        request,
        "merchant.html",
        viewer=viewer,
        m=row,
        grace=grace,
        events=events,
        balance=await payout_service.balance(session, merchant_id),
        top_ups=await payout_service.latest_top_ups(session, merchant_id, RECENT_TOP_UPS),
        names={row.id: row.name},
        done=DONE.get(done),
        kinds=list(CredentialKind),
    )


@router.post("/merchants/{merchant_id}/callback-url")
async def change_callback_url(
    request: Request,
    merchant_id: str,
    viewer: CheckedOperator,
    session: WriteSession,
    callback_url: Annotated[str, Form(max_length=2048)] = "",
) -> Response:
    await merchant_service.change_callback_url(
        session, merchant_id, callback_url or None, actor=viewer.actor(client_ip(request))
    )
    return RedirectResponse(f"/console/merchants/{merchant_id}?done=callback_url", status_code=303)


@router.post("/merchants/{merchant_id}/top-up")
async def top_up(
    request: Request,
    merchant_id: str,
    viewer: CheckedOperator,
    amount: Annotated[int, Form(ge=1, le=AMOUNT_MAX)],
    note: Annotated[str, Form(min_length=1, max_length=255)],
    confirmed: Annotated[str, Form()] = "",
) -> Response:
    """docs/decisions.md §11.3: the operator credits a merchant's disbursement balance, through the admin API's
    service (audited); a second look first, as a refund has: money credited here cannot be taken back."""
    if not note.strip() or not note.isprintable():  # the admin API's rule (TopUpRequest)
        raise BadRequest("note must be printable text, not blank", field="note")
    if confirmed != "yes":
        async with database(request).unit_of_work(read_only=True) as session:
            row = await merchant_service.get(session, merchant_id)
            balance = await payout_service.balance(session, merchant_id)
        return render(request, "confirm_top_up.html", viewer=viewer, m=row, balance=balance, amount=amount, note=note)
    async with database(request).unit_of_work() as session:
        await payout_service.top_up(session, merchant_id, amount, note, viewer.actor(client_ip(request)))
    return RedirectResponse(f"/console/merchants/{merchant_id}?done=topped_up#balance-h", status_code=303)


@router.post("/merchants/{merchant_id}/rotate")
async def rotate(
    request: Request,
    merchant_id: str,
    viewer: CheckedOperator,
    session: WriteSession,
    kind: Annotated[CredentialKind, Form()],
    grace_hours: Annotated[float, Form(ge=0, le=168)] = 0,
    public_key: Annotated[str, Form(max_length=10_000)] = "",
) -> Response:
    rotated = await merchant_service.rotate(
        session,
        merchant_id,
        kind,
        public_key=public_key or None,
        grace_seconds=int(grace_hours * 3600),
        actor=viewer.actor(client_ip(request)),
    )
    return render(request, "rotated.html", viewer=viewer, rotated=rotated)


@router.post("/merchants/{merchant_id}/confirm-rotation")
async def confirm_rotation(
    request: Request,
    merchant_id: str,
    viewer: CheckedOperator,
    session: WriteSession,
    kind: Annotated[CredentialKind, Form()],
) -> Response:
    """docs/decisions.md §12.4: the merchant verifies callbacks with the new value (the admin API's service)."""
    await merchant_service.confirm_switch(session, merchant_id, kind, actor=viewer.actor(client_ip(request)))
    return RedirectResponse(f"/console/merchants/{merchant_id}?done=confirmed", status_code=303)


@router.post("/merchants/{merchant_id}/disable")
async def disable(
    request: Request,
    merchant_id: str,
    viewer: CheckedOperator,
    session: WriteSession,
    confirmed: Annotated[str, Form()] = "",
) -> Response:
    if confirmed != "yes":
        row = await merchant_service.get(session, merchant_id)
        return render(request, "confirm_disable.html", viewer=viewer, m=row)
    await merchant_service.set_disabled(session, merchant_id, True, actor=viewer.actor(client_ip(request)))
    return RedirectResponse(f"/console/merchants/{merchant_id}?done=disabled", status_code=303)


@router.post("/merchants/{merchant_id}/enable")
async def enable(request: Request, merchant_id: str, viewer: CheckedOperator, session: WriteSession) -> Response:
    await merchant_service.set_disabled(session, merchant_id, False, actor=viewer.actor(client_ip(request)))
    return RedirectResponse(f"/console/merchants/{merchant_id}?done=enabled", status_code=303)


# --- console users (operators: every user; a merchant's admin: its own merchant's) ----------------------------

# As its Integer column can hold it (console_user.id), checked before the query (kasir.console.admin.UserId).
UserId = Annotated[int, Path(ge=1, le=INT32_MAX)]


def _roles(viewer: Viewer) -> list[str]:
    """The roles this viewer may give: a merchant's admin never makes an operator."""
    return [role.value for role in Role if viewer.is_operator or role.of_a_merchant]


@router.get("/users")
async def users(request: Request, viewer: UserManager, session: ReadSession, done: str = "") -> Response:
    entries = await console_users.entries(session, viewer.scope)
    merchants = await merchant_service.list(session) if viewer.is_operator else []
    return render(
        request,
        "users.html",
        viewer=viewer,
        entries=entries,
        merchants=merchants,
        roles=_roles(viewer),
        done=DONE.get(done),
    )


@router.post("/users")
async def create_user(
    request: Request,
    viewer: CheckedUserManager,
    session: WriteSession,
    email: Annotated[str, Form(max_length=254)],
    role: Annotated[str, Form(max_length=16)],
    merchant: Annotated[str, Form(max_length=32)] = "",
) -> Response:
    user, password = await console_users.create(
        session,
        email=email,
        role=role,
        merchant_id=merchant or None,
        actor=viewer.actor(client_ip(request)),
        within=viewer.scope,
    )
    return render(request, "user_password.html", viewer=viewer, user=user, password=password, created=True)


@router.post("/users/{user_id}/reset-password")
async def reset_user_password(
    request: Request, user_id: UserId, viewer: CheckedUserManager, session: WriteSession
) -> Response:
    user, password = await console_users.reset_password(
        session, user_id, actor=viewer.actor(client_ip(request)), within=viewer.scope
    )
    return render(request, "user_password.html", viewer=viewer, user=user, password=password, created=False)


@router.post("/users/{user_id}/disable")
async def disable_user(
    request: Request, user_id: UserId, viewer: CheckedUserManager, session: WriteSession
) -> Response:
    await console_users.set_disabled(
        session, user_id, True, actor=viewer.actor(client_ip(request)), within=viewer.scope
    )
    return RedirectResponse("/console/users?done=user_disabled", status_code=303)


@router.post("/users/{user_id}/enable")
async def enable_user(request: Request, user_id: UserId, viewer: CheckedUserManager, session: WriteSession) -> Response:
    await console_users.set_disabled(
        session, user_id, False, actor=viewer.actor(client_ip(request)), within=viewer.scope
    )
    return RedirectResponse("/console/users?done=user_enabled", status_code=303)


@router.post("/users/{user_id}/unlock")
async def unlock_user(request: Request, user_id: UserId, viewer: CheckedUserManager, session: WriteSession) -> Response:
    await console_users.unlock(session, user_id, actor=viewer.actor(client_ip(request)), within=viewer.scope)
    return RedirectResponse("/console/users?done=user_unlocked", status_code=303)


# --- audit log (operators) ---------------------------------------------------------------------------


@router.get("/audit")
async def audit_log(
    request: Request,
    viewer: Operator,
    session: ReadSession,
    merchant: str = "",
    action: str = "",
    before: Annotated[int | None, Query(ge=1, le=INT64_MAX)] = None,
) -> Response:
    events = await audit.search(
        session, merchant_id=merchant or None, action=action or None, before_id=before, limit=50
    )
    return render(
        request,
        "audit.html",
        viewer=viewer,
        events=events,
        names=await payments_service.merchant_names(session, (e.merchant_id for e in events)),
        merchant=merchant,
        action=action,
        next_before=events[-1].id if len(events) == 50 else None,
    )


# --- static files and everything else ------------------------------------------------------------------


@router.get("/static/{name}", dependencies=[PUBLIC])
async def static(name: str) -> Response:
    path = STATIC / name
    if "/" in name or name.startswith(".") or path.suffix not in STATIC_TYPES or not path.is_file():
        raise NotYours()
    return FileResponse(path, media_type=STATIC_TYPES[path.suffix], headers={"cache-control": "public, max-age=3600"})


@router.api_route("/{anything:path}", methods=["GET", "POST"], dependencies=[PUBLIC])
async def not_found(anything: str, request: Request) -> Response:
    raise NotYours()
