from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Literal

from pydantic import BaseModel, Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from kasir.kit.fields import Moment
from kasir.payments.repository import PaymentRow


class PaymentView(BaseModel):
    product: str
    id: str
    merchant_id: str
    external_id: str | None
    order_id: str | None = Field(description="The merchant's order id; BNPL: partnerReferenceNo")
    channel: str
    status: str = Field(description="The product's own status")
    outcome: str = Field(description="pending | paid | refunded | void | expired | failed | cancelled")
    amount: Decimal = Field(description="VA: what it asks (OPEN: as sent, never enforced)")
    created_at: datetime
    updated_at: datetime
    paid_at: datetime | None = Field(description="VA: its latest payment's")
    va_number: str | None = Field(None, description="VA: the full virtual account number; null for other products")
    paid_amount: Decimal | None = Field(
        None, description="VA: the sum of its payments (total_paid_amount); null for other products"
    )
    payment_method: str | None = Field(
        None,
        description="Payment link, once paid: how (CARD, WALLET or VIRTUAL_ACCOUNT; `channel` says which); null "
        "for other products and for a link not paid",
    )

    @classmethod
    def of(cls, row: PaymentRow) -> PaymentView:
        return cls(
            product=row.product,
            id=row.id,
            merchant_id=row.merchant_id,
            external_id=row.external_id,
            order_id=row.order_id,
            channel=row.channel,
            status=row.status,
            outcome=row.outcome,
            amount=row.amount,
            created_at=row.created_at,
            updated_at=row.updated_at,
            paid_at=row.paid_at,
            va_number=row.va_number,
            paid_amount=row.paid_amount,
            payment_method=row.payment_method,
        )


class PaymentList(BaseModel):
    payments: list[PaymentView]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next (older) page; null on the last")


class ReplayRequest(BaseModel):
    target: Literal["original", "current", "url"] = Field(
        "original",
        description="`original`: the URL it was first sent to; `current`: the merchant's default callback URL; "
        "`url`: the URL given in `url`",
    )
    url: str | None = Field(
        None, max_length=2048, description="With `target: url`: where to deliver (the rules of callback URLs apply)"
    )

    @field_validator("url")
    @classmethod
    def _url_only_with_its_target(cls, url: str | None, info: ValidationInfo) -> str | None:
        # A URL beside another target would be dropped without a word: the replay would go elsewhere.
        if url is not None and info.data.get("target") != "url":
            raise PydanticCustomError("url", 'is only taken with target "url"')
        return url


class ReplayGivenUpRequest(BaseModel):
    merchant_id: str
    since: Moment = Field(description="ISO 8601 with offset: given-up callbacks recorded since then")


class ReplayedList(BaseModel):
    replayed: list[int] = Field(description="Ids of the new callbacks")
    of: list[int] = Field(description="Ids of the callbacks they replay")
