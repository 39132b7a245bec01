"""Prometheus gauges of disbursement, read from the database at scrape time (/metrics): transfers by state, and
what the balances hold and keep, summed over every merchant.

Gauges, not counters: a transfer's state and a balance are facts of the database, the same whichever process
(`kasir serve --workers N`, `kasir worker`) moved them, and right again after a restart.
"""

from __future__ import annotations

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from kasir.db import Session
from kasir.payouts.repository import BalanceRow, payout_repository
from kasir.payouts.states import TransferStatus


class PayoutGauges(Collector):
    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.sums = BalanceRow(0, 0)

    async def read(self, session: Session) -> None:
        self.counts = await payout_repository.transfers_by_status(session)
        self.sums = await payout_repository.balance_sums(session)

    def collect(self) -> list[GaugeMetricFamily]:
        transfers = GaugeMetricFamily(
            "kasir_payout_transfers",
            "Transfers by state (latestTransactionStatus, and its name)",
            labels=["status", "state"],
        )
        for status in TransferStatus:
            transfers.add_metric([status.value, status.name.lower()], self.counts.get(status.value, 0))
        held = GaugeMetricFamily(
            "kasir_payout_balance_held_rupiah", "Rupiah held by transfers not final yet, every merchant's"
        )
        held.add_metric([], self.sums.hold)
        ledger = GaugeMetricFamily("kasir_payout_balance_ledger_rupiah", "Disbursement ledgers, every merchant's")
        ledger.add_metric([], self.sums.ledger)
        available = GaugeMetricFamily(
            "kasir_payout_balance_available_rupiah", "Ledger less hold: what merchants may still send, summed"
        )
        available.add_metric([], self.sums.available)
        return [transfers, held, ledger, available]


payout_gauges = PayoutGauges()
