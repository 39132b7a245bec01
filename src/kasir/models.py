"""Imports every room's models so `Base.metadata` knows all tables (Alembic, tests)."""

from __future__ import annotations

import importlib

ROOMS_WITH_MODELS = ("merchants",)


def import_all_models() -> None:
    for room in ROOMS_WITH_MODELS:
        importlib.import_module(f"kasir.{room}.models")
