"""The callbacks' HTTP transport (kasir.kit.http_client) against real servers on 127.0.0.1: plain and TLS."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from kasir.kit.http_client import KeepAliveTransport

OK = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 16\r\n\r\n{"message":"ok"}'


@dataclass
class Server:
    """A raw HTTP/1.1 server: `answer(reader, writer, request_number_on_connection)` decides each exchange."""

    answer: Callable[[asyncio.StreamReader, asyncio.StreamWriter, int], Awaitable[bool]]
    connections: int = 0
    bodies: list[bytes] = field(default_factory=list)
    server_names: list[str | None] = field(default_factory=list)
    port: int = 0
    closed: int = 0  # connections this side has closed (its FIN sent)
    _closing: asyncio.Condition = field(default_factory=asyncio.Condition)

    async def has_closed(self, count: int) -> None:
        async with self._closing:
            await self._closing.wait_for(lambda: self.closed >= count)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        number = 0
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.lower().split(b"\r\n")
                length = next((int(line[15:]) for line in lines if line.startswith(b"content-length:")), 0)
                self.bodies.append(await reader.readexactly(length) if length else b"")
                number += 1
                if not await self.answer(reader, writer, number):
                    return
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
            async with self._closing:
                self.closed += 1
                self._closing.notify_all()


async def answer_ok(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, number: int) -> bool:
    writer.write(OK)
    await writer.drain()
    return True


@pytest.fixture
async def serve() -> AsyncIterator[Callable[..., Awaitable[Server]]]:
    servers: list[asyncio.Server] = []

    async def start(answer=answer_ok, tls: ssl.SSLContext | None = None) -> Server:  # type: ignore[no-untyped-def]
        server = Server(answer)
        listening = await asyncio.start_server(server.handle, "127.0.0.1", 0, ssl=tls)
        server.port = listening.sockets[0].getsockname()[1]
        servers.append(listening)
        return server

    yield start
    for listening in servers:
        listening.close()


def client(**transport_options: object) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=KeepAliveTransport(**transport_options), timeout=5)  # type: ignore[arg-type]


async def test_requests_reuse_one_keep_alive_connection(serve) -> None:
    server = await serve()
    async with client() as http:
        for n in range(5):
            response = await http.post(f"http://127.0.0.1:{server.port}/cb", content=f"body {n}".encode())
            assert (response.status_code, response.json()) == (200, {"message": "ok"})
            assert response.http_version == "HTTP/1.1"
    assert server.connections == 1
    assert server.bodies == [f"body {n}".encode() for n in range(5)]


async def test_concurrent_requests_each_get_a_connection_then_share_them(serve) -> None:
    server = await serve()
    async with client() as http:
        url = f"http://127.0.0.1:{server.port}/cb"
        first = await asyncio.gather(*(http.post(url, content=b"x") for _ in range(8)))
        second = await asyncio.gather(*(http.post(url, content=b"y") for _ in range(8)))
    assert all(r.status_code == 200 for r in first + second)
    assert server.connections == 8  # the second wave reused the first wave's connections


async def test_chunked_and_large_bodies_are_read_whole(serve) -> None:
    payload = bytes(range(256)) * 1000  # 256 kB, several reads

    async def chunked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, number: int) -> bool:
        writer.write(b"HTTP/1.1 202 Accepted\r\nTransfer-Encoding: chunked\r\n\r\n")
        for start in range(0, len(payload), 10_000):
            piece = payload[start : start + 10_000]
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        return True

    server = await serve(chunked)
    async with client() as http:
        for _ in range(2):
            response = await http.post(f"http://127.0.0.1:{server.port}/cb", content=b"{}")
            assert response.status_code == 202
            assert response.content == payload
    assert server.connections == 1


async def test_an_answer_with_connection_close_is_not_reused(serve) -> None:
    async def closing(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, number: int) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        return False

    server = await serve(closing)
    async with client() as http:
        for _ in range(3):
            assert (await http.post(f"http://127.0.0.1:{server.port}/cb", content=b"{}")).text == "ok"
    assert server.connections == 3


async def test_a_connection_the_server_closed_while_idle_is_not_reused(serve) -> None:
    async def then_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, number: int) -> bool:
        await answer_ok(reader, writer, number)
        return False  # keep-alive timeout on the server's side, without a word

    async def streamed() -> AsyncIterator[bytes]:
        yield b"{}"  # a streamed body is not sent twice: a closed connection must be noticed before it is tried

    server = await serve(then_close)
    async with client() as http:
        for _ in range(3):
            response = await http.post(
                f"http://127.0.0.1:{server.port}/cb", content=streamed(), headers={"Content-Length": "2"}
            )
            assert response.status_code == 200
            # Its FIN is in the client's socket once the server has closed; the client learns of it when the
            # event loop reads that socket: a turn to find it readable, one to run the read.
            await server.has_closed(server.connections)
            for _ in range(2):
                await asyncio.sleep(0)
    assert server.connections == 3
    assert server.bodies == [b"{}"] * 3


async def test_the_keep_alive_race_is_sent_once_more_on_a_new_connection(serve) -> None:
    async def drop_the_second(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, number: int) -> bool:
        if number == 2:
            return False  # closes just as the request arrived: nothing answered
        return await answer_ok(reader, writer, number)

    server = await serve(drop_the_second)
    async with client() as http:
        url = f"http://127.0.0.1:{server.port}/cb"
        assert (await http.post(url, content=b"first")).status_code == 200
        assert (await http.post(url, content=b"second")).status_code == 200
    assert server.connections == 2
    assert server.bodies == [b"first", b"second", b"second"]


async def test_a_new_connection_closed_without_an_answer_is_an_error_not_a_retry(serve) -> None:
    async def drop(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, number: int) -> bool:
        return False

    server = await serve(drop)
    async with client() as http:
        with pytest.raises(httpx.RemoteProtocolError, match="without sending a response"):
            await http.post(f"http://127.0.0.1:{server.port}/cb", content=b"{}")
    assert server.bodies == [b"{}"]


async def test_a_malformed_answer_is_a_protocol_error(serve) -> None:
    async def garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, number: int) -> bool:
        writer.write(b"NOT HTTP AT ALL\r\n\r\n")
        await writer.drain()
        return True

    server = await serve(garbage)
    async with client() as http:
        with pytest.raises(httpx.RemoteProtocolError):
            await http.post(f"http://127.0.0.1:{server.port}/cb", content=b"{}")


async def test_timeouts_and_refusals_are_httpx_errors_and_leave_no_broken_connection(serve) -> None:
    timed_out = asyncio.Event()

    async def late_first(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, number: int) -> bool:
        if len(server.bodies) == 1:  # the first request of all: answered once the client has given up
            await timed_out.wait()
        return await answer_ok(reader, writer, number)

    server = await serve(late_first)
    async with httpx.AsyncClient(transport=KeepAliveTransport(), timeout=0.2) as http:
        url = f"http://127.0.0.1:{server.port}/cb"
        with pytest.raises(httpx.ReadTimeout):
            await http.post(url, content=b"{}")
        timed_out.set()
        # The timed-out connection is closed, not handed to the next request (which would read the late answer).
        assert (await http.post(url, content=b"{}")).status_code == 200
    assert server.connections == 2

    async with client() as http:
        with pytest.raises(httpx.ConnectError):
            await http.post(f"http://127.0.0.1:{_closed_port()}/cb", content=b"{}")


async def test_a_cancelled_request_does_not_leave_its_connection_to_the_next(serve) -> None:
    cancelled = asyncio.Event()

    async def late(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, number: int) -> bool:
        await cancelled.wait()  # answered once the first request was given up
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nlate")
        await writer.drain()
        return True

    server = await serve(late)
    async with client() as http:
        url = f"http://127.0.0.1:{server.port}/cb"
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.05):  # the worker's own bound on an attempt
                await http.post(url, content=b"{}")
        cancelled.set()
        assert (await http.post(url, content=b"{}")).text == "late"
    assert server.connections == 2


async def test_idle_connections_expire(serve) -> None:
    server = await serve()
    async with client(keepalive_expiry=0.05) as http:
        url = f"http://127.0.0.1:{server.port}/cb"
        await http.post(url, content=b"{}")
        await http.post(url, content=b"{}")
        await asyncio.sleep(0.1)  # wall-clock time: the expiry runs on it, and this is twice the expiry
        await http.post(url, content=b"{}")
    assert server.connections == 2


async def test_tls_with_the_server_name_of_the_checked_address(serve, tmp_path: Path) -> None:
    """The worker connects to the IP literal its SSRF check resolved; the certificate is the merchant's host's."""
    server_tls, client_tls = tls_contexts(tmp_path, "merchant.example")
    server = await serve(tls=server_tls)
    seen: list[str | None] = []
    server_tls.sni_callback = lambda _sock, name, _ctx: seen.append(name)  # type: ignore[assignment]
    async with httpx.AsyncClient(transport=KeepAliveTransport(ssl_context=client_tls), timeout=5) as http:
        url = f"https://127.0.0.1:{server.port}/cb"
        for _ in range(2):
            response = await http.post(url, content=b"{}", extensions={"sni_hostname": "merchant.example"})
            assert response.status_code == 200
        assert server.connections == 1
        assert seen == ["merchant.example"]
        # Without the name, the certificate does not match the address: refused, as it must be.
        with pytest.raises(httpx.ConnectError, match="certificate"):
            await http.post(url, content=b"{}")


def _closed_port() -> int:
    """A port nothing listens on (bound, then let go)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def tls_contexts(directory: Path, host: str) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A self-signed certificate for `host` (not for 127.0.0.1): the server's context and a client trusting it."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = directory / "cert.pem", directory / "key.pem"
    cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(cert_file, key_file)
    client = ssl.create_default_context(cafile=str(cert_file))
    return server, client
