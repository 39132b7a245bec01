"""The server process's garbage collector: start-up objects frozen, cycles collected less often than CPython's
default (kasir.app's lifespan; bench/results/2026-11-25-gc.md)."""

from __future__ import annotations

import gc

from fastapi import FastAPI

from kasir.app import GC_THRESHOLDS


async def test_a_started_app_freezes_its_start_up_objects_and_collects_young_objects_less_often(app: FastAPI) -> None:
    assert gc.get_threshold() == GC_THRESHOLDS
    assert GC_THRESHOLDS[0] > 700  # CPython's default young-generation threshold
    assert gc.get_freeze_count() > 0
