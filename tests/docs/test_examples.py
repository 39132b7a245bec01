"""The documentation runs as written: every block marked `<!-- runnable -->` in README.md and docs/ against a live
`kasir serve` (a fresh SQLite database and the demo merchant, as `make run` makes them), every Python block parses
on this Python, every shell block is POSIX `sh` without GNU-only options, and every relative link resolves to a
file of the repository.

Blocks get the service and the merchant through the variables the guides document at their top:
`KASIR_URL` (the service) and `KASIR_DEMO_DIR` (credentials.json and private.pem), and `KASIR_DATA_DIR` (the
admin token). The README's run in the project folder, as the README says; the guides' in an empty directory
of their own. A failure names the block's file and line.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from tests.docs.markdown import ROOT, Block, all_blocks, anchors, documents, links
from tests.support.process import end_with_parent
from tests.support.server import ServedKasir

pytestmark = pytest.mark.slow
# The examples run on a SQLite database of their own, as `make run` serves them: once per `make test` is enough.
ON_ITS_OWN_DATABASE = pytest.mark.skipif(
    os.environ.get("KASIR_TEST_DB", "sqlite") != "sqlite", reason="the docs' server has its own SQLite database"
)

BIN = Path(sys.executable).parent
BLOCKS = all_blocks()
RUNNABLE = [block for block in BLOCKS if block.runnable]
# The guides' main examples: where each must be (at least one runnable block in each file).
MUST_RUN = {
    "README.md",  # the quickstart, ending with a verified callback
    "docs/merchant/authentication.md",  # an access token
    "docs/merchant/wallet.md",  # a wallet payment, the dummy payment, an inquiry
    "docs/merchant/va.md",  # a virtual account of each payment system, paid by the dummy payment
    "docs/merchant/payment-link.md",  # a payment link created and read
    "docs/merchant/bnpl.md",  # a BNPL token and checkout
    "docs/merchant/card.md",  # a card charge
    "docs/merchant/callbacks.md",  # verifying a callback
}
# Options and commands that exist only in GNU coreutils (macOS has BSD ones): use portable sh or Python.
GNU_ONLY = {
    r"date [^|;]*\+[^ ]*%N": "date's %N (nanoseconds) is GNU only",
    r"date [^|;]*%:z": "date's %:z is GNU only",
    r"date -d": "date -d is GNU only",
    r"base64 -w": "base64 -w is GNU only (use `base64 | tr -d '\\n'`)",
    r"\bsha256sum\b": "sha256sum is not on macOS (use `openssl dgst -sha256`)",
    r"sed -i": "sed -i differs between GNU and BSD",
    r"readlink -f": "readlink -f is GNU only",
    r"grep -P": "grep -P is GNU only",
}


def _id(block: Block) -> str:
    return block.where


@pytest.fixture(scope="module")
async def docs_server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[dict[str, str]]:
    """`make run` in miniature: migrate a new SQLite file, create the demo merchant, serve on a free port."""
    data_dir = tmp_path_factory.mktemp("docs-kasir")
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("KASIR_")  # nothing of the test session's own settings
    }
    env.update(
        {
            "KASIR_DATA_DIR": str(data_dir),
            "KASIR_DATABASE_URL": f"sqlite+aiosqlite:///{data_dir / 'kasir.db'}",
            "KASIR_ENV": "staging",
            "KASIR_LOG_FORMAT": "text",
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        }
    )
    server = ServedKasir(env)  # its port first: demo-merchant writes the URL into get-token.sh
    env["KASIR_PUBLIC_URL"] = server.base_url
    for command in (["db", "upgrade"], ["demo-merchant"]):
        completed = await asyncio.to_thread(
            subprocess.run,
            [str(BIN / "kasir"), *command],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            preexec_fn=end_with_parent,
        )
        assert completed.returncode == 0, completed.stdout + completed.stderr
    await asyncio.to_thread(server.start)
    # var/admin.token: on builds where `kasir serve` writes it at start this changes nothing; before them the
    # first admin request wrote it (this one is refused, 401, and writes it).
    await asyncio.to_thread(
        httpx.get, f"{server.base_url}/admin/merchants", headers={"Authorization": "Bearer -"}, timeout=10
    )
    try:
        yield {
            **env,
            "KASIR_URL": server.base_url,
            "KASIR_DEMO_DIR": str(data_dir / "demo"),
        }
    finally:
        await asyncio.to_thread(server.stop)


def _run(command: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, env=env, cwd=cwd, capture_output=True, text=True, timeout=120, check=False, preexec_fn=end_with_parent
    )


def test_the_guides_main_examples_are_marked_runnable() -> None:
    files = {str(block.path.relative_to(ROOT)) for block in RUNNABLE}
    assert MUST_RUN <= files, sorted(MUST_RUN - files)
    for block in RUNNABLE:
        assert block.lang in {"sh", "python"}, f"{block.where}: a runnable block is sh or python, not {block.lang!r}"


@ON_ITS_OWN_DATABASE
@pytest.mark.parametrize("block", RUNNABLE, ids=_id)
async def test_runnable_block(block: Block, docs_server: dict[str, str], tmp_path: Path) -> None:
    script = tmp_path / ("block.py" if block.lang == "python" else "block.sh")
    script.write_text(block.code)
    command = [sys.executable, str(script)] if block.lang == "python" else ["sh", "-e", str(script)]
    cwd = ROOT if block.path == ROOT / "README.md" else tmp_path
    completed = await asyncio.to_thread(_run, command, docs_server, cwd)
    assert completed.returncode == 0, (
        f"{block.where}: exit code {completed.returncode}\n"
        f"--- stdout\n{completed.stdout}\n--- stderr\n{completed.stderr}"
    )


@ON_ITS_OWN_DATABASE
async def test_the_demo_token_script_runs_with_posix_sh(docs_server: dict[str, str], tmp_path: Path) -> None:
    """`make run` writes var/demo/get-token.sh and prints the same lines: POSIX sh, no GNU date or base64."""
    script = Path(docs_server["KASIR_DEMO_DIR"]) / "get-token.sh"
    assert script.read_text().startswith("#!/bin/sh\n")  # `var/demo/get-token.sh` runs as a command too
    completed = await asyncio.to_thread(_run, [str(script)], docs_server, tmp_path)
    assert completed.returncode == 0, completed.stderr
    assert '"responseCode":"2007300"' in completed.stdout, completed.stdout + completed.stderr
    for pattern, why in GNU_ONLY.items():
        assert not re.search(pattern, script.read_text()), why


def test_the_quickstart_receiver_is_the_one_the_callbacks_page_shows() -> None:
    """The README runs examples/verified_callback.py; docs/merchant/callbacks.md shows (and runs) its code."""
    shown = [b.code for b in RUNNABLE if b.where.startswith("docs/merchant/callbacks.md") and b.lang == "python"]
    assert (ROOT / "examples" / "verified_callback.py").read_text() in shown


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.lang == "python"], ids=_id)
def test_every_python_block_parses(block: Block) -> None:
    try:
        compile(block.code, block.where, "exec")
    except SyntaxError as error:
        pytest.fail(f"{block.where}: {error}")


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.lang in {"sh", "bash", "shell"}], ids=_id)
def test_every_shell_block_is_posix_sh(block: Block) -> None:
    assert block.lang == "sh", f"{block.where}: mark shell blocks `sh` (they are POSIX sh)"
    problems = [why for pattern, why in GNU_ONLY.items() if re.search(pattern, block.code)]
    assert not problems, f"{block.where}: {problems}"
    shell = shutil.which("dash") or "sh"  # dash, where installed, knows no bash syntax
    completed = subprocess.run([shell, "-n"], input=block.code, capture_output=True, text=True, check=False)
    assert completed.returncode == 0, f"{block.where}: {completed.stderr}"


def _documents() -> Iterator[Path]:
    yield from documents()
    yield ROOT / "sdk" / "README.md"


@pytest.mark.parametrize("path", list(_documents()), ids=lambda path: str(path.relative_to(ROOT)))
def test_every_relative_link_resolves_to_a_file_of_the_repository(path: Path) -> None:
    text = path.read_text()
    for outside in ("shared/spec", "shared/STYLE"):
        assert outside not in text, f"{path}: points at {outside}, outside the repository"
    for line, target in links(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):
            continue  # https:, mailto:
        name, _, anchor = target.partition("#")
        file = (path.parent / name).resolve() if name else path
        where = f"{path.relative_to(ROOT)}:{line}: {target}"
        assert file.is_relative_to(ROOT), f"{where} leaves the repository"
        assert file.exists(), f"{where} does not exist"
        if anchor and file.suffix == ".md":
            assert anchor in anchors(file), f"{where}: no such heading in {file.relative_to(ROOT)}"


def _documented(path: str, text: str) -> bool:
    """`path` appears in `text`, any `{parameter}` matching any `{name}`; `/v1.1/` routes may be named as aliases."""
    if path.startswith("/v1.1/") and _documented(path.replace("/v1.1/", "/v1.0/", 1), text):
        return f"/v1.1/{path.split('/', 2)[2]}" in text or "/v1.1/bnpl/..." in text
    pattern = re.sub(r"\\\{[^}]*\\\}", r"\\{[^}]+\\}", re.escape(path))
    return re.search(f"`(?:GET |POST |DELETE |PUT |PATCH )?{pattern}[`/ ,]", text) is not None


async def test_every_route_of_the_api_is_documented(app) -> None:
    text = "\n".join(path.read_text() for path in (ROOT / "docs").rglob("*.md"))
    missing = [path for path in app.openapi()["paths"] if not _documented(path, text)]
    assert not missing, missing


def test_every_error_code_is_in_the_errors_page() -> None:
    """Every card `statusMessage` and wallet `response_code` the code can answer is explained in errors.md."""
    page = (ROOT / "docs" / "merchant" / "errors.md").read_text()
    source = "\n".join(path.read_text() for path in (ROOT / "src" / "kasir").rglob("*.py"))
    card = set(re.findall(r'card_status = "([A-Z_]+)"', source))
    wallet = set(re.findall(r'wallet_code = "(\d\d)"', source))
    assert {"VALIDATION_ERROR", "INVALID_CARD", "IDEMPOTENCY_KEY_REUSED"} <= card  # the search still finds them
    missing = sorted(f"card {c}" for c in card if f"`{c}`" not in page)
    missing += sorted(f"wallet {w}" for w in wallet if f"| `{w}` |" not in page)
    assert not missing, missing
