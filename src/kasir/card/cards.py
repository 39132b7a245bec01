"""Card numbers: Luhn, brand, masking, acquirers.

`parse_card()` checks a card and returns it as `CardDetails` (kasir.processors): the number
and the CVN go to the configured acquirer in the same request and are never stored, logged
or rendered back; what is kept is the masked number (first 6, last 4), the brand and the
expiry. Errors name the field and say what is wrong, never what was sent.
"""

from __future__ import annotations

import re
from datetime import datetime
from functools import lru_cache

from kasir.config import get_settings
from kasir.errors import FieldError
from kasir.processors.protocols import CardDetails

# --- acquirers (docs/decisions.md §7) ------------------------------------------------------

# Channel -> acquirer; `CARD` is "any acquirer": the brand picks one (_BRAND_ACQUIRER).
DEFAULT_CHANNELS: dict[str, str | None] = {"CARD": None, "BCACC": "BCA", "CIMBCC": "CIMB", "BRICC": "BRI"}
_BRAND_ACQUIRER = {"VISA": "BCA", "MASTERCARD": "CIMB"}
DEFAULT_ACQUIRER = "BRI"  # other brands on the CARD channel, and the CARD channel before any card was tried


def card_channels() -> dict[str, str | None]:
    """The configured channels: `KASIR_CARD_CHANNELS=CARD,BCACC:BCA,...` replaces the shipped list.

    Read from the settings (once per process) and parsed once per value: every charge asks.
    The answer is shared: read it, never change it.
    """
    return _parsed_channels(get_settings().card_channels.strip())


@lru_cache(maxsize=4)
def _parsed_channels(configured: str) -> dict[str, str | None]:
    if not configured:
        return DEFAULT_CHANNELS
    channels: dict[str, str | None] = {}
    for entry in configured.split(","):
        code, _, acquirer = entry.strip().partition(":")
        if code:
            channels[code] = acquirer or None
    return channels


def acquirer_for(channel: str, brand: str | None) -> str:
    fixed = card_channels().get(channel)
    if fixed:
        return fixed
    return _BRAND_ACQUIRER.get(brand or "", DEFAULT_ACQUIRER)


# --- numbers -------------------------------------------------------------------------

_DIGITS = re.compile(r"^[0-9]+$")


def luhn_valid(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = ord(char) - 48
        if index % 2 == 1:
            value *= 2
            if value > 9:
                value -= 9
        total += value
    return total % 10 == 0


def brand_of(digits: str) -> str:
    if digits.startswith("4"):
        return "VISA"
    prefix2, prefix4 = int(digits[:2]), int(digits[:4])
    if 51 <= prefix2 <= 55 or 2221 <= prefix4 <= 2720:
        return "MASTERCARD"
    if prefix2 in (34, 37):
        return "AMEX"
    if 3528 <= prefix4 <= 3589:
        return "JCB"
    return "OTHER"


def mask(digits: str) -> str:
    """First 6 and last 4 digits; the rest as `*`."""
    return digits[:6] + "*" * (len(digits) - 10) + digits[-4:]


# What the charge and the page hold of a card between its parsing and the acquirer's answer.
ParsedCard = CardDetails


class InvalidCardData(ValueError):
    """Every rejected card field at once; the messages never repeat the card data."""

    def __init__(self, errors: list[FieldError]) -> None:
        super().__init__("card data rejected")
        self.errors = errors


def parse_card(
    *,
    number: str,
    exp_month: str,
    exp_year: str,
    cvn: str,
    holder_name: str,
    now: datetime,
    prefix: str = "cardDetails.",
) -> ParsedCard:
    """Validate and mask a card; raise InvalidCardData naming every bad field (prefix + wire name)."""
    errors: list[FieldError] = []
    digits = number.replace(" ", "")
    if not _DIGITS.match(digits) or not 13 <= len(digits) <= 19:
        errors.append(FieldError(prefix + "cardNumber", "must be 13 to 19 digits"))
    elif not luhn_valid(digits):
        errors.append(FieldError(prefix + "cardNumber", "is not a valid card number (check digit)"))

    month = exp_month  # issue 26: exactly two digits, 01 to 12
    year = exp_year.strip()
    month_ok = bool(re.fullmatch(r"(0[1-9]|1[0-2])", month))
    year_ok = bool(re.match(r"^([0-9]{2}|[0-9]{4})$", year))
    if not month_ok:
        errors.append(FieldError(prefix + "cardExpiredMonth", "must be a month as two digits, 01 to 12"))
    if not year_ok:
        errors.append(FieldError(prefix + "cardExpiredYear", "must be a year as YY or YYYY"))
    full_year = (2000 + int(year) if len(year) == 2 else int(year)) if year_ok else 0
    if month_ok and year_ok:
        # A card is valid through the last day of its expiry month.
        if (full_year, int(month)) < (now.year, now.month):
            errors.append(FieldError(prefix + "cardExpiredYear", "the card has expired (expiry is in the past)"))

    if not re.match(r"^[0-9]{3,4}$", cvn.strip()):
        errors.append(FieldError(prefix + "cardCvn", "must be 3 or 4 digits"))

    holder = " ".join(holder_name.split()).upper()
    if not holder:
        errors.append(FieldError(prefix + "cardHolderName", "is required"))
    elif len(holder) > 64 or not re.match(r"^[A-Z][A-Z .'-]*$", holder):
        errors.append(FieldError(prefix + "cardHolderName", "must be at most 64 letters, spaces, . ' -"))

    if errors:
        raise InvalidCardData(errors)
    return CardDetails(
        number=digits,
        cvn=cvn.strip(),
        exp_month=f"{int(month):02d}",
        exp_year=str(full_year),
        holder_name=holder,
        masked=mask(digits),
        brand=brand_of(digits),
    )
