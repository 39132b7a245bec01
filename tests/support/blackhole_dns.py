"""A DNS server that reads every query and answers none, and the means to make a process ask it.

`BlackHoleDns` listens on port 53 (UDP and TCP) of a loopback address and never answers: a resolver that
asks it waits its whole timeout, as it would for a name server that drops queries. It counts the queries it
read, by name, so a test waits for "the lookup reached the name server" as an event.

A process asks it through its system resolver (glibc's getaddrinfo, which Kasir's NameLookups use) when its
/etc/resolv.conf names it. `in_resolver_namespace(command, dns)` is the command prefixed so that it runs in
a private mount namespace where /etc/resolv.conf is bind-mounted over by a file naming only this server
(`unshare`, util-linux; root only): nothing else on the machine sees the change. The names to use are ones
/etc/hosts cannot answer and glibc sends to DNS (`hooks.blackhole.test`): nsswitch's `files dns`. The namespace
may have an /etc/hosts of its own too (`hosts_file`): names that resolve at once, through the same getaddrinfo,
without a name server.

The server runs on threads of its own, not on a test's event loop: it keeps reading (and counting) while the
loop is busy or blocked, as a real name server would.
"""

from __future__ import annotations

import contextlib
import random
import selectors
import shlex
import socket
import struct
import threading
import time
from collections import Counter
from pathlib import Path
from types import TracebackType

BLACK_HOLE_NAME = "hooks.blackhole.test"

# The resolver's own limits in the namespace (resolv(5)): it waits the longest it can for each query and
# asks once, so each lookup holds its thread 30 s, longer than any of Kasir's timeouts.
RESOLVER_OPTIONS = "options timeout:30 attempts:1"


def question_name(message: bytes) -> str | None:
    """The name of a DNS query's first question (RFC 1035 4.1), or None when the message is not one."""
    if len(message) < 12 or struct.unpack("!H", message[4:6])[0] < 1:
        return None
    labels, offset = [], 12
    while offset < len(message):
        length = message[offset]
        if length == 0:
            return ".".join(labels).lower()
        if length & 0xC0 or offset + 1 + length > len(message):  # a query's question is never compressed
            return None
        labels.append(message[offset + 1 : offset + 1 + length].decode("ascii", errors="replace"))
        offset += 1 + length
    return None


