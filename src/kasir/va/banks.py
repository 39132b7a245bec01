"""The VA channels and their numbers (docs/decisions.md §9.4): the shipped table, the provider's staging
prefixes, which the operator may change per bank (KASIR_VA_BANKS). A number is the prefix of the VA's payment
system and F free digits; the staging issuer (the simulator) numbers VAs by it, and the product checks a
merchant's chosen digits against F."""

from __future__ import annotations

from dataclasses import dataclass, replace

from kasir.config import get_settings


@dataclass(frozen=True, slots=True)
class Bank:
    name: str
    closed_prefix: str
    partial_prefix: str
    open_prefix: str
    free_digits: int
    amount_min: int = 10_000  # the channel minimum (§9.3), of every amount at creation and every payment

    def prefix(self, payment_system: str) -> str:
        return {"CLOSED": self.closed_prefix, "PARTIAL": self.partial_prefix, "OPEN": self.open_prefix}[payment_system]

    @property
    def chosen_digits_max(self) -> int:
        """How many digits a merchant may choose (`payment_details.va_number`): min(F, 12)."""
        return min(self.free_digits, 12)


def _one_prefix(name: str, prefix: str, free_digits: int) -> Bank:
    # Where the provider gives no partial or open prefix, the closed one serves (chosen in §9.4).
    return Bank(name, prefix, prefix, prefix, free_digits)


BANKS: dict[str, Bank] = {
    "BCA": Bank("Bank Central Asia", "40416", "40415", "40414", 9),
    "BRI": Bank("Bank Rakyat Indonesia", "13033", "13033", "13045", 11),
    "MANDIRI": Bank("Bank Mandiri", "89169", "89169", "89795", 14),
    # §9.3: BNI's minimum is 1 rupiah (D-feat's OPEN minimum, applied to every amount of the bank).
    "BNI": replace(_one_prefix("Bank Negara Indonesia", "7136", 12), amount_min=1),
    "PERMATA": _one_prefix("Bank Permata", "7888", 12),
    "CIMB": _one_prefix("CIMB Niaga", "1419", 12),
    "BSI": _one_prefix("Bank Syariah Indonesia", "1310", 12),
    "BNC": _one_prefix("Bank Neo Commerce", "90100049", 14),
}


def bank_of(name: str) -> Bank:
    """The bank's numbers: the shipped table's, as KASIR_VA_BANKS changes them."""
    shipped = BANKS[name]
    changed = get_settings().va_banks.get(name)
    if changed is None:
        return shipped
    return replace(
        shipped,
        closed_prefix=changed.closed,
        partial_prefix=changed.partial or changed.closed,
        open_prefix=changed.open or changed.closed,
        free_digits=changed.free_digits,
    )


# payment_channel (in capitals) -> its bank. Aliases are numbered as their bank and answered as sent.
CHANNELS: dict[str, str] = {
    **{bank: bank for bank in BANKS},
    "BCA-MCP": "BCA",
    "BCA-POLYTRON": "BCA",
    "BCA-MOLA": "BCA",
    "BNC-BLIBLI": "BNC",
}

# Channel limits (§9.3): every amount at create and every payment; the minimum is each bank's (`Bank.amount_min`).
AMOUNT_MAX = 9_999_999_999_999
