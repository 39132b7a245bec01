"""The multi-process deployment of deploy/, as shipped: nginx in front of two `kasir serve` processes, two
`kasir worker` processes, PostgreSQL started with deploy/postgresql/kasir.conf, all on 127.0.0.1.

Wallet, BNPL and card payments go through the proxy while one server and one worker are SIGKILLed. Every
payment must end answered (the SDK retries with its idempotency key, as the rule says), and every payment's
callback must arrive signed and with its final status: at least once, one callback per payment event, none
for anything else, all recorded as delivered.

PostgreSQL only (several processes on one SQLite file is not the deployment deploy/ describes).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from kasir_client import (
    AsyncClient,
    Credentials,
    verify_bnpl_notification,
    verify_payment_page_callback,
    verify_wallet_callback,
)

from kasir.processors.calls import STALL_MARGIN
from tests.conftest import TEST_DB
from tests.support.forms import page_forms, post_form
from tests.support.postgres import PostgresCluster, free_port
from tests.support.process import HANG_GUARD_SECONDS, end_with_parent
from tests.support.receiver import Answer, CallbackReceiver
from tests.support.wire.card import charge_body

pytestmark = [
    pytest.mark.deployment,
    pytest.mark.slow,
    pytest.mark.skipif(TEST_DB != "postgres", reason="the multi-process deployment runs on PostgreSQL"),
]

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
KASIR = Path(sys.executable).parent / "kasir"
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
PER_PRODUCT = 8  # payments of each kind
KILL_AFTER = 9  # payments answered (of 24) before one server and one worker are killed


# --- deploy/ as shipped, with only the ports and paths of this machine put in ------------------


def exec_start(unit: str, instance: str = "") -> list[str]:
    """The ExecStart of a systemd unit of deploy/systemd, for this venv's `kasir` and the instance name."""
    text = (DEPLOY / "systemd" / unit).read_text()
    [line] = [line for line in text.splitlines() if line.startswith("ExecStart=")]
    argv = shlex.split(line.removeprefix("ExecStart=").replace("%i", instance))
    assert argv[0] == "/opt/kasir/.venv/bin/kasir", argv
    return [str(KASIR), *argv[1:]]


def environment_file() -> dict[str, str]:
    values = {}
    for line in (DEPLOY / "kasir.env.example").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, value = line.partition("=")
            values[name] = value
    return values


def shipped_database_url(cluster: PostgresCluster) -> str:
    """The shipped KASIR_DATABASE_URL (PostgreSQL's Unix socket in Debian's directory) for this cluster's socket."""
    shipped = environment_file()["KASIR_DATABASE_URL"]
    assert shipped == "postgresql+asyncpg://kasir@/kasir?host=/var/run/postgresql", shipped
    url = shipped.replace("/var/run/postgresql", f"{cluster.root}&port={cluster.port}")
    assert url == cluster.socket_url("kasir")
    return url


def nginx_config(workdir: Path, listen: int, upstreams: list[int]) -> Path:
    """deploy/nginx/kasir.conf inside a main configuration that runs nginx unprivileged in `workdir`."""
    site = (DEPLOY / "nginx" / "kasir.conf").read_text()
    for shipped, port in zip(("127.0.0.1:8001", "127.0.0.1:8002"), upstreams, strict=True):
        assert shipped in site
        site = site.replace(shipped, f"127.0.0.1:{port}")
    assert "listen 127.0.0.1:8080;" in site
    site = site.replace("listen 127.0.0.1:8080;", f"listen 127.0.0.1:{listen};")
    (workdir / "kasir.conf").write_text(site)
    for directory in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (workdir / directory).mkdir(exist_ok=True)
    main = f"""
daemon off;
master_process on;
worker_processes 1;
pid {workdir}/nginx.pid;
error_log {workdir}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    log_format upstream '$request_method $uri $status $upstream_addr $upstream_status';
    access_log {workdir}/access.log upstream;
    client_body_temp_path {workdir}/client_body;
    proxy_temp_path {workdir}/proxy;
    fastcgi_temp_path {workdir}/fastcgi;
    uwsgi_temp_path {workdir}/uwsgi;
    scgi_temp_path {workdir}/scgi;
    include {workdir}/kasir.conf;
}}
"""
    path = workdir / "nginx.conf"
    path.write_text(main)
    return path


