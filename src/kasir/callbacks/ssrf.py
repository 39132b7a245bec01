"""SSRF guard for callback URLs in production (decisions.md §8).

A callback URL must be https and every address its host resolves to must be public:
loopback, private, link-local, CGNAT (100.64/10), multicast, reserved, unspecified, and
their IPv4-mapped IPv6 forms are refused. Delivery connects to the address that was
checked (not to a second DNS answer), keeping the host name for Host and TLS SNI.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from urllib.parse import urlsplit

from kasir.errors import InvalidFieldFormat

_CGNAT = ipaddress.ip_network("100.64.0.0/10")


class UnsafeCallbackUrl(InvalidFieldFormat):
    pass


def is_public_address(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if isinstance(ip, ipaddress.IPv4Address) and ip in _CGNAT:
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
