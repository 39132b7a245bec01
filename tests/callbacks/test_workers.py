"""`kasir worker` processes: SIGKILL loses nothing, several share the work, SIGTERM drains."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import func, make_url, select

from kasir.callbacks.models import Callback, CallbackAttempt
from kasir.db import Database, fetch, upgrade_schema
from kasir.merchants.service import merchant_service
from tests.callbacks.helpers import record
from tests.support.builders import public_pem, rsa_key, unique_name
from tests.support.process import HANG_GUARD_SECONDS, end_with_parent
from tests.support.receiver import Answer

pytestmark = pytest.mark.slow

# The wake-up tests' poll interval: what a commit's wake-up must beat (the other tests poll every 0.1 s).
SLOW_POLL_SECONDS = 60.0


@pytest.fixture
async def isolated(app, settings, tmp_path: Path, postgres):
    """A database of its own, so the test app's embedded worker does not take these callbacks."""
    # `app`: the process configured with the test settings, so the merchant is sealed with the key the workers get.
    if postgres is not None:
        url = postgres.create_database(f"workers_{abs(hash(tmp_path)) % 10**9}")
    else:
        url = f"sqlite+aiosqlite:///{tmp_path / 'workers.db'}"
    database = Database(settings.model_copy(update={"database_url": url}))
    await upgrade_schema(database)
    async with database.unit_of_work() as session:
        merchant, _ = await merchant_service.create(session, name=unique_name(), public_key=public_pem(rsa_key()))
    yield database, url, merchant.id
    await database.dispose()


