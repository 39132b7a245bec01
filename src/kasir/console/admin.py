"""Admin API of console users (Bearer KASIR_ADMIN_TOKEN): `kasir user ...` over HTTP. Every change is audited."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Request

from kasir.audit.service import Actor
from kasir.auth.admin import ADMIN
from kasir.console.schemas import UserCreate, UserList, UserPassword, UserView, UserWithPassword
from kasir.console.service import console_users
from kasir.db import ReadSession, WriteSession
from kasir.kit.ids import INT32_MAX

router = APIRouter(prefix="/admin/users", tags=["admin"], dependencies=[ADMIN])
# A user's id as its column can hold it (console_user.id is an Integer): checked before the query, as an id
# beyond it was a 500 (OverflowError on SQLite past int64, DataError on PostgreSQL past int32).
UserId = Annotated[int, Path(ge=1, le=INT32_MAX)]


def actor(request: Request) -> Actor:
    return Actor.admin_api(request.client.host if request.client else None)


_EMAIL_TAKEN: dict[int | str, dict[str, Any]] = {
    409: {
        "description": "Conflict: a console user has this e-mail already",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/PlainErrorBody"}}},
    }
}


@router.post(
    "",
    status_code=201,
    summary="Create a console user; the answer holds its password, shown once",
    responses=_EMAIL_TAKEN,
)
async def create_user(body: UserCreate, request: Request, session: WriteSession) -> UserWithPassword:
    user, password = await console_users.create(
        session,
        email=body.email,
        role=body.role,
        merchant_id=body.merchant_id,
        password=body.password,
        actor=actor(request),
    )
    return UserWithPassword(**UserView.of(user).model_dump(), password=password)


@router.get("", summary="List console users")
async def list_users(session: ReadSession) -> UserList:
    return UserList(users=[UserView.of(user) for user in await console_users.list(session)])


@router.post("/{user_id}/disable", summary="Disable a console user; its sessions end at once")
async def disable_user(user_id: UserId, request: Request, session: WriteSession) -> UserView:
    return UserView.of(await console_users.set_disabled(session, user_id, True, actor=actor(request)))


@router.post("/{user_id}/enable", summary="Enable a console user again")
async def enable_user(user_id: UserId, request: Request, session: WriteSession) -> UserView:
    return UserView.of(await console_users.set_disabled(session, user_id, False, actor=actor(request)))


@router.post("/{user_id}/unlock", summary="Lift a sign-in lock (too many failures in a row) before it ends")
async def unlock_user(user_id: UserId, request: Request, session: WriteSession) -> UserView:
    return UserView.of(await console_users.unlock(session, user_id, actor=actor(request)))


@router.post("/{user_id}/reset-password", summary="A new password, shown once; the user's sessions end")
async def reset_password(
    user_id: UserId, body: UserPassword, request: Request, session: WriteSession
) -> UserWithPassword:
    user, password = await console_users.reset_password(session, user_id, body.password, actor=actor(request))
    return UserWithPassword(**UserView.of(user).model_dump(), password=password)
