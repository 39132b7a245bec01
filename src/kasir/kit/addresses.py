"""IP addresses as an SSRF guard must read them (no domain knowledge; kasir.callbacks.ssrf applies it).

- `is_public_address`: may a production callback go there? Loopback, private, link-local, CGNAT,
  IETF protocol assignments, benchmarking, documentation, site-local, multicast, reserved and
  unspecified addresses are not public; the IPv6 forms that carry an IPv4 address (mapped,
  compatible, 6to4, NAT64's well-known prefix) are judged by the address they carry; Teredo and
  local-use NAT64 are refused.
- `numeric_ipv4`: a host written as an IPv4 number in any spelling a resolver or browser reads
  (`2130706433`, `0177.0.0.1`, `0x7f.0.0.1`, `127.1`, `0x7f000001`): the WHATWG URL standard's
  IPv4 parser, which reads what inet_aton reads.
- `parse_allowed_networks`: KASIR_CALLBACK_ALLOWED_NETWORKS, the operator's private networks
  where production callbacks may also go; only networks of one's own are accepted there.
"""

from __future__ import annotations

import ipaddress
import re

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

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
        "3fff::/20",  # documentation (RFC 9637)
        "64:ff9b:1::/48",  # local-use NAT64 (RFC 8215): a translator of the network's own, to anywhere
    )
)
# IPv6 forms that carry an IPv4 address: the embedded address decides.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")

# Where an operator's own network can be: loopback, RFC 1918, CGNAT, IPv6 loopback and unique-local.
# Never public space (a public address needs no allowance, and an allowance would let it take
# plain http), never link-local (cloud metadata lives at 169.254.169.254).
ALLOWABLE_NETWORKS = tuple(
    ipaddress.ip_network(network)
    for network in (
        "127.0.0.0/8",
        "10.0.0.0/8",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "100.64.0.0/10",
        "::1/128",
        "fc00::/7",
    )
)
# Cloud metadata services inside those ranges (Alibaba Cloud in CGNAT, AWS's IPv6 one in fd00::/8):
# an allowed network may not contain them.
METADATA_ADDRESSES = tuple(ipaddress.ip_address(address) for address in ("100.100.100.200", "fd00:ec2::254"))


def is_public_address(address: str | IPAddress) -> bool:
    ip = ipaddress.ip_address(address)
    if any(ip.version == network.version and ip in network for network in _NOT_PUBLIC):
        return False
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.teredo is not None:
            return False  # a tunnel to wherever its relay leads: never a merchant's callback address
        embedded = _embedded_ipv4(ip)
        if embedded is not None:
            return is_public_address(embedded)
    return not (
        ip.is_private
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
        or not ip.is_global
    )


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 form carries (mapped, compatible, 6to4, NAT64); None for a plain one."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip in _IPV4_COMPATIBLE and int(ip) > 1:  # ::, ::1 are judged as themselves
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def describe(address: str | IPAddress) -> str:
    """The address for a refusal: an IPv6 form that carries an IPv4 address says which."""
    ip = ipaddress.ip_address(address)
    embedded = _embedded_ipv4(ip) if isinstance(ip, ipaddress.IPv6Address) and ip.teredo is None else None
    return str(ip) if embedded is None else f"{ip}, which carries {embedded}"


def in_networks(address: str | IPAddress, networks: tuple[IPNetwork, ...] | list[IPNetwork]) -> bool:
    """Is the address inside one of the networks (an IPv4-mapped IPv6 address as its IPv4 address)?"""
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip.version == network.version and ip in network for network in networks)


_NUMBER = re.compile(r"(0[xX][0-9a-fA-F]*|[0-9]+)")


def ends_in_a_number(host: str) -> bool:
    """WHATWG "ends in a number": such a host is an IPv4 address or invalid, never a name to look up."""
    labels = host.split(".")
    if labels[-1] == "" and len(labels) > 1:
        labels.pop()
    return bool(_NUMBER.fullmatch(labels[-1]))


def numeric_ipv4(host: str) -> ipaddress.IPv4Address | None:
    """The IPv4 address a host ending in a number spells (decimal, octal with a leading 0, hex with
    0x; one to four parts, the last filling the remaining bytes); None if it spells none."""
    parts = host.split(".")
    if parts[-1] == "" and len(parts) > 1:
        parts.pop()
    if not 1 <= len(parts) <= 4:
        return None
    numbers: list[int] = []
    for part in parts:
        if not _NUMBER.fullmatch(part):
            return None
        if part[:2] in ("0x", "0X"):
            numbers.append(int(part[2:] or "0", 16))
        elif len(part) > 1 and part.startswith("0"):
            if any(digit in "89" for digit in part):
                return None
            numbers.append(int(part, 8))
        else:
            numbers.append(int(part))
    *leading, last = numbers
    if any(number > 255 for number in leading) or last >= 256 ** (5 - len(numbers)):
        return None
    value = last
    for index, number in enumerate(leading):
        value += number << (8 * (3 - index))
    return ipaddress.IPv4Address(value)


def parse_allowed_networks(text: str) -> list[IPNetwork]:
    """KASIR_CALLBACK_ALLOWED_NETWORKS: comma-separated CIDR networks inside ALLOWABLE_NETWORKS.
    ValueError (one sentence naming the bad entry) for anything else."""
    networks: list[IPNetwork] = []
    for entry in (part.strip() for part in text.split(",")):
        if not entry:
            continue
        try:
            network = ipaddress.ip_network(entry, strict=True)
        except ValueError as exc:
            if "has host bits set" in str(exc):
                loose = ipaddress.ip_network(entry, strict=False)
                raise ValueError(f"{entry!r} has host bits set (the network is {loose})") from None
            raise ValueError(f"{entry!r} is not a CIDR network such as 10.20.0.0/16 or fd12:3456::/48") from None
        if not any(_inside(network, allowable) for allowable in ALLOWABLE_NETWORKS):
            allowable = ", ".join(str(inside) for inside in ALLOWABLE_NETWORKS)
            raise ValueError(f"{entry!r} is not inside a private network ({allowable})")
        metadata = [str(address) for address in METADATA_ADDRESSES if address in network]
        if metadata:
            raise ValueError(f"{entry!r} contains a cloud metadata address ({metadata[0]})")
        networks.append(network)
    return networks


def _inside(network: IPNetwork, outer: IPNetwork) -> bool:
    if network.version != outer.version:
        return False
    first, last = int(network.network_address), int(network.broadcast_address)
    return int(outer.network_address) <= first and last <= int(outer.broadcast_address)
