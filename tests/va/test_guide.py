"""The VA guide (docs/merchant/va.md): it names every route, channel, payment system, state and code, and its
curl flow runs as written against `kasir serve`, the callbacks it causes verifying with the formula computed
here (docs/decisions.md §9.7)."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from pathlib import Path

import pytest
from fastapi import FastAPI

from kasir.va.banks import BANKS, CHANNELS
from kasir.va.states import VaStatus
from tests.support.builders import make_merchant
from tests.support.receiver import CallbackReceiver
from tests.support.server import ServedKasir
from tests.support.wire import x_req_signature
from tests.support.wire.callbacks import callback_signature

GUIDE = (Path(__file__).resolve().parents[2] / "docs" / "merchant" / "va.md").read_text()


def test_the_guide_names_every_route_channel_system_state_and_code() -> None:
    for path in ("/va", "/va/inquiry", "/va/cancel", "/va/dummy-payment"):
        assert f"`{path}`" in GUIDE
    for channel in CHANNELS:
        assert f"`{channel}`" in GUIDE
    for bank in BANKS.values():  # the shipped table, prefixes and all
        assert f"`{bank.closed_prefix}`" in GUIDE
        assert f"| {bank.free_digits} |" in GUIDE
    for system in ("CLOSED", "OPEN", "PARTIAL"):
        assert f"`{system}`" in GUIDE
    for status in VaStatus:
        assert f"`{status.value}`" in GUIDE
    for code in ("00", "01", "02", "03", "04", "98"):
        assert f"| `{code}` |" in GUIDE
    assert "sha256" in GUIDE.lower()
    assert "sub_merchant_id" in GUIDE


@pytest.mark.slow
async def test_the_curl_flow_runs(
    app: FastAPI, served: ServedKasir, receiver: CallbackReceiver, tmp_path: Path
) -> None:
    [block] = re.findall(r"<!-- runnable -->\n```sh\n(.*?)```", GUIDE, re.S)
    merchant = await make_merchant(app)
    creds = tmp_path / "demo" / "credentials.json"
    creds.parent.mkdir()
    creds.write_text(
        json.dumps(
            {
                "merchant_id": merchant.id,
                "secret": merchant.credentials.secret,
                "hash_key": merchant.credentials.hash_key,
            }
        )
    )
    env = {
        "PATH": "/usr/bin:/bin",
        "KASIR_URL": served.base_url,
        "KASIR_DEMO_DIR": str(creds.parent),
        "CALLBACK_URL": receiver.url("/guide"),
        "NO_PROXY": "127.0.0.1,localhost",
    }
    process = await asyncio.create_subprocess_exec(
        "sh", "-e", "-c", block, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    lines = out.decode().splitlines()
    created = json.loads(lines[0])
    assert created["response_code"] == "00"
    assert created["data"]["payment_details"]["va_number"].startswith("40416")
    assert json.loads(lines[1])["data"]["transaction_status"] == "PAID"  # the dummy payment's answer
    assert lines[2:] == ["transaction_status: PAID", "PARTIALLY_PAID", "PAID", "PAID", "CANCELLED"]

    callbacks = await receiver.wait_for(5, path="/guide")
    seen = []
    for request in callbacks:
        payload = request.json()
        expected = callback_signature(
            payload["transaction_id"],
            x_req_signature(merchant.credentials.hash_key, payload["external_id"], payload["order_id"]),
        )
        assert request.headers["svc-signature"] == expected
        assert request.query["svc-signature"] == expected
        seen.append(
            (payload["payment_channel"], payload["transaction_status"], payload["payment_details"]["total_amount"])
        )
    assert sorted(seen) == sorted(
        [("BCA", "PAID", 150_000), ("BRI", "PARTIALLY_PAID", 40_000), ("BRI", "PAID", 60_000),
         ("MANDIRI", "PAID", 25_000), ("MANDIRI", "CANCELLED", 0)]
    )  # fmt: skip
