"""SSRF guard for callback URLs in production (docs/decisions.md §8).

A callback URL must be https and every address its host resolves to must be public
(kasir.kit.addresses.is_public_address). A host written as an IPv4 number in any spelling
(`2130706433`, `0x7f.1`, `0177.0.0.1`) is read as that address, never handed to the resolver.
Delivery resolves again, checks, and connects to the address it checked (the HTTP client never
looks the name up itself), keeping the host name for Host and TLS SNI: a name that answers a
public address when the URL is given and 127.0.0.1 when it is delivered (DNS rebinding) is
refused at delivery.

An operator may allow private networks of their own (KASIR_CALLBACK_ALLOWED_NETWORKS): a URL
whose every address lies inside them is accepted, http or https; any other address still
has to be public, over https.

Names are looked up with the system's resolver (getaddrinfo: /etc/hosts, DNS, as the host is set up),
which blocks a thread until it answers or gives up, whatever the caller's timeout. So one merchant's
name that never answers must not hold threads others need: lookups run on small thread pools of their
own (`NameLookups`), one for checks on the request path and one for delivery, never on the event
loop's default executor (SQLite's commits run there); a name being looked up is looked up once, every
caller waiting for that one lookup; and a caller waits at most its own timeout.

The resolver is a seam (`use_resolver`): tests answer names without DNS.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import Awaitable, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

from kasir.config import get_settings
from kasir.errors import InvalidFieldFormat
from kasir.kit.addresses import IPNetwork, describe, ends_in_a_number, in_networks, is_public_address, numeric_ipv4
from kasir.kit.fields import is_http_url

__all__ = [
    "DELIVERY_LOOKUPS",
    "REQUEST_LOOKUPS",
    "CheckedTarget",
    "NameLookups",
    "UnsafeCallbackUrl",
    "check_callback_url",
    "delivery_lookup",
    "is_public_address",
    "resolve_checked",
    "use_resolver",
]

Resolver = Callable[[str, int], Awaitable[list[str]]]
"""(host name, port) -> the addresses it resolves to; socket.gaierror if none."""

# How long a check on the request path waits for a name; delivery waits within its attempt's timeout.
LOOKUP_SECONDS = 5.0


def getaddrinfo_addresses(host: str, port: int) -> list[str]:
    """The system resolver's addresses for `host` (blocking)."""
    return [str(info[4][0]) for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)]


class NameLookups:
    """Blocking lookups on a bounded pool of threads of their own, one lookup per name at a time.

    A lookup of a name already being looked up waits for that lookup rather than taking a thread,
    so a name that never answers holds one thread of this pool, however many requests name it.
    """

    def __init__(self, purpose: str, threads: int, lookup: Callable[[str, int], list[str]] = getaddrinfo_addresses):
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix=f"kasir-dns-{purpose}")
        self._lookup = lookup
        self._in_flight: dict[tuple[asyncio.AbstractEventLoop, str, int], asyncio.Future[list[str]]] = {}

    async def __call__(self, host: str, port: int) -> list[str]:
        loop = asyncio.get_running_loop()
        key = (loop, host, port)
        lookup = self._in_flight.get(key)
        if lookup is None:
            lookup = loop.run_in_executor(self._executor, self._lookup, host, port)
            self._in_flight[key] = lookup
            lookup.add_done_callback(lambda done: self._forget(key, done))
        # A caller that gives up (its timeout) leaves the lookup to the others waiting for it.
        return await asyncio.shield(lookup)

    def _forget(self, key: tuple[asyncio.AbstractEventLoop, str, int], done: asyncio.Future[list[str]]) -> None:
        self._in_flight.pop(key, None)
        if not done.cancelled():
            done.exception()  # retrieved: every caller may have given up already


REQUEST_LOOKUPS = NameLookups("request", threads=4)
DELIVERY_LOOKUPS = NameLookups("delivery", threads=8)

_resolver: Resolver | None = None  # use_resolver's, in place of the lookups above


@contextmanager
def use_resolver(resolver: Resolver) -> Iterator[None]:
    """Names resolve through `resolver` inside the block (the process's every check, delivery too)."""
    global _resolver
    previous, _resolver = _resolver, resolver
    try:
        yield
    finally:
        _resolver = previous


