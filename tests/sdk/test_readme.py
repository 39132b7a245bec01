"""sdk/README.md's runnable examples (marked `<!-- sdk-readme: run -->`) against the real server.

The blocks run as a merchant would paste them, in one namespace, with only the addresses and file
names replaced: the server's URL for http://127.0.0.1:8000, a local receiver for the shop's
callback URLs, the test merchant's files for credentials.json and private.pem. The callback
handler is then fed the callbacks Kasir really sent: a PAID one ships the order once; the same
callback delivered again (its id seen) does not; after the refund, a replay of the PAID callback
under a new id is refused by the inquiry; a forged signature is answered 401.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from kasir_client import Client, verify_va_callback

from tests.support.builders import make_merchant
from tests.support.receiver import CallbackReceiver

pytestmark = pytest.mark.slow

README = Path(__file__).resolve().parents[2] / "sdk" / "README.md"
RUNNABLE = re.compile(r"<!-- sdk-readme: run -->\n```python\n(.*?)```", re.S)


def runnable_blocks() -> list[str]:
    return RUNNABLE.findall(README.read_text())


def test_every_python_block_is_marked_runnable():
    """A Python example that is not run is one that may not work: every one is marked."""
    every = re.findall(r"```python\n", README.read_text())
    assert len(runnable_blocks()) == len(every) == 10


async def test_readme_examples_run_against_the_server(app, served, receiver: CallbackReceiver, tmp_path):
    merchant = await make_merchant(app)
    c = merchant.credentials
    credentials_file = tmp_path / "credentials.json"
    credentials_file.write_text(
        json.dumps(
            {
                "merchant_id": c.merchant_id,
                "client_id": c.client_id,
                "client_secret": c.client_secret,
                "secret": c.secret,
                "hash_key": c.hash_key,
            }
        )
    )
    key_file = tmp_path / "private.pem"
    key_file.write_bytes(
        merchant.private_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )

    def localised(code: str) -> str:
        for original, here in (
            ('"credentials.json"', repr(str(credentials_file))),
            ('"private.pem"', repr(str(key_file))),
            ("http://127.0.0.1:8000", served.base_url),
            ("https://shop.example/kasir/", receiver.url("/kasir/")),
        ):
            code = code.replace(original, here)
        return code

    blocks = [localised(block) for block in runnable_blocks()]
    [handler] = [i for i, block in enumerate(blocks) if "def on_wallet_callback" in block]
    printed: list[str] = []
    namespace: dict[str, Any] = {"print": lambda *args: printed.append(" ".join(map(str, args)))}

    clients: list[Client] = []

    def run(*indexes: int) -> None:
        for i in indexes:
            exec(compile(blocks[i], f"sdk/README.md block {i + 1}", "exec"), namespace)  # noqa: S102
            clients.extend(v for v in namespace.values() if isinstance(v, Client) and v not in clients)

    try:
        # Create and pay (blocks 1 and 2), then the handler meets the PAID callback Kasir sent.
        await asyncio.to_thread(run, 0, 1, handler)
        assert printed[0].split()[1] == "PENDING"
        [paid] = await receiver.wait_for(1, path="/kasir/wallet")
        assert paid.headers["x-kasir-attempt"] == "1"

        def deliver(body: bytes, headers: dict[str, str], query: dict[str, str]) -> int:
            status: int = namespace["on_wallet_callback"](body, headers, query)
            return status

        assert await asyncio.to_thread(deliver, paid.body, paid.headers, paid.query) == 200
        assert printed[-1] == "ship ORDER-1001"
        assert namespace["SEEN"] == {paid.headers["x-kasir-callback-id"]}
        shipped = len(printed)
        assert await asyncio.to_thread(deliver, paid.body, paid.headers, paid.query) == 200  # delivered again
        assert len(printed) == shipped

        # The other blocks in order: options, refund and inquiry, virtual account, payment link, BNPL, card, errors.
        await asyncio.to_thread(run, *[i for i in range(2, len(blocks)) if i != handler])
        namespace_kasir = namespace["kasir"]
        assert namespace["refunded"].refunded_amount == 30_000
        assert namespace["status"].transaction_status == "REFUNDED"
        assert namespace["options"].options
        # The virtual account: paid in staging, its callback verifies with the SDK.
        va = namespace["va"]
        assert namespace["transfer"].reference_id
        [va_paid] = await receiver.wait_for(1, path="/kasir/va")
        event = verify_va_callback(va_paid.body, va_paid.headers, hash_key=c.hash_key, query=va_paid.query,
                                   order=("SHOP-V-1001", "ORDER-1003"))  # fmt: skip
        assert (event.transaction_id, event.transaction_status, event.va_number) == (
            va.transaction_id,
            "PAID",
            va.va_number,
        )
        # The payment link: created PENDING, its page answers.
        link = namespace["link"]
        assert link.transaction_id.startswith("PPL")
        assert link.payment_url.startswith(served.base_url + "/payment-page/pages/")
        assert namespace["checkout"].status == "01"
        assert namespace["later"].reference_no == namespace["checkout"].reference_no
        assert namespace["charge"].is_success, namespace["charge"].error
        assert namespace["charge"].link
        assert any(line.startswith("409 03 ") for line in printed)  # the ConflictError of the errors block
        assert namespace_kasir.on_request is namespace["log_request"]

        # The PAID callback replayed under a new id after the refund: the inquiry says REFUNDED.
        replayed = {**paid.headers, "x-kasir-callback-id": "999999"}
        assert await asyncio.to_thread(deliver, paid.body, replayed, paid.query) == 200
        assert len(printed) == len([p for p in printed if p != "ship ORDER-1001"]) + 1  # shipped once only
        assert "999999" not in namespace["SEEN"]

        forged = {**paid.headers, "svc-signature": "0" * 64}
        assert await asyncio.to_thread(deliver, paid.body, forged, {}) == 401
    finally:
        for client in clients:  # the README leaves closing to the reader's application
            client.close()
