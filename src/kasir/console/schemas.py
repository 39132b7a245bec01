from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from kasir.console.repository import ConsoleUserRow


class UserCreate(BaseModel):
    email: str = Field(max_length=254)
    role: str = Field(description="operator | merchant | merchant_admin")
    merchant_id: str | None = Field(None, description="The merchant a merchant user (or merchant admin) sees")
    password: str | None = Field(None, description="At least 12 characters; generated when absent")


class UserPassword(BaseModel):
    password: str | None = Field(None, description="At least 12 characters; generated when absent")


class UserView(BaseModel):
    id: int
    email: str
    role: str
    merchant_id: str | None
    disabled: bool
    locked_until: datetime | None
    created_at: datetime
    last_sign_in_at: datetime | None

    @classmethod
    def of(cls, user: ConsoleUserRow) -> UserView:
        return cls(
            id=user.id,
            email=user.email,
            role=user.role,
            merchant_id=user.merchant_id,
            disabled=user.disabled_at is not None,
            locked_until=user.locked_until,
            created_at=user.created_at,
            last_sign_in_at=user.last_sign_in_at,
        )


class UserWithPassword(UserView):
    """Shown once: the password is not readable again."""

    password: str


class UserList(BaseModel):
    users: list[UserView]