def delivery_lookup(host: str, port: int) -> Awaitable[list[str]]:
    """A name looked up as delivery looks names up (DELIVERY_LOOKUPS, or use_resolver's): for the worker's
    transport, which looks up the names of the URLs no check resolved first (staging's)."""
    return (_resolver or DELIVERY_LOOKUPS)(host, port)


class UnsafeCallbackUrl(InvalidFieldFormat):
    pass


@dataclass(frozen=True, slots=True)
class CheckedTarget:
    """Where a checked URL's request goes: `address` to connect to, `host` for Host and SNI."""

    parts: SplitResult
    host: str
    port: int
    address: str


_HOST_NAME = re.compile(r"[a-z0-9_-]+(\.[a-z0-9_-]+)*\.?")


def _split(url: str, field: str) -> tuple[SplitResult, str, int]:
    parts = urlsplit(url)
    if not is_http_url(url) or parts.scheme not in ("http", "https") or not parts.hostname:
        raise UnsafeCallbackUrl(field, "must be an absolute http(s) URL")
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port == 0:
        raise UnsafeCallbackUrl(field, "has an invalid port")
    return parts, parts.hostname, port or (443 if parts.scheme == "https" else 80)


def _literal(host: str, field: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | str:
    """The address a host spells, or the ASCII name to resolve (as the resolver would be given it)."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    try:
        name = host.encode("idna").decode("ascii").lower()  # what socket.getaddrinfo would send
    except UnicodeError:
        raise UnsafeCallbackUrl(field, f"host {host} is not a valid name") from None
    if ends_in_a_number(name):
        address = numeric_ipv4(name)
        if address is None:
            raise UnsafeCallbackUrl(field, f"host {host} is not a valid IPv4 address")
        return address
    if not _HOST_NAME.fullmatch(name):
        raise UnsafeCallbackUrl(field, f"host {host} is not a valid name")
    return name


async def resolve_checked(
    url: str,
    *,
    field: str = "callback_url",
    allowed_networks: Sequence[IPNetwork] | None = None,
    lookups: NameLookups = REQUEST_LOOKUPS,
) -> CheckedTarget:
    """Production's check: every address of the URL's host is public (over https) or inside the
    allowed networks (http or https); the target to connect to, else UnsafeCallbackUrl.
    `allowed_networks` None: the process's KASIR_CALLBACK_ALLOWED_NETWORKS. `lookups`: the pool the
    name is looked up on (delivery has its own), waited for at most LOOKUP_SECONDS."""
    allowed = tuple(get_settings().callback_allowed_networks if allowed_networks is None else allowed_networks)
    parts, host, port = _split(url, field)
    if parts.scheme != "https" and not allowed:
        raise UnsafeCallbackUrl(field, "must be an https URL in production")
    literal = _literal(host, field)
    if isinstance(literal, str):
        try:
            async with asyncio.timeout(LOOKUP_SECONDS):
                addresses = await (_resolver or lookups)(literal, port)
        except (socket.gaierror, UnicodeError) as exc:
            raise UnsafeCallbackUrl(field, f"host {host} does not resolve") from exc
        except TimeoutError:
            raise UnsafeCallbackUrl(field, f"host {host} did not resolve within {LOOKUP_SECONDS:g} s") from None
        if not addresses:
            raise UnsafeCallbackUrl(field, f"host {host} does not resolve")
    else:
        addresses = [str(literal)]
    inside = [in_networks(address, allowed) for address in addresses]
    if parts.scheme != "https" and not all(inside):
        raise UnsafeCallbackUrl(field, "must be an https URL in production (or reach only allowed networks)")
    for address, allowed_address in zip(addresses, inside, strict=True):
        if not allowed_address and not is_public_address(address):
            raise UnsafeCallbackUrl(field, f"resolves to a non-public address ({describe(address)})")
    return CheckedTarget(parts, host, port, addresses[0])


async def check_callback_url(
    url: str, *, production: bool, field: str = "callback_url", allowed_networks: Sequence[IPNetwork] | None = None
) -> None:
    """For request validation: staging allows any http(s) URL, production only public https
    (or the operator's allowed networks; None: KASIR_CALLBACK_ALLOWED_NETWORKS)."""
    if production:
        await resolve_checked(url, field=field, allowed_networks=allowed_networks)
        return
    _split(url, field)
