"""The provider's Node SDK's card requests (its three charges and its inquiry), as it sends them, against a served
Kasir (real HTTP on 127.0.0.1): tests/card/sdk_dialect.mjs, run with Debian's `nodejs` (scripts/system-deps.sh), no
npm package."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from kasir_client import verify_payment_page_callback

from kasir.card.repository import card_repository
from kasir.kit.clock import clock
from tests.support.builders import make_merchant
from tests.support.receiver import CallbackReceiver
from tests.support.server import ServedKasir

SCRIPT = Path(__file__).with_name("sdk_dialect.mjs")


async def run_node(config: dict[str, Any]) -> dict[str, Any]:
    node = shutil.which("node")
    assert node is not None, "node is required: scripts/system-deps.sh installs Debian's nodejs"
    process = await asyncio.create_subprocess_exec(
        node, str(SCRIPT), json.dumps(config), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=120)
    assert process.returncode == 0, stderr.decode()
    results: dict[str, Any] = json.loads(stdout.decode().strip().splitlines()[-1])
    return results


async def test_the_node_sdks_requests_are_answered_as_it_reads_them(
    app: FastAPI, served: ServedKasir, receiver: CallbackReceiver
) -> None:
    merchant = await make_merchant(app)
    creds = merchant.credentials
    results = await run_node(
        {
            "baseUrl": served.base_url,
            "merchantId": creds.merchant_id,
            "secretUnboundId": creds.secret,
            "hashKey": creds.hash_key,
            "callbackUrl": receiver.url("/node"),
            "year": str(clock.local_now().year + 3),
        }
    )
    assert results["chargeHtml"]["responseCode"] == "00"
    assert results["chargeLink"]["data"]["link"].startswith(f"{served.base_url}/card/pages/")
    direct = results["chargeDirect"]
    assert (direct["responseCode"], direct["responseMessage"], direct["data"]["status"]) == ("00", "Success", "SUCCESS")
    assert (results["declined"]["data"]["status"], results["chargeDirectV2"]["data"]["status"]) == ("FAILED", "SUCCESS")
    assert results["wrongSignature"]["responseCode"] == "04"
    inquired = results["inquiry"]["data"]
    assert (inquired["transactionStatus"], inquired["paymentMode"], inquired["paymentChannel"]) == (
        "PAID",
        "INSTALLMENT",
        "BCAPG",
    )
    assert results["inquiryUnknown"] == {"responseCode": "02", "responseMessage": "Data Not Found"}

    transaction_id = direct["data"]["transactionData"]["transactionId"]
    async with app.state.database.unit_of_work(read_only=True) as session:
        order = await card_repository.get(session, transaction_id)
        assert order is not None
        assert (order.status, order.tenor, order.dialect, order.merchant_id) == (
            "SUCCESS",
            "3",
            "v3",
            creds.merchant_id,
        )

    # Its callback: the instalments shown, signed by the interface's formula.
    callbacks = await receiver.wait_for(4, path="/node")  # html charge, direct, declined (FAILED), v2 by token
    [mine] = [c for c in callbacks if c.json()["transaction_id"] == transaction_id]
    event = verify_payment_page_callback(
        mine.body, mine.headers, hash_key=creds.hash_key, order=(direct["externalId"], direct["orderId"])
    )
    assert (event.transaction_status, event.raw["payment_mode"], event.raw["tenor"]) == ("SUCCESS", "INSTALLMENT", 3)
