"""How the console writes values: Asia/Jakarta times with their offset, `Rp 150.000`."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from kasir.kit.clock import JAKARTA


def jakarta_time(moment: datetime | None) -> str:
    """`2026-11-24 14:03:05 +07:00` (WIB)."""
    if moment is None:
        return ""
    local = moment.astimezone(JAKARTA)
    return local.strftime("%Y-%m-%d %H:%M:%S ") + local.strftime("%z")[:3] + ":" + local.strftime("%z")[3:]


def rupiah(amount: int | Decimal | None) -> str:
    """`150000` -> `Rp 150.000`; BNPL's cents keep two decimals when they are not zero (`Rp 150.000,50`)."""
    if amount is None:
        return ""
    value = Decimal(amount)
    whole = int(value)
    text = f"{abs(whole):,}".replace(",", ".")
    cents = abs(value - whole)
    if cents:
        text += "," + f"{cents:.2f}"[2:]
    return ("-" if value < 0 else "") + "Rp " + text
