"""My merchant (`/console/my-merchant`): a merchant's users look after their own merchant.

No merchant id is ever taken from the request: every route acts on the signed-in user's own merchant, so
there is none other to ask for (an operator, who has no merchant of its own, is answered 404 here and uses
`/console/merchants/{id}`). Who may do what:

    any merchant role      see its merchant id, client id and callbacks; send a test callback; replay one
                           of its own callbacks (as on /console/callbacks)
    merchant_admin only    change the default callback URL, rotate client_secret / secret / hash_key,
                           upload a new RSA public key, confirm the switch of a rotation in its grace

Changing where callbacks go and what signs them or the merchant's requests is what the merchant's admin
also does for its users (issue 41 item 4): a leaked merchant-user password then cannot take the merchant's
credentials or redirect its callbacks. Every action is audited by the services it calls; an invalid value is
answered with this page again, the field and the reason above the form.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Path, Request, Response, UploadFile
from fastapi.responses import RedirectResponse

from kasir.auth.console import CheckedMerchantAdmin, CheckedMerchantUser, MerchantUser, client_ip
from kasir.callbacks.service import IN_FLIGHT
from kasir.console.service import Viewer
from kasir.console.web import ConsoleRoute, database, render
from kasir.errors import KasirError
from kasir.kit.crypto import public_key_fingerprint
from kasir.kit.ids import INT64_MAX
from kasir.merchants.service import SIGNS_CALLBACKS, CredentialKind, MerchantError, merchant_service
from kasir.payments.repository import payments_repository
from kasir.payments.service import payment_actions
from kasir.payments.test_callbacks import SampleKind, SampleSent, send_test_callback
from kasir.payouts.service import payout_service

# Listed before the console's own router (kasir.app), whose last route answers every other /console path.
router = APIRouter(prefix="/console/my-merchant", route_class=ConsoleRoute, include_in_schema=False)

HERE = "/console/my-merchant"
DONE = {
    "callback_url": "Default callback URL saved.",
    "confirmed": "Switch confirmed: callbacks are signed with the new value from the next attempt.",
    "replayed": "Callback queued for delivery again.",
}
SECRETS = (CredentialKind.CLIENT_SECRET, CredentialKind.SECRET, CredentialKind.HASH_KEY)
FIELD_LABELS = {
    "callback_url": "Callback URL",
    "public_key": "Public key",
    "grace_seconds": "Grace period",
    "kind": "Kind",
}
RECENT_CALLBACKS = 20
RECENT_TOP_UPS = 10


async def _page(
    request: Request,
    viewer: Viewer,
    *,
    status: int = 200,
    done: str | None = None,
    error: KasirError | None = None,
    test: SampleSent | None = None,
    callback_url: str | None = None,
) -> Response:
    merchant_id = viewer.merchant_id
    assert merchant_id is not None  # merchant_user_only
    async with database(request).unit_of_work(read_only=True) as session:
        merchant = await merchant_service.get(session, merchant_id)
        grace = await merchant_service.grace(session, merchant_id)
        recent = await payments_repository.callback_queue(
            session,
            statuses=("pending", "delivering", "delivered", "failed"),
            merchant_id=merchant_id,
            kind=None,
            limit=RECENT_CALLBACKS,
        )
        balance = await payout_service.balance(session, merchant_id)
        top_ups = await payout_service.latest_top_ups(session, merchant_id, RECENT_TOP_UPS)
    # An event with a delivery in flight is not offered for replay (the service refuses it too).
    in_flight = {row.event_key for row in recent if row.status in IN_FLIGHT}
    return render(
        request,
        "my_merchant.html",
        status,
        viewer=viewer,
        m=merchant,
        public_key_sha256=public_key_fingerprint(merchant.public_key_pem),
        grace=grace,
        confirmable={kind.value for kind in SIGNS_CALLBACKS},
        recent=recent,
        in_flight=in_flight,
        secrets=SECRETS,
        test_kinds=list(SampleKind),
        done=done,
        error=None if error is None else _error_text(error),
        error_field=None if error is None else error.field,
        test=test,
        balance=balance,
        top_ups=top_ups,
        callback_url_value=callback_url if callback_url is not None else (merchant.callback_url or ""),
    )


def _error_text(error: KasirError) -> str:
    reason = getattr(error, "reason", None)  # InvalidFieldFormat keeps its reason apart from its SNAP message
    message = f"{error.field} {reason}" if reason and error.field else error.message
    label = FIELD_LABELS.get(error.field or "")
    if label and error.field and message.startswith(error.field):
        message = message[len(error.field) :].lstrip(" :")
    return f"{label}: {message}" if label else message


@router.get("")
async def my_merchant(request: Request, viewer: MerchantUser, done: str = "") -> Response:
    return await _page(request, viewer, done=DONE.get(done))


@router.post("/callback-url")
async def change_callback_url(
    request: Request, viewer: CheckedMerchantAdmin, callback_url: Annotated[str, Form(max_length=2048)] = ""
) -> Response:
    assert viewer.merchant_id is not None
    try:
        async with database(request).unit_of_work() as session:
            await merchant_service.change_callback_url(
                session, viewer.merchant_id, callback_url.strip() or None, actor=viewer.actor(client_ip(request))
            )
    except KasirError as exc:
        if exc.http_status >= 500:
            raise
        return await _page(request, viewer, status=exc.http_status, error=exc, callback_url=callback_url)
    return RedirectResponse(f"{HERE}?done=callback_url", status_code=303)


@router.post("/rotate")
async def rotate(
    request: Request,
    viewer: CheckedMerchantAdmin,
    kind: Annotated[str, Form(max_length=16)],
    grace_hours: Annotated[float, Form(ge=0, le=168)] = 24,
) -> Response:
    """A new client_secret, secret or hash_key, shown once (a public key is uploaded with its own form)."""
    try:
        chosen = CredentialKind(kind)
        if chosen not in SECRETS:
            raise ValueError(kind)
    except ValueError:
        return await _page(
            request,
            viewer,
            status=400,
            error=MerchantError("kind must be client_secret, secret or hash_key", field="kind"),
        )
    return await _rotate(request, viewer, chosen, grace_hours, None)


@router.post("/public-key")
async def upload_public_key(
    request: Request,
    viewer: CheckedMerchantAdmin,
    grace_hours: Annotated[float, Form(ge=0, le=168)] = 24,
    public_key: Annotated[str, Form(max_length=10_000)] = "",
    public_key_file: UploadFile | None = None,
) -> Response:
    """The RSA public key the merchant's token requests are verified with: pasted, or a .pem file."""
    pem = public_key.strip()
    if public_key_file is not None and public_key_file.filename:
        data = await public_key_file.read(10_001)
        if len(data) > 10_000:
            pem = "too large"  # refused below, as any text that is not a PEM public key
        else:
            pem = data.decode("utf-8", errors="replace").strip()
    if not pem:
        missing = MerchantError("paste the new PEM public key or choose its .pem file", field="public_key")
        return await _page(request, viewer, status=400, error=missing)
    return await _rotate(request, viewer, CredentialKind.PUBLIC_KEY, grace_hours, pem)