class BlackHoleDns:
    """A name server on `host`:53 that never answers. `host` None: a free address of 127.0.0.0/8 other than
    127.0.0.1, so a name server of the machine's own on 127.0.0.1 (or 127.0.0.53) is left alone."""

    def __init__(self, host: str | None = None) -> None:
        self.host = host or _free_loopback_address()
        self.port = 53
        self.queries: Counter[str] = Counter()  # name -> queries read (UDP and TCP)
        self._arrived = threading.Condition()
        self._stopping = threading.Event()
        self._udp: socket.socket | None = None
        self._tcp: socket.socket | None = None
        self._held: list[socket.socket] = []  # TCP connections kept open, never answered
        self._threads: list[threading.Thread] = []

    def start(self) -> BlackHoleDns:
        self._udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._udp.bind((self.host, self.port))
        self._tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._tcp.bind((self.host, self.port))
        self._tcp.listen(64)
        thread = threading.Thread(target=self._serve, name="blackhole-dns", daemon=True)
        thread.start()
        self._threads.append(thread)
        return self

    def stop(self) -> None:
        self._stopping.set()
        for thread in self._threads:
            thread.join(5)
        for sock in [self._udp, self._tcp, *self._held]:
            if sock is not None:
                sock.close()
        self._held.clear()

    def __enter__(self) -> BlackHoleDns:
        return self.start()

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.stop()

    def resolv_conf(self, directory: Path) -> Path:
        """A resolv.conf naming only this server, written into `directory`."""
        path = directory / f"resolv-{self.host}.conf"
        path.write_text(f"nameserver {self.host}\n{RESOLVER_OPTIONS}\n")
        return path

    def count(self, name: str = BLACK_HOLE_NAME) -> int:
        with self._arrived:
            return self.queries[name.lower()]

    def wait_for_queries(self, count: int = 1, *, name: str = BLACK_HOLE_NAME, timeout: float) -> int:
        """Until `count` queries for `name` were read (the lookups reached the name server); the count then.
        `timeout` only ends a wait that would otherwise hang: the count is returned, whatever it is."""
        deadline = time.monotonic() + timeout
        with self._arrived:
            while self.queries[name.lower()] < count and (left := deadline - time.monotonic()) > 0:
                self._arrived.wait(left)
            return self.queries[name.lower()]

    def _read(self, message: bytes) -> None:
        name = question_name(message)
        if name is not None:
            with self._arrived:
                self.queries[name] += 1
                self._arrived.notify_all()

    def _serve(self) -> None:
        assert self._udp is not None
        assert self._tcp is not None
        buffers: dict[socket.socket, bytes] = {}
        with selectors.DefaultSelector() as selector:
            selector.register(self._udp, selectors.EVENT_READ)
            selector.register(self._tcp, selectors.EVENT_READ)
            while not self._stopping.is_set():
                for key, _ in selector.select(timeout=0.2):
                    sock = key.fileobj
                    assert isinstance(sock, socket.socket)
                    if sock is self._udp:
                        with contextlib.suppress(OSError):
                            self._read(sock.recv(65535))
                    elif sock is self._tcp:
                        with contextlib.suppress(OSError):
                            connection, _ = sock.accept()
                            self._held.append(connection)
                            buffers[connection] = b""
                            selector.register(connection, selectors.EVENT_READ)
                    else:
                        data = b""
                        with contextlib.suppress(OSError):
                            data = sock.recv(65535)
                        if not data:  # the resolver gave up and closed
                            selector.unregister(sock)
                            buffers.pop(sock, None)
                            self._held.remove(sock)
                            sock.close()
                            continue
                        # DNS over TCP: each message after its two-byte length (RFC 1035 4.2.2).
                        buffer = buffers[sock] + data
                        while len(buffer) >= 2 and len(buffer) >= 2 + (size := struct.unpack("!H", buffer[:2])[0]):
                            self._read(buffer[2 : 2 + size])
                            buffer = buffer[2 + size :]
                        buffers[sock] = buffer


def _free_loopback_address() -> str:
    """An address of 127.0.0.0/8 whose port 53 is free for UDP and TCP (Linux routes the whole block to lo)."""
    rng = random.Random()  # noqa: S311 (an address to try, no secret)
    for _ in range(50):
        host = f"127.{rng.randrange(1, 255)}.{rng.randrange(0, 256)}.{rng.randrange(1, 255)}"
        try:
            for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM):
                with socket.socket(socket.AF_INET, kind) as probe:
                    probe.bind((host, 53))
        except OSError:
            continue
        return host
    raise RuntimeError("no loopback address with a free port 53 (binding port 53 needs root)")


def in_resolver_namespace(command: list[str], resolv_conf: Path, hosts: Path | None = None) -> list[str]:
    """`command` run in a private mount namespace whose /etc/resolv.conf is `resolv_conf` (and /etc/hosts
    `hosts`, if given); root only.

    `unshare` without --fork execs its command, which execs `command`: the process started is the one
    that ends up running it (its pid, its signals, its death signal with the parent).
    """
    mounts = [(resolv_conf, "/etc/resolv.conf")] + ([(hosts, "/etc/hosts")] if hosts is not None else [])
    binds = " && ".join(f"mount --bind {shlex.quote(str(source))} {target}" for source, target in mounts)
    script = f"{binds} && exec {shlex.join(command)}"
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script]


def hosts_file(directory: Path, names: dict[str, str]) -> Path:
    """An /etc/hosts with localhost and `names` (name -> address): names the resolver answers without DNS."""
    path = directory / "hosts"
    lines = ["127.0.0.1 localhost", *(f"{address} {name}" for name, address in names.items())]
    path.write_text("\n".join(lines) + "\n")
    return path
