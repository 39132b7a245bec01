"""Admin API of merchants (Bearer KASIR_ADMIN_TOKEN): decisions.md §2's other way to create one."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from kasir.admin import require_admin
from kasir.db import ReadSession, WriteSession
from kasir.kit.crypto import public_key_fingerprint
from kasir.merchants.models import Merchant
from kasir.merchants.schemas import MerchantCreate, MerchantCreated, MerchantKey, MerchantList, MerchantView
from kasir.merchants.service import merchant_service

router = APIRouter(prefix="/admin/merchants", tags=["admin"], dependencies=[Depends(require_admin)])


def _view(merchant: Merchant) -> MerchantView:
    return MerchantView(
        merchant_id=merchant.id,
        name=merchant.name,
        client_id=merchant.client_id,
        callback_url=merchant.callback_url,
        public_key_sha256=public_key_fingerprint(merchant.public_key_pem),
        created_at=merchant.created_at,
        updated_at=merchant.updated_at,
    )


@router.post("", status_code=201, summary="Create a merchant; the answer holds its secrets, shown once")
async def create_merchant(body: MerchantCreate, session: WriteSession) -> MerchantCreated:
    merchant, credentials = await merchant_service.create(
        session, name=body.name, public_key=body.public_key, callback_url=body.callback_url
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
async def rotate_key(merchant_id: str, body: MerchantKey, session: WriteSession) -> MerchantView:
    return _view(await merchant_service.rotate_key(session, merchant_id, body.public_key))
