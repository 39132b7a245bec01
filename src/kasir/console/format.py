"""How the console writes times: Asia/Jakarta with their offset (money: kasir.kit.money.rupiah)."""

from __future__ import annotations

from datetime import datetime

from kasir.kit.clock import JAKARTA


def jakarta_time(moment: datetime | None) -> str:
    """`2026-11-24 14:03:05 +07:00` (WIB)."""
    if moment is None:
        return ""
    local = moment.astimezone(JAKARTA)
    return local.strftime("%Y-%m-%d %H:%M:%S ") + local.strftime("%z")[:3] + ":" + local.strftime("%z")[3:]