@dataclass
class Deployment:
    workdir: Path
    env: dict[str, str]
    proxy_url: str
    server_ports: list[int]
    servers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    nginx: subprocess.Popen[bytes] | None = None

    def spawn(self, argv: list[str], log: str) -> subprocess.Popen[bytes]:
        # From the test's own thread (end_with_parent: a child ends when the thread that started it does).
        with (self.workdir / log).open("ab") as output:  # the child keeps its own copy of the descriptor
            return subprocess.Popen(
                argv, env=self.env, stdout=output, stderr=subprocess.STDOUT, preexec_fn=end_with_parent
            )

    def stop(self) -> None:
        for process in [*self.servers, *self.workers, *([self.nginx] if self.nginx else [])]:
            if process.poll() is None:
                process.terminate()
        for process in [*self.servers, *self.workers, *([self.nginx] if self.nginx else [])]:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def logs(self) -> str:
        return "\n".join(
            f"--- {path.name}\n{path.read_text(errors='replace')[-3000:]}"
            for path in sorted(self.workdir.glob("*.log"))
        )


async def wait_ready(url: str, process: subprocess.Popen[bytes]) -> None:
    """Until `url` answers 200, or the process has exited (then it never will), however long a start takes."""
    async with httpx.AsyncClient(trust_env=False) as http, asyncio.timeout(HANG_GUARD_SECONDS):
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"{process.args} exited with {process.returncode}")
            try:
                if (await http.get(url, timeout=1)).status_code == 200:  # a slower answer: asked again
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.1)


@pytest.fixture(scope="module")
def cluster() -> Iterator[PostgresCluster]:
    """A cluster of its own, started with deploy/postgresql/kasir.conf (fsync on, as in production)."""
    postgres = PostgresCluster(durable=True, settings_file=DEPLOY / "postgresql" / "kasir.conf")
    try:
        postgres.start()
        yield postgres
    finally:
        postgres.stop()


@pytest.fixture
async def deployment(tmp_path: Path, cluster: PostgresCluster) -> AsyncIterator[Deployment]:
    proxy_port, server_ports = free_port(), [free_port(), free_port()]
    proxy_url = f"http://127.0.0.1:{proxy_port}"
    env = {
        **os.environ,
        **environment_file(),
        # What differs from the shipped file: the simulator moves the money (staging), loopback callbacks,
        # this machine's paths, and short timings so a killed worker's claims come back within the test.
        "KASIR_ENV": "staging",
        "KASIR_DATA_DIR": str(tmp_path / "data"),
        "KASIR_DATABASE_URL": shipped_database_url(cluster),
        "KASIR_SECRET_KEY": secrets.token_urlsafe(32),
        "KASIR_ADMIN_TOKEN": "deployment-admin-token",
        "KASIR_PUBLIC_URL": proxy_url,
        "KASIR_CALLBACK_TIMEOUT_SECONDS": "2",
        "KASIR_CALLBACK_LEASE_SECONDS": "4",
        "KASIR_CALLBACK_POLL_SECONDS": "0.2",
        "KASIR_LOG_LEVEL": "INFO",
    }
    (tmp_path / "data").mkdir()
    deployment = Deployment(tmp_path, env, proxy_url, server_ports)
    subprocess.run(exec_start("kasir-migrate.service"), env=env, check=True, capture_output=True)
    try:
        deployment.servers = [
            deployment.spawn(exec_start("kasir-serve@.service", str(port)), f"serve-{port}.log")
            for port in server_ports
        ]
        deployment.workers = [deployment.spawn(exec_start("kasir-worker@.service"), f"worker-{n}.log") for n in (1, 2)]
        config = nginx_config(tmp_path, proxy_port, server_ports)
        deployment.nginx = deployment.spawn([NGINX, "-c", str(config), "-p", str(tmp_path)], "nginx-stdout.log")
        for port, server in zip(server_ports, deployment.servers, strict=True):
            await wait_ready(f"http://127.0.0.1:{port}/readyz", server)
        await wait_ready(f"{proxy_url}/readyz", deployment.nginx)
        yield deployment
    finally:
        deployment.stop()