class WorkerProcess:
    def __init__(self, settings_env: dict[str, str], url: str, log_path: Path, *, poll_seconds: float = 0.1) -> None:
        env = {
            **os.environ,  # PYTHONPATH: the worker runs this checkout's code and migrations, as ServedKasir does
            **settings_env,
            "KASIR_DATABASE_URL": url,
            "KASIR_CALLBACK_LEASE_SECONDS": "3",
            "KASIR_CALLBACK_TIMEOUT_SECONDS": "2",
            "KASIR_CALLBACK_POLL_SECONDS": str(poll_seconds),
        }
        self.log_path = log_path
        self.log = log_path.open("wb")
        self.process = subprocess.Popen(
            [str(Path(sys.executable).parent / "kasir"), "worker"],
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            preexec_fn=end_with_parent,
        )

    async def started(self) -> bool:
        """Once its signal handlers are in place (the log says so): a SIGTERM is then a graceful stop."""
        return "callback worker started" in self.log_path.read_text(errors="replace")

    def signal(self, signum: int) -> None:
        self.process.send_signal(signum)

    async def wait(self, timeout: float = 30) -> int:
        try:
            return await asyncio.to_thread(self.process.wait, timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()  # a hung worker fails this test only, not the ones after it
            self.process.wait()
            raise
        finally:
            self.log.close()


async def statuses(database: Database) -> Counter[str]:
    async with database.unit_of_work(read_only=True) as session:
        rows = await fetch(session, select(Callback.status, func.count()).group_by(Callback.status))
    return Counter({status: count for status, count in rows})


async def wait_until(predicate, *running: WorkerProcess, timeout: float = HANG_GUARD_SECONDS, interval: float = 0.05):
    """Until `predicate()` holds; a worker of `running` that exits first means it never will. `timeout` is the
    suite's hang guard unless a test bounds the wait by what it tests (the poll interval it must beat)."""
    async with asyncio.timeout(timeout):
        while not (value := await predicate()):
            if exited := [worker for worker in running if worker.process.poll() is not None]:
                raise AssertionError(f"a worker exited first: {exited[0].log_path.read_text(errors='replace')}")
            await asyncio.sleep(interval)
    return value


async def test_sigkill_while_holding_claims_loses_nothing(isolated, settings_env, receiver, tmp_path):
    database, url, merchant_id = isolated
    receiver.answer(default=Answer(delay=1.5))
    ids = [
        await record(database, merchant_id=merchant_id, url=receiver.url(), transaction_ref=f"TX-{n}")
        for n in range(20)
    ]

    first = WorkerProcess(settings_env, url, tmp_path / "first.log")
    await wait_until(lambda: _delivering(database), first)
    first.signal(signal.SIGKILL)
    assert await first.wait() == -signal.SIGKILL
    held = (await statuses(database))["delivering"]
    assert held > 0  # it died holding claims

    receiver.answer(default=Answer())
    second = WorkerProcess(settings_env, url, tmp_path / "second.log")
    await wait_until(lambda: _all_delivered(database, len(ids)), second)
    second.signal(signal.SIGTERM)
    assert await second.wait() == 0

    assert await statuses(database) == Counter({"delivered": 20})
    received = {int(r.headers["x-kasir-callback-id"]) for r in receiver.requests}
    assert received == set(ids)  # every callback at least once


@pytest.mark.parametrize("workers", [3])
async def test_several_workers_share_the_work_without_double_sends(isolated, settings_env, receiver, tmp_path, workers):
    database, url, merchant_id = isolated
    total = 150
    processes = [WorkerProcess(settings_env, url, tmp_path / f"w{n}.log") for n in range(workers)]
    for process in processes:  # all started, so they compete for the work (and stop gracefully)
        await wait_until(process.started, process)
    ids = [
        await record(database, merchant_id=merchant_id, url=receiver.url(), transaction_ref=f"TX-{n}")
        for n in range(total)
    ]
    await wait_until(lambda: _all_delivered(database, total), *processes)
    for process in processes:
        process.signal(signal.SIGTERM)
    for process in processes:
        assert await process.wait() == 0

    sends = Counter((r.headers["x-kasir-callback-id"], r.headers["x-kasir-attempt"]) for r in receiver.requests)
    assert len(sends) == total
    # No attempt sent twice, unless a worker held its claims past the lease (a machine too loaded to send
    # within it): then the callback is rightly sent again (at-least-once), and the worker says so.
    leases_lost = sum((tmp_path / f"w{n}.log").read_text().count("lease lost") for n in range(workers))
    assert sum(sends.values()) - len(sends) <= leases_lost, (sends.most_common(3), leases_lost)
    async with database.unit_of_work(read_only=True) as session:
        attempts = await fetch(session, select(CallbackAttempt.callback_id, CallbackAttempt.worker))
    assert sorted(a.callback_id for a in attempts) == sorted(ids)
    if not database.url.startswith("sqlite"):
        assert len({a.worker for a in attempts}) > 1  # the work was shared


async def test_sigterm_finishes_in_flight_attempts(isolated, settings_env, receiver, tmp_path):
    database, url, merchant_id = isolated
    receiver.answer(default=Answer(delay=1.0))
    for n in range(5):
        await record(database, merchant_id=merchant_id, url=receiver.url(), transaction_ref=f"TX-{n}")
    worker = WorkerProcess(settings_env, url, tmp_path / "w.log")
    await wait_until(lambda: _delivering(database), worker)
    worker.signal(signal.SIGTERM)
    assert await worker.wait() == 0
    counts = await statuses(database)
    assert counts["delivering"] == 0  # nothing left claimed
    assert counts["delivered"] >= 1


async def _delivering(database: Database) -> bool:
    return (await statuses(database))["delivering"] > 0


async def _all_delivered(database: Database, total: int) -> bool:
    return (await statuses(database))["delivered"] == total


async def test_a_commit_in_another_process_wakes_an_idle_worker_at_once(isolated, settings_env, receiver, tmp_path):
    """PostgreSQL: NOTIFY; a SQLite file: a byte to each worker's socket. Either way, not the 60 s poll."""
    database, url, merchant_id = isolated
    worker = WorkerProcess(settings_env, url, tmp_path / "w.log", poll_seconds=SLOW_POLL_SECONDS)
    await _woken_at_once(database, merchant_id, worker, receiver.url())
    assert '"callback attempt"' in (tmp_path / "w.log").read_text()  # its own JSON lines, as the server's


async def test_a_worker_on_postgresqls_unix_socket_delivers_and_is_woken_at_once(
    isolated, postgres, settings_env, receiver, tmp_path
):
    """The shipped deployment's URL form (deploy/kasir.env.example, `host=` a socket directory): the worker's
    units of work and its LISTEN connection both go through PostgreSQL's Unix socket."""
    if postgres is None:
        pytest.skip("PostgreSQL's Unix socket")
    database, url, merchant_id = isolated
    socket_url = postgres.socket_url(make_url(url).database)
    worker = WorkerProcess(settings_env, socket_url, tmp_path / "w.log", poll_seconds=SLOW_POLL_SECONDS)
    await _woken_at_once(database, merchant_id, worker, receiver.url())
    log = (tmp_path / "w.log").read_text()
    assert "connection lost" not in log  # its LISTEN connection never fell back to polling
    assert '"callback attempt"' in log


async def _woken_at_once(database: Database, merchant_id: str, worker: WorkerProcess, url: str) -> None:
    """Three callbacks recorded one after the other, each delivered well before the worker's slow poll.

    The first may meet the worker's first look for due callbacks; each later one finds it waiting (it looks
    once more after a delivery, then sleeps until woken or its poll), so only a wake-up brings it in time.
    """
    try:
        await wait_until(lambda: _log_says(worker, "callback worker started"), worker)
        for n in range(3):
            await record(database, merchant_id=merchant_id, url=url, transaction_ref=f"TX-{n}")
            # Half the poll interval: a delivery by the poll comes later than that, whatever the machine.
            await wait_until(lambda n=n: _all_delivered(database, n + 1), worker, timeout=SLOW_POLL_SECONDS / 2)
    finally:
        worker.signal(signal.SIGTERM)
        assert await worker.wait() == 0


async def _log_says(worker: WorkerProcess, text: str) -> bool:
    worker.log.flush()
    return text in Path(worker.log.name).read_text()
