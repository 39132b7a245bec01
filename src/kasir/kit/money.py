"""Money is Decimal or integer rupiah; float never touches an amount."""

from __future__ import annotations

import re
from decimal import ROUND_CEILING, ROUND_HALF_UP, Decimal

CENT = Decimal("0.01")
RUPIAH = Decimal("1")

# "16,2" as SQL's DECIMAL(16,2) (issue 26): at most 16 digits in all, 2 of them decimals, so at most
# 14 before the point; exactly two after.
SNAP_AMOUNT_PATTERN = r"^(0|[1-9][0-9]{0,13})\.[0-9]{2}$"
SNAP_AMOUNT_RULE = "at most 16 digits in all, 2 of them decimals (14 before the point), like 10000.00"
_SNAP_AMOUNT = re.compile(SNAP_AMOUNT_PATTERN)


def parse_snap_amount(value: str) -> Decimal:
    """Parse `"10000.00"`; raises ValueError on anything not of the 16,2 form."""
    if not isinstance(value, str) or not _SNAP_AMOUNT.fullmatch(value):
        raise ValueError(f"must be a string of {SNAP_AMOUNT_RULE}")
    return Decimal(value)


def format_snap_amount(amount: Decimal | int) -> str:
    """Two-decimal string, `Decimal(10000) -> "10000.00"`."""
    return str(Decimal(amount).quantize(CENT, rounding=ROUND_HALF_UP))


def round_half_up_rupiah(amount: Decimal) -> Decimal:
    return amount.quantize(RUPIAH, rounding=ROUND_HALF_UP)


def ceil_rupiah(amount: Decimal) -> Decimal:
    return amount.quantize(RUPIAH, rounding=ROUND_CEILING)


def rupiah(amount: int | Decimal | None, *, compact: bool = False) -> str:
    """`150000` -> `Rp 150.000` (Indonesian thousands separator); BNPL's cents keep two decimals when they
    are not zero (`Rp 150.000,50`); None -> "". `compact`: no space after the symbol (`Rp150.000`), as the
    customer's pages (the card page, the simulator's pages) write it."""
    if amount is None:
        return ""
    value = Decimal(amount)
    whole = int(value)
    text = f"{abs(whole):,}".replace(",", ".")
    cents = abs(value - whole)
    if cents:
        text += "," + f"{cents:.2f}"[2:]
    return ("-" if value < 0 else "") + ("Rp" if compact else "Rp ") + text