def create_merchant(deployment: Deployment, callback_url: str) -> Credentials:
    created = subprocess.run(
        [
            str(KASIR),
            "merchant",
            "create",
            "--name",
            "Deployment Merchant",
            "--generate-key",
            str(deployment.workdir / "keys"),
            "--callback-url",
            callback_url,
            "--json",
        ],
        env=deployment.env,
        check=True,
        capture_output=True,
        text=True,
    )
    (deployment.workdir / "credentials.json").write_text(created.stdout)
    return Credentials.from_files(deployment.workdir / "credentials.json", deployment.workdir / "keys" / "private.pem")


# --- the payments ------------------------------------------------------------------------------


@dataclass
class Payment:
    kind: str  # wallet | bnpl | card
    path: str  # where its callback goes (one path per payment)
    order: tuple[str, str] = ("", "")  # (external id, order id) for wallet and card signatures
    reference: str = ""  # the transaction Kasir made
    answered: bool = False


async def pay_wallet(client: AsyncClient, payment: Payment, callback_url: str, n: int) -> None:
    external_id, order_id = f"DEP-W-{n}-{secrets.token_hex(4)}", f"DEP-WO-{n}"
    payment.order = (external_id, order_id)
    created = await client.wallet_create_payment(
        {
            "external_id": external_id,
            "order_id": order_id,
            "currency": "IDR",
            "payment_method": "wallet",
            "payment_channel": "DANA",
            "payment_details": {"amount": 50_000, "transaction_description": "Kopi"},
            "customer_details": {"email": "siti@example.id", "full_name": "Siti Rahayu", "phone": "081234567890"},
            "item_details": [{"item_id": "KOPI-1", "name": "Kopi Susu", "amount": 25_000, "qty": 2}],
            "wallet_details": {"id": "081234567890", "id_type": "HP"},
            "callback_url": callback_url,
        }
    )
    assert created.transaction_status == "PENDING"
    payment.reference = created.transaction_id
    paid = await client.wallet_dummy_payment(
        {
            "transaction_id": created.transaction_id,
            "external_id": external_id,
            "order_id": order_id,
            "payment_method": "wallet",
            "payment_channel": "DANA",
        }
    )
    assert paid.transaction_status == "PAID"
    payment.answered = True


async def pay_bnpl(
    client: AsyncClient, browser: httpx.AsyncClient, payment: Payment, callback_url: str, n: int
) -> None:
    item = {"itemId": "SKU-1", "name": "Headphones", "amount": {"value": "75000.00", "currency": "IDR"}, "qty": 2}
    checkout = await client.bnpl_checkout(
        {
            "partnerReferenceNo": f"DEP-B-{n}-{secrets.token_hex(4)}",
            "paymentDetails": {"amount": {"value": "150000.00", "currency": "IDR"}},
            "itemDetails": [{**item, "category": "ELEC"}],
            "customerDetails": {"firstName": "Budi", "email": "budi@example.com", "phone": "081234567890"},
            "callbackUrl": callback_url,
        }
    )
    payment.reference = checkout.reference_no
    page = checkout.qr_content or ""
    assert page.startswith(str(browser.base_url)), page  # the page is served through the proxy
    for attempt in range(6):  # a browser's user presses again when the page does not answer
        try:
            forms = await page_forms(browser, page)
            # No form: a try whose answer the proxy lost approved it, and the page shows the outcome.
            approved = await post_form(browser, forms["approve-form"], tenure="3") if "approve-form" in forms else None
        except (httpx.TransportError, AssertionError):
            await asyncio.sleep(0.2 * (attempt + 1))
            continue
        if approved is not None and approved.status_code == 303:
            break
        if approved is None or approved.status_code < 500:  # approved already by the try the proxy lost
            status = await client.bnpl_status(reference_no=checkout.reference_no)
            if status.status == "00":
                break
        await asyncio.sleep(0.2 * (attempt + 1))
    else:
        raise AssertionError(f"the approval of {checkout.reference_no} never went through")
    payment.answered = True


