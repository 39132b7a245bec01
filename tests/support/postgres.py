"""A throwaway PostgreSQL cluster on 127.0.0.1 for one test session (started and removed here)."""

from __future__ import annotations

import asyncio
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import asyncpg


def _pg_bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if found:
        return found[-1]
    path = shutil.which(name)
    if path is None:
        raise RuntimeError(f"PostgreSQL's {name} not found: run `make test` (it installs the postgresql package)")
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PostgresCluster:
    """`durable=False` (tests) runs with `fsync=off`: fast, and lost with the machine, which a test
    cluster may be. The benchmark measures durable payments: `durable=True` keeps PostgreSQL's
    defaults (every COMMIT waits for its WAL on disk)."""

    def __init__(self, *, durable: bool = False, settings_file: Path | None = None) -> None:
        self.durable = durable
        self.settings_file = settings_file  # a postgresql.conf fragment, included after initdb's defaults
        self.root = Path(tempfile.mkdtemp(prefix="kasir-pg-"))
        self.data = self.root / "data"
        self.port = free_port()
        # initdb refuses to run as root: run the server as the `postgres` system user then.
        self.run_as = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []

    @property
    def log_path(self) -> Path:
        """The server's log: what it says, and what auto_explain writes for a database that asks for it."""
        return self.root / "log"

    def _run(self, *args: str) -> None:
        subprocess.run([*self.run_as, *args], check=True, capture_output=True, cwd="/")

    def start(self) -> str:
        if self.run_as:
            uid = pwd.getpwnam("postgres")
            os.chown(self.root, uid.pw_uid, uid.pw_gid)
        self._run(_pg_bin("initdb"), "-D", str(self.data), "-U", "kasir", "--auth=trust", "-E", "UTF8", "--no-sync")
        if self.settings_file is not None:
            # A copy beside the data (the server's user may not read the worktree), included last: its lines win.
            included = self.data / "kasir-settings.conf"
            included.write_text(self.settings_file.read_text())
            with (self.data / "postgresql.conf").open("a") as conf:
                conf.write(f"\ninclude '{included}'\n")
        self._start_server()
        self._run(_pg_bin("createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "kasir", "kasir")
        return f"postgresql+asyncpg://kasir@127.0.0.1:{self.port}/kasir"

    def _start_server(self) -> None:
        options = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.root} -c max_connections=200"
        if not self.durable:
            options += " -c fsync=off"
        self._run(_pg_bin("pg_ctl"), "-D", str(self.data), "-o", options, "-l", str(self.log_path), "-w", "start")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", self.port)) == 0:
                    break
            time.sleep(0.1)

    def create_database(self, name: str) -> str:
        """A new database `name` on the running server, made over a connection of its own (no process:
        the fast lane starts none); callable from sync and async code alike (it runs on a thread of its own)."""
        assert name.replace("_", "").isalnum(), "a database name written into the statement"

        async def create() -> None:
            connection = await asyncpg.connect(host="127.0.0.1", port=self.port, user="kasir", database="kasir")
            try:
                await connection.execute(f'CREATE DATABASE "{name}"')
            finally:
                await connection.close()

        errors: list[BaseException] = []

        def on_thread() -> None:
            try:
                asyncio.run(create())
            except BaseException as error:  # handed to the caller below
                errors.append(error)

        thread = threading.Thread(target=on_thread, name="create-database")
        thread.start()
        thread.join()
        if errors:
            raise errors[0]
        return f"postgresql+asyncpg://kasir@127.0.0.1:{self.port}/{name}"

    def socket_url(self, name: str = "kasir") -> str:
        """The URL of database `name` over the cluster's Unix socket (in `root`), as a Kasir on PostgreSQL's
        own machine connects (deploy/kasir.env.example)."""
        return f"postgresql+asyncpg://kasir@/{name}?host={self.root}&port={self.port}"

    def restart(self) -> None:
        """Stop the server (its connections are cut, as a crash or a failover would) and start it again."""
        self._run(_pg_bin("pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")
        self._start_server()

    def stop(self) -> None:
        try:
            self._run(_pg_bin("pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
