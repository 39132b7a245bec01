"""A throwaway `kasir serve` for the attack scripts (slow_clients.py, flood.py): its own SQLite file, its log,
and what the kernel says about its memory. Never anything but 127.0.0.1."""

from __future__ import annotations

import contextlib
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

ADMIN_TOKEN = "attack-script-admin-token"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def raise_own_file_limit() -> None:
    """The attacking side needs more sockets than the server it attacks."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _status(self, field: str) -> int:
        """A /proc/<pid>/status memory line in KiB (VmRSS now, VmHWM the peak)."""
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
        return 0

    def rss_mib(self) -> float:
        return self._status("VmRSS") / 1024

    def peak_rss_mib(self) -> float:
        return self._status("VmHWM") / 1024

    def log_bytes(self) -> int:
        return self.log_path.stat().st_size

    def alive(self) -> bool:
        return self.process.poll() is None

    def probe(self, timeout: float = 2.0) -> float | None:
        """Seconds a health probe took on a fresh connection, None when it got no 200 within the timeout."""
        started = time.monotonic()
        try:
            answer = httpx.get(f"{self.base_url}/healthz", timeout=timeout)
        except httpx.HTTPError:
            return None
        return time.monotonic() - started if answer.status_code == 200 else None


@contextlib.contextmanager
def served(env: dict[str, str] | None = None, *, open_files: int | None = None) -> Iterator[Server]:
    """`kasir serve` on a free port with a fresh SQLite file; `open_files` sets its RLIMIT_NOFILE."""
    kasir = str(Path(sys.executable).parent / "kasir")
    with tempfile.TemporaryDirectory(prefix="kasir-attack-") as directory:
        port = free_port()
        settings = {
            **os.environ,
            "NO_PROXY": "127.0.0.1,localhost",
            "KASIR_ENV": "staging",
            "KASIR_DATA_DIR": directory,
            "KASIR_SECRET_KEY": "attack-script-secret-key",
            "KASIR_ADMIN_TOKEN": ADMIN_TOKEN,
            "KASIR_PUBLIC_URL": f"http://127.0.0.1:{port}",
            **(env or {}),
        }
        subprocess.run([kasir, "db", "upgrade"], env=settings, check=True, capture_output=True)

        def limit_files() -> None:
            if open_files is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))

        log_path = Path(directory) / "serve.log"
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                [kasir, "serve", "--host", "127.0.0.1", "--port", str(port)],
                env=settings,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=limit_files,
            )
            server = Server(process, port, log_path)
            try:
                deadline = time.monotonic() + 30
                while server.probe(1) is None:
                    if not server.alive() or time.monotonic() > deadline:
                        raise RuntimeError(f"kasir serve did not start:\n{log_path.read_text(errors='replace')}")
                    time.sleep(0.2)
                yield server
            finally:
                process.terminate()
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


def mib(count: int) -> str:
    return f"{count / 1024 / 1024:.1f} MiB"
