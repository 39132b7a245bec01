"""The transfers' scheduled work, run by the worker (listed in kasir.jobs): docs/decisions.md §11.9.

A transfer not final yet (`01`, `03`) with `next_check_at` due is asked of its rail with `status`, outside any unit
of work; the answer is recorded in a unit of its own (kasir.payouts.transfers.record). A `01` transfer the rail
never received (UNKNOWN: the accepting process stopped before it asked) is sent now, once: the rail is idempotent by
Kasir's reference. The staging simulator's delayed moves (`03` then `00` or `06`) are made here too.
"""

from __future__ import annotations

import logging

from kasir.db import Database
from kasir.errors import KasirError
from kasir.kit.clock import clock
from kasir.payouts.repository import transfer_repository
from kasir.payouts.states import TransferStatus
from kasir.payouts.transfers import ask_window, order_of, record, reschedule
from kasir.processors.protocols import PayoutAnswer, PayoutState, ProcessorUnavailable
from kasir.processors.registry import payout_rail

log = logging.getLogger("kasir.payouts")


async def check_unsettled_transfers(database: Database) -> int:
    """Ask the rail about every due transfer not final yet; how many were asked."""
    async with database.unit_of_work(read_only=True) as session:
        due = await transfer_repository.due_for_check(session, clock.now())
    asked = 0
    for transfer_id in due:
        async with database.unit_of_work(read_only=True) as session:
            transfer = await transfer_repository.get(session, transfer_id)
        if transfer is None or TransferStatus(transfer.status) not in (
            TransferStatus.INITIATED,
            TransferStatus.PENDING,
        ):
            continue
        try:
            rail = payout_rail(transfer.bank)
        except KasirError:  # no payout rail any more: asked again when one is configured
            await reschedule(database, transfer.id, None)
            continue
        # Another worker (a second `kasir worker`, another server's) may have found it due too: one asks. Should
        # this one stop before it records, the check falls due again once the ask could have ended.
        now = clock.now()
        async with database.unit_of_work() as session:
            if not await transfer_repository.claim_check(session, transfer.id, now, now + ask_window(rail)):
                continue
        order = order_of(transfer)
        answer: PayoutAnswer | None
        try:
            answer = await rail.status(order)
            if answer.state is PayoutState.UNKNOWN and TransferStatus(transfer.status) is TransferStatus.INITIATED:
                log.warning(
                    "payout transfer never received by the rail: sent now", extra={"transaction_id": transfer.id}
                )
                answer = await rail.transfer(order)
        except ProcessorUnavailable:
            answer = None
        await record(database, transfer.id, answer, rail)
        asked += 1
    return asked


JOBS = (check_unsettled_transfers,)
