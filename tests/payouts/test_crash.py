"""A transfer is never lost nor sent twice (docs/decisions.md §11.9, issue 46 item 3): a server SIGKILLed while its
transfers are between acceptance and the record of the rail's answer leaves them `01`, held; the next process's
worker asks the rail `status` and sends only what the rail never received (one transfer is made to stall before
it reaches the rail); that worker is SIGKILLed in turn while it sends it, and a third process's worker records it
without sending it again. Every accepted transfer reaches the rail exactly once and the balance adds up, on SQLite
and on PostgreSQL.

The rail is a processor plug-in installed as an operator's would be (an entry point in a package on the path) that
writes every transfer it receives to a file before answering, slowly: the kill lands while answers are owed. The
servers run on a database of this test's own (as tests/va/test_crash.py, for the same reason)."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select

from kasir.audit.service import Actor
from kasir.config import Settings
from kasir.db import Database, fetch, upgrade_schema
from kasir.payouts.models import PayoutTransfer
from kasir.payouts.service import payout_service
from tests.conftest import TEST_SECRET_KEY
from tests.support.builders import make_merchant
from tests.support.postgres import PostgresCluster
from tests.support.process import HANG_GUARD_SECONDS
from tests.support.server import ServedKasir
from tests.support.wire.payouts import TRANSFER, disbursement_token, post_payout, transfer_body

pytestmark = pytest.mark.slow

RAIL = """
import asyncio, os
from kasir.processors.protocols import AccountInfo, AccountStatus, PayoutAnswer, PayoutState

LOG = os.environ["CRASHRAIL_LOG"]


def _received():
    try:
        with open(LOG) as f:
            return set(f.read().split())
    except FileNotFoundError:
        return set()


