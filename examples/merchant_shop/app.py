"""A merchant's shop: orders paid through Kasir, updated from verified callbacks.

Settings (environment): KASIR_URL, SHOP_URL (where Kasir reaches this app), SHOP_CREDENTIALS
(credentials.json of the merchant), SHOP_PRIVATE_KEY, SHOP_DB (SQLite file, default shop.db).
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, closing
from typing import Any, Literal

from fastapi import FastAPI, HTTPException, Request
from kasir_client import AsyncClient, Credentials, SignatureError, verify_bnpl_notification
from pydantic import BaseModel, Field

# Order states move forward only; a callback that would move one backwards is ignored.
FINAL = {"paid", "failed", "expired"}
BNPL_STATUS = {"00": "paid", "06": "failed", "05": "expired"}


class OrderRequest(BaseModel):
    method: Literal["bnpl"]
    amount: int = Field(gt=0, description="Whole rupiah")


def create_app(*, kasir_url: str, shop_url: str, credentials: Credentials, db_path: str = "shop.db") -> FastAPI:
    kasir = AsyncClient(kasir_url, credentials)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        await kasir.aclose()

    app = FastAPI(title="Example shop", lifespan=lifespan)

    def db() -> sqlite3.Connection:
        connection = sqlite3.connect(db_path, isolation_level=None)
        connection.row_factory = sqlite3.Row
        return connection

    with closing(db()) as connection:
        connection.execute(
            "CREATE TABLE IF NOT EXISTS shop_order (id INTEGER PRIMARY KEY, method TEXT, amount INTEGER,"
            " reference TEXT UNIQUE, kasir_reference TEXT, status TEXT, pay_url TEXT)"
        )
        connection.execute("CREATE TABLE IF NOT EXISTS seen_callback (callback_id TEXT PRIMARY KEY)")

    def order_by_reference(reference: str) -> sqlite3.Row | None:
        with closing(db()) as connection:
            return connection.execute("SELECT * FROM shop_order WHERE reference = ?", (reference,)).fetchone()

    def advance(reference: str, status: str, callback_id: str | None) -> None:
        """Idempotent: a duplicate callback, or one after a final state, changes nothing."""
        with closing(db()) as connection:
            connection.execute("BEGIN IMMEDIATE")
            if callback_id is not None:
                if connection.execute("SELECT 1 FROM seen_callback WHERE callback_id = ?", (callback_id,)).fetchone():
                    connection.execute("ROLLBACK")
                    return
                connection.execute("INSERT INTO seen_callback VALUES (?)", (callback_id,))
            connection.execute(
                "UPDATE shop_order SET status = ? WHERE reference = ? AND status NOT IN ('paid','failed','expired')",
                (status, reference),
            )
            connection.execute("COMMIT")

    @app.post("/orders", status_code=201)
    async def create_order(order: OrderRequest) -> dict[str, Any]:
        reference = f"SHOP-{uuid.uuid4().hex[:16]}"
        amount = f"{order.amount}.00"
        created = await kasir.bnpl_checkout(
            {
                "partnerReferenceNo": reference,
                "paymentDetails": {"amount": {"value": amount, "currency": "IDR"}},
                "itemDetails": [
                    {
                        "itemId": "SKU-1",
                        "name": "Sepatu lari",
                        "amount": {"value": amount, "currency": "IDR"},
                        "category": "FASH",
                        "qty": 1,
                    }
                ],
                "customerDetails": {"firstName": "Budi", "email": "budi@example.com", "phone": "081234567890"},
                "callbackUrl": f"{shop_url}/callbacks/bnpl",
            }
        )
        with closing(db()) as connection:
            cursor = connection.execute(
                "INSERT INTO shop_order (method, amount, reference, kasir_reference, status, pay_url)"
                " VALUES (?, ?, ?, ?, 'pending', ?)",
                (order.method, order.amount, reference, created.reference_no, created.qr_content),
            )
        return {"id": cursor.lastrowid, "reference": reference, "status": "pending", "pay_url": created.qr_content}

    @app.get("/orders/{order_id}")
    async def show_order(order_id: int) -> dict[str, Any]:
        with closing(db()) as connection:
            row = connection.execute("SELECT * FROM shop_order WHERE id = ?", (order_id,)).fetchone()
        if row is None:
            raise HTTPException(404, "no such order")
        return dict(row)

    @app.post("/callbacks/bnpl")
    async def bnpl_callback(request: Request) -> dict[str, str]:
        body = await request.body()
        try:
            event = verify_bnpl_notification(
                body,
                dict(request.headers),
                client_secret=credentials.client_secret,
                callback_url=f"{shop_url}/callbacks/bnpl",
                merchant_id=credentials.merchant_id,
                hash_key=credentials.hash_key,  # its svc-signature as well
            )
        except SignatureError as exc:
            raise HTTPException(401, "bad signature") from exc
        order = order_by_reference(event.original_partner_reference_no)
        if order is None or order["kasir_reference"] != event.original_reference_no:
            raise HTTPException(404, "unknown order")
        # The notification's HMAC covers its body, amount included: still, the amount is checked
        # against our own order (the wallet's and payment page's signatures would not cover it).
        if event.amount is not None and event.amount != order["amount"]:
            raise HTTPException(409, "the notification's amount is not this order's")
        if event.latest_transaction_status in BNPL_STATUS:
            advance(order["reference"], BNPL_STATUS[event.latest_transaction_status], event.callback_id)
        return {"message": "ok"}

    return app


def app_from_environment() -> FastAPI:
    return create_app(
        kasir_url=os.environ["KASIR_URL"],
        shop_url=os.environ["SHOP_URL"],
        credentials=Credentials.from_files(os.environ["SHOP_CREDENTIALS"], os.environ["SHOP_PRIVATE_KEY"]),
        db_path=os.environ.get("SHOP_DB", "shop.db"),
    )


app = app_from_environment() if "SHOP_CREDENTIALS" in os.environ else None
