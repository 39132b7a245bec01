"""Nothing Kasir writes in a checkout shows in `git status`: the backup example of
docs/operator/backup-and-restore.md, run where `make run` runs (the project folder, var/), leaves its copy of
secret.key where git does not see it; .gitignore covers the data directory's files wherever it is, the
tools' folders and a partial benchmark run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.markdown import ROOT, blocks
from tests.support.process import end_with_parent

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
GUIDE = ROOT / "docs" / "operator" / "backup-and-restore.md"


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A git repository with the project's .gitignore, committed, as a clone of the project would be."""
    shutil.copy(ROOT / ".gitignore", tmp_path / ".gitignore")
    for command in (
        ["git", "init", "-q"],
        ["git", "add", ".gitignore"],
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.test", "commit", "-qm", "ignore"],
    ):
        subprocess.run(command, cwd=tmp_path, check=True, capture_output=True, timeout=60)
    return tmp_path


def _run(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("KASIR_")}  # var/, as make run
    env.update({"KASIR_ENV": "staging", "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}"})
    completed = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False, preexec_fn=end_with_parent
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    return completed


def _status(checkout: Path) -> str:
    return subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=checkout,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout


def test_the_sqlite_backup_example_leaves_nothing_git_status_shows(checkout: Path) -> None:
    (example,) = [block for block in blocks(GUIDE) if block.runnable]
    _run([str(BIN / "kasir"), "db", "upgrade"], checkout)
    _run([str(BIN / "kasir"), "demo-merchant"], checkout)  # sealed secrets: secret.key is written
    _run(["sh", "-c", example.code], checkout)
    (backup,) = (checkout / "var" / "backups").iterdir()
    assert (backup / "secret.key").read_bytes() == (checkout / "var" / "secret.key").read_bytes()
    assert (backup / "kasir.db").exists()
    assert backup.stat().st_mode & 0o777 == 0o700  # the key and the sealed secrets: its owner's alone
    assert _status(checkout) == ""


def test_gitignore_covers_what_kasir_writes(checkout: Path) -> None:
    written = [
        # The data directory, var/ or another in the checkout (KASIR_DATA_DIR=data)
        "var/kasir.db",
        "var/backups/20261128T100000Z/secret.key",
        "data/kasir.db",
        "data/kasir.db-wal",
        "data/kasir.db-shm",
        "data/secret.key",
        "data/admin.token",
        "data/demo/credentials.json",
        "data/demo/private.pem",
        "data/demo/public.pem",
        "data/demo/get-token.sh",
        "data/demo/console-users.txt",
        "data/backups/20261128T100000Z/kasir.db",
        "data/backups/20261128T100000Z/secret.key",
        "data/backups/20261128T100000Z/kasir.dump",
        # Tools and builds
        ".venv/bin/python",
        "src/kasir/__pycache__/cli.cpython-312.pyc",
        ".pytest_cache/README.md",
        ".mypy_cache/3.12/kasir.json",
        ".ruff_cache/CACHEDIR.TAG",
        ".hypothesis/examples/x",
        ".schemathesis/x",
        "src/kasir.egg-info/PKG-INFO",
        "sdk/build/lib/kasir_client/__init__.py",
        "sdk/dist/kasir_client-0.1.0.tar.gz",
        "node_modules/.package-lock.json",
        "test-artifacts/console-390.png",
        ".env",
        # A partial benchmark run (BENCH_ONLY) and one not finished
        "bench/results/2026-11-28-partial.json",
        "bench/results/2026-11-28-postgres-w1-partial.md",
        "bench/results/2026-11-28.json.tmp",
    ]
    checked = subprocess.run(
        ["git", "check-ignore", "--no-index", "--stdin"],
        cwd=checkout,
        input="\n".join(written) + "\n",
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert sorted(set(written) - set(checked.stdout.splitlines())) == []
    # and what the project keeps is not ignored
    kept = ["bench/results/2026-11-28.json", "bench/results/2026-11-28.md", "docs/pages/wallet-390.png"]
    kept_checked = subprocess.run(
        ["git", "check-ignore", "--no-index", "--stdin"],
        cwd=checkout,
        input="\n".join(kept) + "\n",
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert kept_checked.stdout == ""
