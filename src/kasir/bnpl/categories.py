"""The BNPL category table (interface.md leaves it open; docs/decisions.md §6: shipped, configurable).

Codes are 4 characters. Set `KASIR_BNPL_CATEGORIES` (kasir.config) to a comma-separated list of
codes to replace the shipped table (for example `ELEC,FASH,FEES`).
"""

from __future__ import annotations

from kasir.config import get_settings

DEFAULT_CATEGORIES: dict[str, str] = {
    "ELEC": "Electronics",
    "GADG": "Phones and gadgets",
    "COMP": "Computers",
    "APPL": "Home appliances",
    "FASH": "Fashion",
    "BEAU": "Beauty",
    "HLTH": "Health",
    "HOME": "Home and living",
    "FOOD": "Food and groceries",
    "BABY": "Mother and baby",
    "SPRT": "Sports and outdoors",
    "TOYS": "Toys and hobbies",
    "BOOK": "Books and stationery",
    "AUTO": "Automotive",
    "TRVL": "Travel",
    "DIGI": "Digital goods",
    "EDUC": "Education",
    "SERV": "Services",
    "FEES": "Fees (shipping, admin, tax, insurance, discount)",
    "OTHR": "Others",
}

_SHIPPED = frozenset(DEFAULT_CATEGORIES)


def allowed_categories() -> frozenset[str]:
    configured = get_settings().bnpl_categories
    return frozenset(configured) if configured else _SHIPPED


# interface.md: the fee identifiers an itemId may carry instead of a SKU.
FEE_ITEM_IDS = frozenset({"shippingfee", "adminfee", "taxfee", "discount", "additionalfee", "insurancefee"})
