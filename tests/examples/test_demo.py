"""`make demo` (examples/demo.py) against a real `kasir serve`: every step green."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

from kasir.audit.service import Actor
from kasir.payouts.service import payout_service
from tests.conftest import TEST_ADMIN_TOKEN
from tests.support.builders import make_merchant

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
STEPS = 19
# PAID, REFUNDED, PAID again (replayed: the same X-Kasir-Callback-Id, seen), PAID, VOID; VA: PAID, PAID,
# PARTIALLY_PAID × 2 and PAID, PAID × 2 and CANCELLED; payment links: SUCCESS × 4 (card, DANA, QRIS, VA); BNPL;
# SUCCESS, FAILED; transfers: 00, 00, 06
CALLBACKS = 23


async def test_demo_runs_every_product_against_the_served_service(app, served, tmp_path):
    merchant = await make_merchant(app)
    async with app.state.database.unit_of_work() as session:  # as `kasir demo-merchant` funds the demo merchant
        await payout_service.top_up(session, merchant.id, 100_000_000, "Demo funds", Actor.cli())
    credentials = merchant.credentials
    (tmp_path / "credentials.json").write_text(
        json.dumps(
            {
                "merchant_id": credentials.merchant_id,
                "client_id": credentials.client_id,
                "client_secret": credentials.client_secret,
                "secret": credentials.secret,
                "hash_key": credentials.hash_key,
            }
        )
    )
    (tmp_path / "private.pem").write_bytes(
        merchant.private_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    env = {
        **os.environ,
        "KASIR_URL": served.base_url,
        "KASIR_DEMO_DIR": str(tmp_path),
        "KASIR_ADMIN_TOKEN": TEST_ADMIN_TOKEN,  # the replay step, as an operator
        "COLUMNS": "200",
    }
    completed = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, str(ROOT / "examples" / "demo.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,  # the payout steps wait for the simulator's delay (10 s)
        check=False,
    )
    output = completed.stdout + completed.stderr
    assert completed.returncode == 0, output
    assert output.count("✓") == STEPS, output
    assert "✗" not in output
    for product in ("token", "wallet", "va", "link", "bnpl", "card", "payout"):
        assert f"✓ {product}:" in output
    assert f"callbacks received and verified: {CALLBACKS}" in output
    assert "✓ wallet: operator replays the PAID callback → same id, seen" in output
