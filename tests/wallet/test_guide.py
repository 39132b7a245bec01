"""The wallet guide's flow (docs/merchant/wallet.md, POSIX sh and curl) runs as written against `kasir serve`,
and the callbacks it causes verify."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from pathlib import Path

import pytest
from fastapi import FastAPI

from tests.support.builders import make_merchant
from tests.support.receiver import CallbackReceiver
from tests.support.server import ServedKasir
from tests.support.wire import x_req_signature
from tests.support.wire.callbacks import callback_signature

GUIDE = (Path(__file__).resolve().parents[2] / "docs" / "merchant" / "wallet.md").read_text()


def wallet_section() -> str:
    return GUIDE


def test_the_guide_names_every_channel_and_route() -> None:
    section = wallet_section()
    for channel in ("OVO", "DANA", "SHOPEEPAY", "LINKAJA", "VIRGO", "QRIS"):
        assert f"`{channel}`" in section
    for path in ("create-payment", "create-qr", "inquiry", "refund", "void", "dummy-payment"):
        assert f"/ewallet/v2/{path}" in section


@pytest.mark.slow
async def test_the_curl_flow_runs(
    app: FastAPI, served: ServedKasir, receiver: CallbackReceiver, tmp_path: Path
) -> None:
    blocks = re.findall(r"<!-- runnable -->\n```sh\n(.*?)```", wallet_section(), re.S)
    assert len(blocks) == 2  # pay, check, refund; QRIS, then void
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
        "CALLBACK_URL": receiver.url("/readme"),
        "NO_PROXY": "127.0.0.1,localhost",
        "TZ": "Asia/Jakarta",
    }
    process = await asyncio.create_subprocess_exec(
        "sh",
        "-e",
        "-c",
        "\n".join(blocks),
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    answers = [json.loads(line) for line in out.decode().splitlines() if line.startswith("{")]
    assert [a["response_code"] for a in answers] == ["00"] * 6, answers
    assert [a["transaction_status"] for a in answers] == [
        "PENDING", "PAID", "REFUNDED", "REFUNDED", "PENDING", "PAID",
    ]  # fmt: skip
    assert answers[3]["refunded_amount"] == 150_000
    lines = out.decode().splitlines()
    assert "transaction_status: PAID" in lines  # the inquiry
    assert lines[-1] == "VOID"
    assert (tmp_path / "qris.png").read_bytes().startswith(b"\x89PNG")

    callbacks = await receiver.wait_for(5, path="/readme")
    seen = []
    for request in callbacks:
        payload = request.json()
        expected = callback_signature(
            payload["transaction_id"],
            x_req_signature(merchant.credentials.hash_key, payload["external_id"], payload["order_id"]),
        )
        assert request.headers["svc-signature"] == expected
        assert request.query["svc-signature"] == expected
        seen.append((payload["payment_channel"], payload["transaction_status"]))
    assert sorted(seen) == sorted(
        [("DANA", "PAID"), ("DANA", "REFUNDED"), ("DANA", "REFUNDED"), ("QRIS", "PAID"), ("QRIS", "VOID")]
    )
