"""SSRF guard for callback URLs in production (decisions.md §8).

A callback URL must be https and every address its host resolves to must be public:
loopback, private, link-local, CGNAT (100.64/10), IETF protocol assignments (192.0.0/24),
benchmarking, site-local, multicast, reserved, unspecified, and the IPv6 forms that carry an
IPv4 address (mapped, compatible, 6to4, NAT64) are judged by the address they carry; Teredo
is refused. Delivery connects to the address that was
checked (not to a second DNS answer), keeping the host name for Host and TLS SNI.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from urllib.parse import urlsplit

from kasir.errors import InvalidFieldFormat

# Refused on top of what Python's `is_global` says: it calls some of these global.
_NOT_PUBLIC = tuple(
    ipaddress.ip_network(network)
    for network in (
        "100.64.0.0/10",  # CGNAT (shared address space)
        "192.0.0.0/24",  # IETF protocol assignments (192.0.0.8, 192.0.0.9 ...)
        "198.18.0.0/15",  # benchmarking
        "fec0::/10",  # site-local (deprecated, still routed inside some networks)
        "100::/64",  # discard-only
        "2001:db8::/32",  # documentation
    )
)
# IPv6 forms that carry an IPv4 address: the embedded address decides.
_SIX_TO_FOUR = ipaddress.ip_network("2002::/16")
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")


class UnsafeCallbackUrl(InvalidFieldFormat):
    pass


def is_public_address(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(ip)
        if embedded is not None:
            return embedded is not False and is_public_address(str(embedded))
    if any(ip.version == network.version and ip in network for network in _NOT_PUBLIC):
        return False
    return not (
        ip.is_private
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
        or not ip.is_global
    )


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | bool | None:
    """The IPv4 address an IPv6 form carries (mapped, compatible, 6to4, Teredo, NAT64); False for a
    form refused whatever it carries; None for a plain IPv6 address."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.teredo is not None:
        return False  # a tunnel to wherever its relay leads: never a merchant's callback address
    if ip.sixtofour is not None:
        return ip.sixtofour
    if any(ip in network for network in _NAT64):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip in _IPV4_COMPATIBLE and int(ip) > 1:  # ::, ::1 are judged as themselves
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def check_url_shape(url: str, field: str = "callback_url") -> None:
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.hostname:
        raise UnsafeCallbackUrl(field, "must be an https URL in production")


async def resolve_public(url: str, field: str = "callback_url") -> str:
    """The first public address of the URL's host; UnsafeCallbackUrl if any address is not public."""
    check_url_shape(url, field)
    parts = urlsplit(url)
    host = parts.hostname
    assert host is not None
    port = parts.port or 443
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise UnsafeCallbackUrl(field, f"host {host} does not resolve") from exc
    addresses = [str(info[4][0]) for info in infos]
    for address in addresses:
        if not is_public_address(address):
            raise UnsafeCallbackUrl(field, f"resolves to a non-public address ({address})")
    return addresses[0]


async def check_callback_url(url: str, *, production: bool, field: str = "callback_url") -> None:
    """For request validation: staging allows any http(s) URL, production only public https."""
    if production:
        await resolve_public(url, field)
        return
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidFieldFormat(field, "must be an absolute http(s) URL")