async def pay_card(client: AsyncClient, payment: Payment, callback_url: str, n: int) -> None:
    external_id, order_id = f"DEP-C-{n}-{secrets.token_hex(4)}", f"DEP-CO-{n}"
    payment.order = (external_id, order_id)
    body = charge_body(callback_url=callback_url, externalId=external_id, orderId=order_id)
    key = secrets.token_hex(16)
    # A charge whose server was killed between asking the processor and recording the answer keeps its key
    # in progress (409 with Retry-After) until the surviving worker finishes the stalled call, the stall
    # margin after it was asked (kasir.processors.calls): a merchant retries with the same key until then.
    deadline = time.monotonic() + STALL_MARGIN.total_seconds() + HANG_GUARD_SECONDS
    while True:
        result = await client.card_charge(body, idempotency_key=key)
        if result.status_code != "409" or time.monotonic() > deadline:
            break
    assert result.is_success, (result.status_code, result.message)
    assert result.payment_status == "SUCCESS", result.payment_status
    payment.reference = result.transaction_id
    payment.answered = True


def upstreams_by_phase(access_log: Path, kill_line: int) -> tuple[Counter[str], Counter[str]]:
    """Requests nginx passed to each upstream before and after the kill (by access-log line)."""
    before: Counter[str] = Counter()
    after: Counter[str] = Counter()
    for number, line in enumerate(access_log.read_text().splitlines()):
        for upstream in re.findall(r"127\.0\.0\.1:(\d+)", line):
            (before if number < kill_line else after)[upstream] += 1
    return before, after


