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
