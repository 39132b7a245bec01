"""The staging payout rail (docs/decisions.md §11.9): the beneficiary account's last four digits decide.

    ends in   account inquiry                 transfer
    0004      no such account (404xx11)       (refused at its inquiry: nothing recorded)
    0005      inactive account (403xx18)      (likewise)
    0002      SITI RAHAYU                     pending, then sent after the delay
    0003      AGUS WIJAYA                     pending, then failed after the delay
    other     BUDI SANTOSO                    sent at once

The delay is KASIR_SIMULATOR_PAYOUT_DELAY_SECONDS from the transfer's acceptance; the worker asks `status` and
makes the move. Nothing is kept: a transfer's answer is a function of its account, its acceptance and the clock,
so any process (a second server, the worker after a crash) answers as the first did.
"""

from __future__ import annotations

from datetime import timedelta

from kasir.config import get_settings
from kasir.kit.clock import clock
from kasir.processors.protocols import AccountInfo, AccountStatus, PayoutAnswer, PayoutOrder, PayoutState

NAMES = {"0002": "SITI RAHAYU", "0003": "AGUS WIJAYA"}
OTHER_NAME = "BUDI SANTOSO"
REJECTED = "Rejected by the beneficiary bank"


class SimulatedPayoutRail:
    # The worker's next `status` of a pending transfer: when the delay has passed (kasir.payouts.jobs).
    @property
    def status_after_seconds(self) -> float:
        return float(get_settings().simulator_payout_delay_seconds)

    async def account_inquiry(self, bank_code: str, account_no: str) -> AccountInfo:
        ending = account_no[-4:]
        if ending == "0004":
            return AccountInfo(AccountStatus.INVALID)
        if ending == "0005":
            return AccountInfo(AccountStatus.INACTIVE)
        return AccountInfo(AccountStatus.ACTIVE, NAMES.get(ending, OTHER_NAME))

    async def transfer(self, order: PayoutOrder) -> PayoutAnswer:
        return self._answer(order)

    async def status(self, order: PayoutOrder) -> PayoutAnswer:
        return self._answer(order)

    def _answer(self, order: PayoutOrder) -> PayoutAnswer:
        ending = order.account_no[-4:]
        reference = f"SIM{order.reference[3:]}"
        if ending in ("0004", "0005"):
            return PayoutAnswer(PayoutState.FAILED, reference, "Invalid or inactive beneficiary account")
        if ending not in NAMES:
            return PayoutAnswer(PayoutState.SENT, reference)
        if clock.now() < order.accepted_at + timedelta(seconds=self.status_after_seconds):
            return PayoutAnswer(PayoutState.PENDING, reference)
        if ending == "0002":
            return PayoutAnswer(PayoutState.SENT, reference)
        return PayoutAnswer(PayoutState.FAILED, reference, REJECTED)
