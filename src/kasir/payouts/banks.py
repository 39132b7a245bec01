"""Where a transfer may go (docs/decisions.md §11.4): banks by Bank Indonesia's code, e-wallets by name, and the
limits of one transfer. A bank code is 3 digits, or 7 (the code and a 4-digit branch, which is ignored)."""

from __future__ import annotations

import re

BANKS: dict[str, str] = {
    "002": "BANK RAKYAT INDONESIA",
    "008": "BANK MANDIRI",
    "009": "BANK NEGARA INDONESIA",
    "011": "BANK DANAMON",
    "013": "BANK PERMATA",
    "014": "BANK CENTRAL ASIA",
    "016": "MAYBANK INDONESIA",
    "019": "BANK PANIN",
    "022": "BANK CIMB NIAGA",
    "028": "BANK OCBC NISP",
    "200": "BANK TABUNGAN NEGARA",
    "451": "BANK SYARIAH INDONESIA",
    "490": "BANK NEO COMMERCE",
    "542": "BANK JAGO",
}
EWALLETS: tuple[str, ...] = ("OVO", "DANA", "GOPAY", "SHOPEEPAY", "LINKAJA")

BANK_MIN, BANK_MAX = 10_000, 250_000_000  # the provider's page
EWALLET_MIN, EWALLET_MAX = 10_000, 20_000_000  # chosen in §11.4

BANK_CODE_PATTERN = r"^([0-9]{3}|[0-9]{7}|OVO|DANA|GOPAY|SHOPEEPAY|LINKAJA)$"
_BANK_CODE = re.compile(BANK_CODE_PATTERN)
BANK_ACCOUNT_PATTERN = r"^[0-9]{6,34}$"
_BANK_ACCOUNT = re.compile(BANK_ACCOUNT_PATTERN)
EWALLET_ACCOUNT_PATTERN = r"^(08|628)[0-9]{8,11}$"
_EWALLET_ACCOUNT = re.compile(EWALLET_ACCOUNT_PATTERN)


def well_formed_code(code: str) -> bool:
    return bool(_BANK_CODE.fullmatch(code))


def bank_of(code: str) -> str:
    """The rail's channel of a well-formed code: the 3-digit bank code (a branch dropped), or the e-wallet."""
    return code[:3] if code.isdigit() else code


def is_ewallet(bank: str) -> bool:
    return bank in EWALLETS


def supported(bank: str) -> bool:
    return bank in BANKS or bank in EWALLETS


def bank_name(bank: str) -> str:
    return BANKS.get(bank, bank)


def account_no_fits(bank: str, account_no: str) -> bool:
    """§11.4: a bank account is 6 to 34 digits; an e-wallet's, the phone registered with it."""
    pattern = _EWALLET_ACCOUNT if is_ewallet(bank) else _BANK_ACCOUNT
    return bool(pattern.fullmatch(account_no))


def limits(bank: str) -> tuple[int, int]:
    return (EWALLET_MIN, EWALLET_MAX) if is_ewallet(bank) else (BANK_MIN, BANK_MAX)


def channels() -> tuple[str, ...]:
    """The payout channels KASIR_PROCESSORS may name one by one (`payout.014=NAME`, `payout.OVO=NAME`)."""
    return (*BANKS, *EWALLETS)
