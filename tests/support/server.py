"""`kasir serve` as a real subprocess, for tests that must cross a real socket."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from tests.support.postgres import free_port
from tests.support.process import HANG_GUARD_SECONDS, end_with_parent


class ServedKasir:
    def __init__(
        self,
        env: dict[str, str],
        *,
        args: tuple[str, ...] = (),
        open_files: int | None = None,
        wrapper: Callable[[list[str]], list[str]] | None = None,
    ) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.env = {**os.environ, **env, "KASIR_PUBLIC_URL": self.base_url}
        self.args = args
        self.open_files = open_files  # the server's RLIMIT_NOFILE (`ulimit -n`)
        # `kasir serve ...` as run: perhaps prefixed (blackhole_dns.in_resolver_namespace), its process the server.
        self.wrapper = wrapper or (lambda command: command)
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = Path(env["KASIR_DATA_DIR"]) / f"serve-{self.port}.log"

    def start(self) -> None:
        kasir = Path(sys.executable).parent / "kasir"
        self._log = self.log_path.open("ab")  # a restart (after `kill`) goes on in the same log
        self.process = subprocess.Popen(  # noqa: S603 (our own kasir binary, perhaps in a namespace of its own)
            self.wrapper([str(kasir), "serve", "--port", str(self.port), *self.args]),
            env=self.env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            preexec_fn=self._prepare_child,
        )
        # Until /healthz answers, or the process has exited (then it never will). However long a start
        # takes on a busy machine; HANG_GUARD_SECONDS only ends a start that hangs.
        deadline = time.monotonic() + HANG_GUARD_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self._log.close()
                raise RuntimeError(f"kasir serve exited: {self.log()}")
            try:
                if httpx.get(f"{self.base_url}/healthz", timeout=1).status_code == 200:  # a slower one: asked again
                    return
            except httpx.TransportError:
                time.sleep(0.1)
        self.stop()  # never leave a half-started server running after the tests
        raise RuntimeError(f"kasir serve did not start: {self.log()}")

    def _prepare_child(self) -> None:
        end_with_parent()
        if self.open_files is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (self.open_files, self.open_files))

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def log_once_it_has(self, text: str) -> str:
        """The log, once `text` is in it: a request's line is written as its response goes out, not before.

        Also once the process has ended (nothing more will be written), or HANG_GUARD_SECONDS on: the log as
        it is then, for the caller's assertion to show.
        """
        deadline = time.monotonic() + HANG_GUARD_SECONDS
        while text not in (log := self.log()) and time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                return self.log()
            time.sleep(0.05)
        return log

    def kill(self) -> None:
        """SIGKILL, as a crash would: no shutdown, no rollback; `start()` again afterwards."""
        assert self.process is not None
        self.process.kill()
        self.process.wait()
        self._log.close()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
