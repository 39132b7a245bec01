"""Disbursement bodies of the admin API (docs/decisions.md §11.3): figures are JSON integers of whole rupiah."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StrictInt, field_validator

AMOUNT_MAX = 9_999_999_999_999  # 13 digits, as every product's amounts


class TopUpRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    amount: Annotated[StrictInt, Field(ge=1, le=AMOUNT_MAX, description="Whole rupiah, a JSON integer")]
    note: Annotated[str, Field(min_length=1, max_length=255, description="Why: shown in the history (remark)")]

    @field_validator("note")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip() or not value.isprintable():
            raise ValueError("must be printable text, not blank")
        return value


class DisbursementBalanceView(BaseModel):
    merchant_id: str
    account_no: str | None
    available: int
    hold: int
    ledger: int


class TopUpView(BaseModel):
    top_up_id: int
    merchant_id: str
    amount: int
    available: int
    hold: int
    ledger: int
    created_at: datetime
