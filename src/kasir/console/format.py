"""How the console writes times (Asia/Jakarta with their offset) and BNPL's states (in words, from
kasir.bnpl.states.DESCRIPTIONS, the one mapping; the wire code beside them). Money: kasir.kit.money.rupiah."""

from __future__ import annotations

from datetime import datetime

from kasir.bnpl.states import DESCRIPTIONS, BnplStatus
from kasir.kit.clock import JAKARTA


def jakarta_time(moment: datetime | None) -> str:
    """`2026-11-24 14:03:05 +07:00` (WIB)."""
    if moment is None:
        return ""
    local = moment.astimezone(JAKARTA)
    return local.strftime("%Y-%m-%d %H:%M:%S ") + local.strftime("%z")[:3] + ":" + local.strftime("%z")[3:]


def state_words(product: str, code: str) -> str | None:
    """A payment's state (or a callback's event) in words where the wire has only a code (BNPL's `00`,
    `06`...); None where the code is a word already (the wallet's PAID, the card's SUCCESS)."""
    if product != "bnpl":
        return None
    try:
        return DESCRIPTIONS[BnplStatus(code)]
    except ValueError:
        return None


def event_words(kind: str, event: str) -> str:
    """`Success (00)` for a BNPL callback's event, the event itself for the others (PAID, REFUNDED...)."""
    words = state_words(kind, event)
    return event if words is None else f"{words} ({event})"


def bnpl_status_text(code: str, description: str) -> str:
    """The detail page's BNPL status: its words, its code, and the stored description when it says more."""
    words = state_words("bnpl", code) or code
    said = f" · {description}" if description and description != words else ""
    return f"{words} (code {code}){said}"
