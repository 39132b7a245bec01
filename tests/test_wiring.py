"""The explicit lists (kasir.app's routers, kasir.models, kasir.jobs) name every room that has the file:
a room whose endpoints.py, models.py or jobs.py is missing from its list would be silently left out."""

from __future__ import annotations

import importlib
from pathlib import Path

import kasir
from kasir import app, jobs, models
from kasir.config import Settings
from kasir.products import declare_products

SRC = Path(kasir.__file__).parent


def _rooms_with(file_name: str) -> list[str]:
    return sorted(path.parent.name for path in SRC.glob(f"*/{file_name}") if path.parent.name != "db")


def test_every_rooms_models_are_in_kasir_models() -> None:
    listed = {module.__name__ for module in models.MODELS}
    assert {f"kasir.{room}.models" for room in _rooms_with("models.py")} <= listed


def test_every_rooms_jobs_are_in_kasir_jobs() -> None:
    for room in _rooms_with("jobs.py"):
        declared = importlib.import_module(f"kasir.{room}.jobs").JOBS
        assert declared, room
        assert set(declared) <= set(jobs.JOBS), room


def test_every_rooms_router_is_included() -> None:
    """The simulator's router is a processor plug-in's (`Processor.router()`), included when it is configured."""
    declare_products()
    included = [
        *app.product_routers(Settings(console=True)),
        *app.processor_routers(),
        app.token_router,
        app.ops_router,
    ]
    for room in _rooms_with("endpoints.py"):
        router = importlib.import_module(f"kasir.{room}.endpoints").router
        assert any(router is listed for listed in included), room
