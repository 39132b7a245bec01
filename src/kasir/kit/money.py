"""Money is Decimal or integer rupiah; float never touches an amount."""

from __future__ import annotations

import re
from decimal import ROUND_CEILING, ROUND_HALF_UP, Decimal

CENT = Decimal("0.01")
RUPIAH = Decimal("1")

# "16,2": up to 16 digits before the point, exactly two after (the SNAP amount form).
_SNAP_AMOUNT = re.compile(r"^(0|[1-9][0-9]{0,15})\.[0-9]{2}$")


def parse_snap_amount(value: str) -> Decimal:
    """Parse `"10000.00"`; raises ValueError on anything not of the 16,2 form."""
    if not isinstance(value, str) or not _SNAP_AMOUNT.match(value):
        raise ValueError("must be a string of up to 16 digits with 2 decimals, like 10000.00")
    return Decimal(value)


def format_snap_amount(amount: Decimal | int) -> str:
    """Two-decimal string, `Decimal(10000) -> "10000.00"`."""
    return str(Decimal(amount).quantize(CENT, rounding=ROUND_HALF_UP))


def round_half_up_rupiah(amount: Decimal) -> Decimal:
    return amount.quantize(RUPIAH, rounding=ROUND_HALF_UP)


def ceil_rupiah(amount: Decimal) -> Decimal:
    return amount.quantize(RUPIAH, rounding=ROUND_CEILING)
