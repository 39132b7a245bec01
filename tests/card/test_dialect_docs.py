"""docs/merchant/card-dialect.md: its Node and Python examples run against a served Kasir as written."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import sys
from pathlib import Path

from fastapi import FastAPI

from tests.support.builders import make_merchant
from tests.support.server import ServedKasir

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "merchant" / "card-dialect.md"


def example(language: str) -> str:
    [code] = re.findall(rf"```{language}\n(.*?)```", GUIDE.read_text(), flags=re.S)
    return code


async def run(command: list[str], env: dict[str, str]) -> list[str]:
    process = await asyncio.create_subprocess_exec(
        *command, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=120)
    assert process.returncode == 0, stderr.decode()
    return stdout.decode().splitlines()


async def test_the_guides_examples_run(app: FastAPI, served: ServedKasir, tmp_path: Path) -> None:
    merchant = await make_merchant(app)
    creds = merchant.credentials
    env = {
        **os.environ,
        "KASIR_URL": served.base_url,
        "MERCHANT_ID": creds.merchant_id,
        "SECRET": creds.secret,
        "HASH_KEY": creds.hash_key,
    }
    script = tmp_path / "example.mjs"
    script.write_text(example("js"))
    node = shutil.which("node")
    assert node is not None, "node is required: scripts/system-deps.sh installs Debian's nodejs"
    direct, inquired, by_token, charged = await run([node, str(script)], env)
    assert re.fullmatch(r"00 SUCCESS CARD[0-9A-Z]+", direct)
    assert inquired == "00 PAID 481111******1114"
    assert by_token == "00 SUCCESS"
    assert re.fullmatch(rf"00 {re.escape(served.base_url)}/card/pages/CARD[0-9A-Z]+", charged)

    python = tmp_path / "example.py"
    python.write_text(example("python"))
    direct, repeated = await run([sys.executable, str(python)], env)
    assert re.fullmatch(r"00 SUCCESS CTK[0-9A-Z]{32}", direct)
    assert repeated == "03 order_id is already used; use a new unused order_id"
