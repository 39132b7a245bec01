"""What the payouts room offers the processors (kasir.processors.offers): its channels (the beneficiary's bank
code or e-wallet: `payout.014=NAME`) and how it applies a payout rail's notification (docs/decisions.md §11.9).

    pending   03: the rail took it
    sent      00
    failed    06 (`message`: the reason)
    returned  04 (`message`: the reason)
    canceled  05
"""

from __future__ import annotations

from kasir.db import Session
from kasir.payouts.banks import channels
from kasir.processors.offers import Offer
from kasir.processors.protocols import Notification
from kasir.processors.service import UnsupportedEvent


async def apply_payout_notification(session: Session, notification: Notification, *, by: str, strict: bool) -> str:
    """The transfer's status after the rail's notification."""
    raise UnsupportedEvent(notification)  # applied once the transfers are recorded (issue 46, step 4)


payout_offer = Offer("payout", channels=channels, apply=apply_payout_notification)