async def _rotate(
    request: Request, viewer: Viewer, kind: CredentialKind, grace_hours: float, public_key: str | None
) -> Response:
    assert viewer.merchant_id is not None
    try:
        async with database(request).unit_of_work() as session:
            rotated = await merchant_service.rotate(
                session,
                viewer.merchant_id,
                kind,
                public_key=public_key,
                grace_seconds=int(grace_hours * 3600),
                actor=viewer.actor(client_ip(request)),
            )
    except KasirError as exc:
        if exc.http_status >= 500:
            raise
        return await _page(request, viewer, status=exc.http_status, error=exc)
    return render(
        request,
        "rotated.html",
        viewer=viewer,
        rotated=rotated,
        back=HERE,
    )


@router.post("/confirm-rotation")
async def confirm_rotation(
    request: Request, viewer: CheckedMerchantAdmin, kind: Annotated[str, Form(max_length=16)]
) -> Response:
    """docs/decisions.md §12.4: the merchant verifies callbacks with the new value; sign them with it now."""
    assert viewer.merchant_id is not None
    try:
        async with database(request).unit_of_work() as session:
            await merchant_service.confirm_switch(
                session, viewer.merchant_id, _kind(kind), actor=viewer.actor(client_ip(request))
            )
    except KasirError as exc:
        if exc.http_status >= 500:
            raise
        return await _page(request, viewer, status=exc.http_status, error=exc)
    return RedirectResponse(f"{HERE}?done=confirmed", status_code=303)


def _kind(kind: str) -> CredentialKind:
    try:
        return CredentialKind(kind)
    except ValueError as exc:
        raise MerchantError("kind must be hash_key or client_secret", field="kind") from exc


@router.post("/test-callback")
async def send_test(
    request: Request, viewer: CheckedMerchantUser, kind: Annotated[str, Form(max_length=16)] = "wallet"
) -> Response:
    """One test callback of `kind` to the default callback URL, sent now; the page shows how it went."""
    assert viewer.merchant_id is not None
    try:
        chosen = SampleKind(kind)
    except ValueError:
        wrong = MerchantError("kind must be wallet, card or bnpl", field="kind")
        return await _page(request, viewer, status=400, error=wrong)
    try:
        sent = await send_test_callback(database(request), viewer.merchant_id, chosen, viewer.actor(client_ip(request)))
    except KasirError as exc:
        if exc.http_status >= 500:
            raise
        return await _page(request, viewer, status=exc.http_status, error=exc)
    return await _page(request, viewer, test=sent)


@router.post("/callbacks/{callback_id}/replay")
async def replay(
    request: Request,
    callback_id: Annotated[int, Path(ge=1, le=INT64_MAX)],
    viewer: CheckedMerchantUser,
) -> Response:
    """Deliver one of the merchant's own callbacks again, to the URL it was sent to (the payments' replay)."""
    try:
        async with database(request).unit_of_work() as session:
            await payment_actions.replay(
                session, viewer.merchant_id, callback_id, "original", viewer.actor(client_ip(request))
            )
    except KasirError as exc:
        if exc.http_status >= 500 or exc.http_status == 404:
            raise  # another merchant's callback: answered as one that does not exist
        return await _page(request, viewer, status=exc.http_status, error=exc)
    return RedirectResponse(f"{HERE}?done=replayed", status_code=303)
