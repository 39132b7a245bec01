"""Callback delivery: deliveries per second and commit-to-receipt latency (filled in as products land)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def run_callback_benchmarks(ctx: Any, server: Any, receipts: Path, log: Path) -> dict[str, Any]:
    return {}
