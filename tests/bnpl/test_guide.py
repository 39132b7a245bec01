"""The BNPL guide's signing functions (docs/merchant/bnpl.md) sign requests Kasir accepts (both variants)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI

from kasir.kit.crypto import private_key_pem
from tests.support.builders import make_merchant
from tests.support.wire import compact
from tests.support.wire.snap import access_token, calculation_body, checkout_body, snap_timestamp

GUIDE = (Path(__file__).resolve().parents[2] / "docs" / "merchant" / "bnpl.md").read_text()


def readme_script() -> dict[str, Any]:
    section = GUIDE.split("## Signing functions to reuse", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match is not None
    namespace: dict[str, Any] = {"__name__": "readme"}
    exec(compile(match.group(1), "bnpl.md", "exec"), namespace)  # noqa: S102 (our own guide)
    return namespace


async def test_readme_script_signs_both_variants(app: FastAPI, client: httpx.AsyncClient) -> None:
    script = readme_script()
    merchant = await make_merchant(app)
    path = "/v1.0/bnpl/payment-calculation"
    body = compact(calculation_body()).replace(",", ",\n  ")  # whitespace outside strings
    timestamp = snap_timestamp()
    signature = script["sign_asymmetric"](private_key_pem(merchant.private_key), "POST", path, body, timestamp)
    response = await client.post(path, content=body, headers=script["headers"](merchant.id, signature, timestamp))
    assert response.status_code == 200, response.text

    token = await access_token(client, merchant)
    path = "/v1.1/bnpl/qr-checkout"
    body = compact(checkout_body())
    timestamp = snap_timestamp()
    signature = script["sign_symmetric"](merchant.credentials.client_secret, "POST", path, token, body, timestamp)
    response = await client.post(
        path, content=body, headers=script["headers"](merchant.id, signature, timestamp, token)
    )
    assert response.status_code == 200, response.text
    assert response.json()["responseCode"] == "2009200"
