"""A TypeScript client from the OpenAPI document (issue 42 item 5): openapi-typescript, with its default
options, turns /openapi.json into types, and `tsc --noEmit --strict` accepts tests/support/typescript/merchant.ts,
which builds with them what a shop sends and reads: the dummy payment's answer, the provider SDK's charge and
its answer, and requests with only their required fields.

Both tools are the versions of tests/support/typescript/package-lock.json, installed by `make test` (`make
node-deps`); the test runs them from that folder, offline.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

SUPPORT = Path(__file__).resolve().parent / "support" / "typescript"

pytestmark = pytest.mark.slow


def _npx(*args: str) -> subprocess.CompletedProcess[str]:
    """A tool of SUPPORT's node_modules (`--no`: never one fetched from the registry), offline."""
    env = {**os.environ, "npm_config_offline": "true", "npm_config_update_notifier": "false", "NO_COLOR": "1"}
    return subprocess.run(
        ["npx", "--no", "--", *args], cwd=SUPPORT, env=env, capture_output=True, text=True, timeout=300
    )


async def test_openapi_typescript_types_check_with_tsc_strict(client: httpx.AsyncClient, tmp_path: Path) -> None:
    if not (SUPPORT / "node_modules" / ".bin" / "openapi-typescript").exists():
        pytest.fail(f"openapi-typescript is not installed in {SUPPORT}: run `make node-deps` (make test does)")
    response = await client.get("/openapi.json")
    assert response.status_code == 200
    (tmp_path / "openapi.json").write_text(json.dumps(response.json()))
    shutil.copy(SUPPORT / "merchant.ts", tmp_path / "merchant.ts")

    generated = _npx("openapi-typescript", str(tmp_path / "openapi.json"), "-o", str(tmp_path / "openapi.ts"))
    report = generated.stdout + generated.stderr
    assert generated.returncode == 0, report
    assert "error" not in report.lower(), report
    assert "warn" not in report.lower(), report
    assert "export interface paths" in (tmp_path / "openapi.ts").read_text()

    checked = _npx("tsc", "--noEmit", "--strict", str(tmp_path / "merchant.ts"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
