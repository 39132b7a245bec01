"""Imports every room's models so `Base.metadata` knows all tables (Alembic, tests)."""

from __future__ import annotations

import importlib
import importlib.util

# Every room with a models.py; a new room is found without editing this file.
ROOMS = (
    "merchants", "callbacks", "idempotency", "wallet", "bnpl", "card", "processors", "audit", "payments", "console",
    "ratelimit",
)  # fmt: skip


def import_all_models() -> None:
    for room in ROOMS:
        if importlib.util.find_spec(f"kasir.{room}.models") is not None:
            importlib.import_module(f"kasir.{room}.models")
