"""Waking listeners of a channel after a commit (kasir.db.notify_after_commit, Database.listen).

- In the process: every listener subscribed to the channel here is woken at once.
- In other processes: on PostgreSQL, `NOTIFY <channel>` at commit (kasir.db.postgres). On
  a SQLite file, each listening process has a Unix datagram socket in a directory named
  after the file and the channel (`wake_directory`), and a commit sends one byte to every socket there. A
  byte that cannot be sent (a full queue: that worker is already woken; a socket without a
  listener: a worker that died) is dropped, so a commit never waits for a worker; a worker
  that misses one still polls every KASIR_CALLBACK_POLL_SECONDS.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import hashlib
import os
import secrets
import socket
import tempfile
from collections.abc import Callable
from pathlib import Path

_listeners: dict[str, list[Callable[[], None]]] = {}


def subscribe(channel: str, listener: Callable[[], None]) -> Callable[[], None]:
    listeners = _listeners.setdefault(channel, [])
    listeners.append(listener)
    return lambda: listeners.remove(listener)


def wake(channel: str, wake_directory: Path | None = None) -> None:
    for listener in list(_listeners.get(channel, ())):
        listener()
    if wake_directory is not None:
        _wake_other_processes(wake_directory)


@functools.cache  # every commit that notifies asks: resolve the path once
def wake_directory(sqlite_file: str | None, channel: str) -> Path | None:
    """Where the listeners of one SQLite file's channel wait (None for no file: an in-memory database).

    Short, as a Unix socket's path must be (108 bytes).
    """
    if not sqlite_file or sqlite_file == ":memory:":
        return None
    digest = hashlib.sha256(f"{os.path.realpath(sqlite_file)}\0{channel}".encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"kasir-wake-{digest}"


_sender: socket.socket | None = None


def _wake_other_processes(directory: Path) -> None:
    global _sender
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return  # no worker has listened yet
    if _sender is None:
        _sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        _sender.setblocking(False)
        atexit.register(_sender.close)  # the process's one sender, kept for its life: closed as it ends
    for entry in entries:
        try:
            _sender.sendto(b"\0", entry.path)
        except BlockingIOError:
            pass  # its queue is full of wake-ups already
        except (ConnectionRefusedError, FileNotFoundError):
            with contextlib.suppress(OSError):
                os.unlink(entry.path)  # nobody listens there any more (a worker that was killed)
        except OSError:
            pass  # never fail a commit's after-actions over a wake-up; polling catches up


_BIND_ATTEMPTS = 3


class WakeSocket:
    """A worker process's socket in `directory`: every byte received calls `on_wake`."""

    def __init__(self, directory: Path, on_wake: Callable[[], None]) -> None:
        self.directory = directory
        self.path = directory / f"{os.getpid()}-{secrets.token_hex(4)}"
        self._on_wake = on_wake
        self._socket: socket.socket | None = None

    def open(self, loop: asyncio.AbstractEventLoop) -> None:
        for attempt in range(_BIND_ATTEMPTS):
            self.directory.mkdir(mode=0o700, exist_ok=True)
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            try:
                sock.setblocking(False)
                sock.bind(str(self.path))
            except FileNotFoundError:
                # The last other worker of this file closed and removed the directory between our
                # mkdir and bind: make it again.
                sock.close()
                if attempt == _BIND_ATTEMPTS - 1:
                    raise
                continue
            except OSError:
                sock.close()
                raise
            break
        self._socket = sock
        loop.add_reader(sock.fileno(), self._readable)

    def _readable(self) -> None:
        assert self._socket is not None
        with contextlib.suppress(BlockingIOError):
            while True:
                self._socket.recv(64)
        self._on_wake()

    def close(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._socket is None:
            return
        loop.remove_reader(self._socket.fileno())
        self._socket.close()
        self._socket = None
        with contextlib.suppress(OSError):
            self.path.unlink()
        with contextlib.suppress(OSError):  # only when empty: the last worker of the file leaves none behind
            self.directory.rmdir()
