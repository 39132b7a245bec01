"""Admin API of merchants (Bearer KASIR_ADMIN_TOKEN): docs/decisions.md §2's other way to create one."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from kasir.audit.service import Actor
from kasir.auth.admin import ADMIN
from kasir.db import ReadSession, WriteSession
from kasir.errors import BadRequest
from kasir.kit.crypto import public_key_fingerprint
from kasir.merchants.repository import MerchantRow, SubMerchantRow
from kasir.merchants.schemas import (
    MerchantCallbackUrl,
    MerchantConfirmSwitch,
    MerchantCreate,
    MerchantCreated,
    MerchantKey,
    MerchantList,
    MerchantRotate,
    MerchantRotated,
    MerchantSwitchConfirmed,
    MerchantView,
    SubMerchantCreate,
    SubMerchantList,
    SubMerchantView,
)
from kasir.merchants.service import CredentialKind, merchant_service

router = APIRouter(prefix="/admin/merchants", tags=["admin"], dependencies=[ADMIN])


def _view(merchant: MerchantRow) -> MerchantView:
    return MerchantView(
        merchant_id=merchant.id,
        name=merchant.name,
        client_id=merchant.client_id,
        callback_url=merchant.callback_url,
        public_key_sha256=public_key_fingerprint(merchant.public_key_pem),
        created_at=merchant.created_at,
        updated_at=merchant.updated_at,
        disabled=merchant.disabled_at is not None,
        account_no=merchant.account_no,
    )


def actor(request: Request) -> Actor:
    return Actor.admin_api(request.client.host if request.client else None)


_NAME_TAKEN: dict[int | str, dict[str, Any]] = {
    409: {
        "description": "Conflict: a merchant has this name already",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/PlainErrorBody"}}},
    }
}


@router.post(
    "",
    status_code=201,
    summary="Create a merchant; the answer holds its secrets, shown once",
    responses=_NAME_TAKEN,
)
async def create_merchant(body: MerchantCreate, request: Request, session: WriteSession) -> MerchantCreated:
    merchant, credentials = await merchant_service.create(
        session, name=body.name, public_key=body.public_key, callback_url=body.callback_url, actor=actor(request)
    )
    return MerchantCreated(
        **_view(merchant).model_dump(),
        client_secret=credentials.client_secret,
        secret=credentials.secret,
        hash_key=credentials.hash_key,
    )


@router.get("", summary="List merchants (no secrets)")
async def list_merchants(session: ReadSession) -> MerchantList:
    return MerchantList(merchants=[_view(m) for m in await merchant_service.list(session)])


@router.get("/{merchant_id}", summary="One merchant (no secrets)")
async def show_merchant(merchant_id: str, session: ReadSession) -> MerchantView:
    return _view(await merchant_service.get(session, merchant_id))


@router.post("/{merchant_id}/rotate-key", summary="Replace the merchant's RSA public key")
async def rotate_key(merchant_id: str, body: MerchantKey, request: Request, session: WriteSession) -> MerchantView:
    merchant = await merchant_service.rotate_key(
        session, merchant_id, body.public_key, grace_seconds=body.grace_seconds, actor=actor(request)
    )
    return _view(merchant)


@router.post("/{merchant_id}/rotate", summary="Rotate one credential; the answer holds the new value, shown once")
async def rotate(merchant_id: str, body: MerchantRotate, request: Request, session: WriteSession) -> MerchantRotated:
    try:
        kind = CredentialKind(body.kind)
    except ValueError as exc:
        raise BadRequest("kind must be client_secret, secret, hash_key or public_key", field="kind") from exc
    rotated = await merchant_service.rotate(
        session, merchant_id, kind, public_key=body.public_key, grace_seconds=body.grace_seconds, actor=actor(request)
    )
    return MerchantRotated(
        merchant_id=rotated.merchant_id,
        kind=rotated.kind.value,
        new_value=rotated.new_value,
        old_accepted_until=rotated.old_accepted_until,
    )


_NOTHING_TO_CONFIRM: dict[int | str, dict[str, Any]] = {
    409: {
        "description": "No replaced value of that credential is in its grace period",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/PlainErrorBody"}}},
    }
}


@router.post(
    "/{merchant_id}/confirm-rotation",
    summary="The merchant verifies callbacks with the rotated hash_key or client_secret: sign them with it from now",
    responses=_NOTHING_TO_CONFIRM,
)
async def confirm_rotation(
    merchant_id: str, body: MerchantConfirmSwitch, request: Request, session: WriteSession
) -> MerchantSwitchConfirmed:
    try:
        kind = CredentialKind(body.kind)
    except ValueError as exc:
        raise BadRequest("kind must be hash_key or client_secret", field="kind") from exc
    confirmed_at = await merchant_service.confirm_switch(session, merchant_id, kind, actor=actor(request))
    return MerchantSwitchConfirmed(merchant_id=merchant_id, kind=kind.value, confirmed_at=confirmed_at)


@router.post("/{merchant_id}/callback-url", summary="Change the default callback URL (SSRF rules apply)")
async def change_callback_url(
    merchant_id: str, body: MerchantCallbackUrl, request: Request, session: WriteSession
) -> MerchantView:
    merchant = await merchant_service.change_callback_url(
        session, merchant_id, body.callback_url or None, actor=actor(request)
    )
    return _view(merchant)


@router.post("/{merchant_id}/disable", summary="Disable: credentials and tokens refused (401), callbacks still go out")
async def disable(merchant_id: str, request: Request, session: WriteSession) -> MerchantView:
    return _view(await merchant_service.set_disabled(session, merchant_id, True, actor=actor(request)))


@router.post("/{merchant_id}/enable", summary="Enable a disabled merchant")
async def enable(merchant_id: str, request: Request, session: WriteSession) -> MerchantView:
    return _view(await merchant_service.set_disabled(session, merchant_id, False, actor=actor(request)))


# --- sub-merchants: the ids the card dialect's `sub-merchant-id` may name ----------------------


def _sub_view(sub_merchant: SubMerchantRow) -> SubMerchantView:
    return SubMerchantView(
        sub_merchant_id=sub_merchant.sub_merchant_id, name=sub_merchant.name, created_at=sub_merchant.created_at
    )


@router.get("/{merchant_id}/sub-merchants", summary="The merchant's sub-merchant ids")
async def list_sub_merchants(merchant_id: str, session: ReadSession) -> SubMerchantList:
    found = await merchant_service.sub_merchants(session, merchant_id)
    return SubMerchantList(merchant_id=merchant_id, sub_merchants=[_sub_view(s) for s in found])


_TAKEN: dict[int | str, dict[str, Any]] = {
    409: {
        "description": "Conflict: the merchant has this sub-merchant id already",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/PlainErrorBody"}}},
    }
}


@router.post("/{merchant_id}/sub-merchants", status_code=201, summary="Add a sub-merchant id", responses=_TAKEN)
async def add_sub_merchant(
    merchant_id: str, body: SubMerchantCreate, request: Request, session: WriteSession
) -> SubMerchantView:
    added = await merchant_service.add_sub_merchant(
        session, merchant_id, body.sub_merchant_id, body.name, actor=actor(request)
    )
    return _sub_view(added)


@router.delete("/{merchant_id}/sub-merchants/{sub_merchant_id}", status_code=204, summary="Remove a sub-merchant id")
async def remove_sub_merchant(merchant_id: str, sub_merchant_id: str, request: Request, session: WriteSession) -> None:
    await merchant_service.remove_sub_merchant(session, merchant_id, sub_merchant_id, actor=actor(request))
