"""The Makefile's first hour: `make run PORT=...` serves there and tells the demo merchant so; `make demo`
installs what the demo imports (Kasir's runtime and the SDK), not the test toolchain."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAKEFILE = (ROOT / "Makefile").read_text()
DEMO = ROOT / "examples" / "demo.py"


def _prerequisites(target: str) -> list[str]:
    """The prerequisites of `target`'s rule (its first line: the Makefile writes none over two lines)."""
    match = re.search(rf"^{re.escape(target)}:(.*)$", MAKEFILE, re.MULTILINE)
    assert match is not None, target
    return match.group(1).replace("|", " ").split()


def _recipe(target: str) -> str:
    match = re.search(rf"^{re.escape(target)}:.*\n((?:\t.*\n)*)", MAKEFILE, re.MULTILINE)
    assert match is not None, target
    return match.group(1)


def _distribution(requirement: str) -> str:
    return re.split(r"[\[<>=!~;\s]", requirement, maxsplit=1)[0].lower().replace("-", "_")


def test_make_demo_installs_the_runtime_and_the_sdk_not_the_dev_extras() -> None:
    stamps = [prerequisite for prerequisite in _prerequisites("demo") if prerequisite.startswith("$(VENV)/")]
    assert stamps == ["$(VENV)/.demo"]
    installs = _recipe("$(VENV)/.demo")
    assert "-e ./sdk" in installs
    assert ".[dev]" not in installs
    assert _prerequisites("$(VENV)/.demo") == ["sdk/pyproject.toml", "$(VENV)/.runtime"]
    assert "[dev]" not in _recipe("$(VENV)/.runtime")


def test_the_demo_imports_only_the_standard_library_kasirs_runtime_and_the_sdk() -> None:
    """What `make demo` installs is enough: every module examples/demo.py imports is the standard library's, one
    of Kasir's runtime dependencies, or the SDK (kasir_client), and none is a dev extra."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = {_distribution(requirement) for requirement in project["dependencies"]}
    dev = {_distribution(requirement) for requirement in project["optional-dependencies"]["dev"]}
    imported: set[str] = set()
    for node in ast.walk(ast.parse(DEMO.read_text())):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
            imported.add(node.module.split(".")[0])
    third_party = imported - set(sys.stdlib_module_names) - {"__future__"}
    assert "kasir_client" in third_party
    assert third_party - {"kasir_client"} <= runtime, third_party - runtime
    assert not third_party & dev


@pytest.mark.slow
def test_make_run_and_make_demo_take_the_port_and_host(tmp_path: Path) -> None:
    """`make -n`: what make would run, nothing run (a VENV of the test's own, so every install step shows)."""

    def dry_run(*args: str) -> str:
        command = ["make", "-n", "--no-print-directory", f"VENV={tmp_path / 'venv'}", *args]
        return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True, timeout=60).stdout

    run = dry_run("run", "PORT=8080")
    assert "kasir demo-merchant --host 127.0.0.1 --port 8080\n" in run
    assert "kasir serve --host 127.0.0.1 --port 8080\n" in run
    assert "8000" not in run
    everywhere = dry_run("run", "HOST=0.0.0.0", "PORT=8080")
    assert "kasir demo-merchant --host 0.0.0.0 --port 8080\n" in everywhere
    assert "kasir serve --host 0.0.0.0 --port 8080\n" in everywhere

    demo = dry_run("demo", "HOST=0.0.0.0", "PORT=8080")
    assert "KASIR_URL=http://127.0.0.1:8080 " in demo
    assert "pip install -q -e ./sdk\n" in demo
    assert "[dev]" not in demo