async def test_two_servers_two_workers_behind_nginx_survive_a_kill_of_each(deployment: Deployment) -> None:
    async with CallbackReceiver() as receiver:
        # Slow enough answers that the killed worker holds claims in flight when it dies.
        receiver.answer(default=Answer(delay=0.15))
        credentials = create_merchant(deployment, receiver.url("/default"))
        payments = [Payment(kind, f"/{kind}/{n}") for n in range(PER_PRODUCT) for kind in ("wallet", "bnpl", "card")]
        answered = asyncio.Event()
        done = 0
        access_log = deployment.workdir / "access.log"
        killed: dict[str, Any] = {}

        async with (
            AsyncClient(deployment.proxy_url, credentials, max_retries=8, backoff=0.2, timeout=20) as client,
            httpx.AsyncClient(base_url=deployment.proxy_url, timeout=20, trust_env=False) as browser,
        ):
            semaphore = asyncio.Semaphore(4)

            async def one(n: int, payment: Payment) -> None:
                nonlocal done
                url = receiver.url(payment.path)
                async with semaphore:
                    if payment.kind == "wallet":
                        await pay_wallet(client, payment, url, n)
                    elif payment.kind == "bnpl":
                        await pay_bnpl(client, browser, payment, url, n)
                    else:
                        await pay_card(client, payment, url, n)
                done += 1
                if done >= KILL_AFTER:
                    answered.set()

            async def kill_midway() -> None:
                await answered.wait()
                # SIGKILL, as a crash: no graceful end for the requests and attempts in flight.
                killed["log_line"] = len(access_log.read_text().splitlines())
                killed["server_port"] = deployment.server_ports[0]
                deployment.servers[0].send_signal(signal.SIGKILL)
                deployment.workers[0].send_signal(signal.SIGKILL)
                killed["in_flight"] = done

            await asyncio.gather(kill_midway(), *(one(n // 3, p) for n, p in enumerate(payments)))

        assert all(p.answered and p.reference for p in payments)
        assert deployment.servers[0].wait(5) == -signal.SIGKILL
        assert deployment.workers[0].wait(5) == -signal.SIGKILL
        assert deployment.servers[1].poll() is None, deployment.logs()
        assert deployment.workers[1].poll() is None, deployment.logs()

        # Every payment's callback arrives (the survivor takes over the dead worker's claims when their lease ends):
        # waited for until they are all in, the lease included; the hang guard past it ends a wait that never would.
        deadline = time.monotonic() + float(deployment.env["KASIR_CALLBACK_LEASE_SECONDS"]) + HANG_GUARD_SECONDS
        while time.monotonic() < deadline and {r.path for r in receiver.requests} < {p.path for p in payments}:
            await asyncio.sleep(0.2)
        by_path: dict[str, list[Any]] = defaultdict(list)
        for request in receiver.requests:
            by_path[request.path].append(request)
        assert set(by_path) == {p.path for p in payments}, deployment.logs()  # nothing else was called back

        duplicates = 0
        for payment in payments:
            received = by_path[payment.path]
            # One callback per payment event (one id), sent at least once: more copies are the same callback again.
            assert len({r.headers["x-kasir-callback-id"] for r in received}) == 1, payment
            duplicates += len(received) - 1
            for request in received:
                if payment.kind == "wallet":
                    event = verify_wallet_callback(
                        request.body,
                        request.headers,
                        hash_key=credentials.hash_key,
                        query=request.query,
                        order=payment.order,
                    )
                    assert (event.transaction_id, event.transaction_status) == (payment.reference, "PAID")
                elif payment.kind == "card":
                    card_event = verify_payment_page_callback(
                        request.body, request.headers, hash_key=credentials.hash_key, order=payment.order
                    )
                    assert (card_event.transaction_id, card_event.transaction_status) == (payment.reference, "SUCCESS")
                else:
                    notification = verify_bnpl_notification(
                        request.body,
                        request.headers,
                        client_secret=credentials.client_secret,
                        callback_url=receiver.url(payment.path),
                        merchant_id=credentials.merchant_id,
                    )
                    assert notification.original_reference_no == payment.reference
                    assert notification.latest_transaction_status == "00"

        # Kasir's record agrees: every callback delivered, none pending or given up, none for another payment.
        async with httpx.AsyncClient(
            base_url=deployment.proxy_url,
            headers={"Authorization": f"Bearer {deployment.env['KASIR_ADMIN_TOKEN']}"},
            trust_env=False,
        ) as admin:
            # A receipt comes before its record (the worker writes the outcome once the answer is in).
            while True:
                listed = (await admin.get("/admin/callbacks", params={"limit": 1000})).json()["callbacks"]
                if all(c["status"] == "delivered" for c in listed) or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.2)
        assert Counter(c["status"] for c in listed) == {"delivered": len(payments)}
        assert {c["transaction_ref"] for c in listed} == {p.reference for p in payments}

        # The proxy did move traffic: both servers answered before the kill, only the survivor after it.
        before, after = upstreams_by_phase(access_log, killed["log_line"])
        survivor = str(deployment.server_ports[1])
        assert before[str(killed["server_port"])] > 0, before
        assert before[survivor] > 0, before
        assert set(after) <= {str(killed["server_port"]), survivor}
        assert after[survivor] > 0
        print(
            json.dumps(
                {"payments": len(payments), "killed_after": killed["in_flight"], "duplicate_callbacks": duplicates}
            )
        )