class Rail:
    timeout_seconds = 1.0
    status_after_seconds = 1.0

    async def account_inquiry(self, bank_code, account_no):
        return AccountInfo(AccountStatus.ACTIVE, "BUDI SANTOSO")

    async def transfer(self, order):
        if order.account_no.endswith("9999") and os.environ.get("CRASHRAIL_STALL"):
            await asyncio.sleep(3600)  # this one never reaches the bank: the process dies first
        if order.reference not in _received():  # idempotent by reference, as a rail must be
            fd = os.open(LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            os.write(fd, (order.reference + "\\n").encode())
            os.fsync(fd)
            os.close(fd)
        # the bank takes its time: answers are owed when the kill lands
        await asyncio.sleep(float(os.environ.get("CRASHRAIL_SECONDS", "0.4")))
        return PayoutAnswer(PayoutState.SENT, "BANK-" + order.reference)

    async def status(self, order):
        if order.reference in _received():
            return PayoutAnswer(PayoutState.SENT, "BANK-" + order.reference)
        return PayoutAnswer(PayoutState.UNKNOWN)


class CrashRail:
    name = "crashrail"
    simulates = False
    card = wallet = bnpl = va = None

    def __init__(self):
        self.payout = Rail()

    def router(self):
        return None

    async def notifications(self, headers, body):
        return []


def create(settings):
    return CrashRail()
"""


def install_rail(folder: Path) -> Path:
    folder.mkdir()
    (folder / "crashrail_processor.py").write_text(RAIL)
    info = folder / "crashrail_processor-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: crashrail-processor\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[kasir.processors]\ncrashrail = crashrail_processor:create\n")
    return folder


async def transfers(database: Database, merchant_id: str) -> dict[str, str]:
    statement = select(PayoutTransfer.id, PayoutTransfer.status).where(PayoutTransfer.merchant_id == merchant_id)
    async with database.unit_of_work(read_only=True) as session:
        return {row.id: row.status for row in await fetch(session, statement)}


async def transfer_to(database: Database, merchant_id: str, account_no: str) -> str | None:
    statement = select(PayoutTransfer.id).where(
        PayoutTransfer.merchant_id == merchant_id, PayoutTransfer.beneficiary_account_no == account_no
    )
    async with database.unit_of_work(read_only=True) as session:
        rows = await fetch(session, statement)
    return str(rows[0].id) if rows else None


async def test_a_server_killed_between_accepting_and_recording_loses_no_transfer_and_sends_none_twice(
    app: FastAPI, settings_env: dict[str, str], tmp_path: Path, postgres: PostgresCluster | None
) -> None:
    """`app`: the test process's settings (its KASIR_SECRET_KEY seals the merchant made here)."""
    url = postgres.create_database("kasir_payout_crash") if postgres else f"sqlite+aiosqlite:///{tmp_path / 'kasir.db'}"
    database = Database(Settings(data_dir=tmp_path, database_url=url, secret_key=TEST_SECRET_KEY))
    rail_log = tmp_path / "rail.log"
    plugin = install_rail(tmp_path / "plugin")
    path = os.pathsep.join(filter(None, (str(plugin), os.environ.get("PYTHONPATH"))))
    env = {
        **settings_env,
        "KASIR_DATA_DIR": str(tmp_path),
        "KASIR_DATABASE_URL": url,
        "KASIR_PROCESSORS": "payout=crashrail",
        "CRASHRAIL_LOG": str(rail_log),
        "PYTHONPATH": path,
    }
    # the first server's rail never sends the transfer to an account ending 9999; the second's worker sends it
    # slowly (and is killed meanwhile); the third's finds it sent
    accepting = ServedKasir({**env, "CRASHRAIL_STALL": "1"}, args=("--no-worker",))
    resending = ServedKasir({**env, "CRASHRAIL_SECONDS": "3600"})
    finishing = ServedKasir(env)
    try:
        await upgrade_schema(database)
        merchant = await make_merchant(SimpleNamespace(state=SimpleNamespace(database=database)))  # type: ignore[arg-type]
        async with database.unit_of_work() as session:
            await payout_service.top_up(session, merchant.id, 1_000_000, "Saldo awal", Actor.cli())
        await asyncio.to_thread(accepting.start)
        async with httpx.AsyncClient(base_url=accepting.base_url, timeout=30) as http:
            token = await disbursement_token(http, merchant)
            bodies = [transfer_body(f"12345{n:05d}", amount="10000.00") for n in range(19)]
            bodies.append(transfer_body("1234509999", amount="10000.00"))
            sending = asyncio.gather(
                *(post_payout(http, merchant, TRANSFER, body, token) for body in bodies), return_exceptions=True
            )
            # SIGKILL once the rail has received a few and the stalled one is accepted: others are accepted and
            # unasked, or asked and unrecorded
            deadline = time.monotonic() + HANG_GUARD_SECONDS
            while not rail_log.exists() or len(rail_log.read_text().split()) < 3:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.01)
            while await transfer_to(database, merchant.id, "1234509999") is None:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.01)
            await asyncio.to_thread(accepting.kill)
            answers = await sending
        answered = {a.json()["referenceNo"] for a in answers if isinstance(a, httpx.Response) and a.status_code == 200}
        accepted = await transfers(database, merchant.id)
        assert answered <= set(accepted)  # no transfer answered is lost
        assert "01" in accepted.values() or len(answered) < len(accepted), "the kill landed after every record"
        stalled = await transfer_to(database, merchant.id, "1234509999")
        assert stalled is not None
        assert accepted[stalled] == "01"
        before = set(rail_log.read_text().split())
        assert stalled not in before
        await asyncio.to_thread(resending.start)
        # its worker asks about the left `01`s past twice the rail's timeout and a margin (stalled_after); it finds
        # one the rail never received (the stalled one, or another accepted and not yet asked) and sends it: killed
        # while the rail takes it, before the record
        deadline = time.monotonic() + HANG_GUARD_SECONDS
        while not (resent := set(rail_log.read_text().split()) - before):
            assert time.monotonic() < deadline, "the worker never sent what the rail had not received"
            await asyncio.sleep(0.05)
        await asyncio.to_thread(resending.kill)
        left = await transfers(database, merchant.id)
        assert [left[reference] for reference in resent] == ["01"]
        await asyncio.to_thread(finishing.start)
        deadline = time.monotonic() + HANG_GUARD_SECONDS
        while set((states := await transfers(database, merchant.id)).values()) != {"00"}:
            assert time.monotonic() < deadline, states
            await asyncio.sleep(0.5)
        received = rail_log.read_text().split()
        assert sorted(received) == sorted(states)  # every accepted transfer reached the rail, each exactly once
        async with database.unit_of_work(read_only=True) as session:
            view = await payout_service.balance(session, merchant.id)
        assert (view.ledger, view.hold) == (1_000_000 - 10_000 * len(states), 0)
    finally:
        for server in (finishing, resending, accepting):
            if server.process is not None:
                await asyncio.to_thread(server.stop)
        await database.dispose()
