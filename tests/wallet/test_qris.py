"""QRIS: the EMVCo payload (TLV, CRC-16/CCITT-FALSE) and its PNG, checked with independent code."""

from __future__ import annotations

import binascii
import struct
import zlib
from typing import Any

import httpx
import segno
from fastapi import FastAPI

from kasir.wallet.qris import crc16_ccitt_false
from tests.support.builders import make_merchant
from tests.support.wire.wallet import create


def crc_ccitt_false(data: bytes) -> int:
    # binascii.crc_hqx is CRC-CCITT (poly 0x1021, no reflection); seeded with 0xFFFF it is CCITT-FALSE.
    return binascii.crc_hqx(data, 0xFFFF)


def tlv(data: str) -> dict[str, str]:
    out: dict[str, str] = {}
    i = 0
    while i < len(data):
        tag, length = data[i : i + 2], int(data[i + 2 : i + 4])
        out[tag] = data[i + 4 : i + 4 + length]
        assert len(out[tag]) == length
        i += 4 + length
    assert i == len(data)
    return out


def test_crc_matches_the_check_value() -> None:
    assert crc16_ccitt_false(b"123456789") == 0x29B1  # the catalogue's check value of CRC-16/CCITT-FALSE
    assert crc_ccitt_false(b"123456789") == 0x29B1


async def test_qr_string_is_a_well_formed_emvco_payload(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    tx = await create(
        client,
        merchant,
        channel="QRIS",
        amount=123_456,
        items=[{"item_id": "A", "name": "Teh", "amount": 123_456, "qty": 1}],
    )
    payload: str = tx["qr_string"]
    assert payload.isascii()
    assert payload[-8:-4] == "6304"
    assert int(payload[-4:], 16) == crc_ccitt_false(payload[:-4].encode())
    assert payload[-4:] == payload[-4:].upper()
    fields = tlv(payload)
    assert list(fields)[0] == "00"
    assert fields["00"] == "01"
    assert fields["01"] == "12"  # dynamic
    assert fields["53"] == "360"
    assert fields["54"] == "123456"
    assert fields["58"] == "ID"
    assert 0 < len(fields["59"]) <= 25
    assert 0 < len(fields["60"]) <= 15
    assert list(fields)[-1] == "63"
    assert tlv(fields["26"])["00"]
    assert tlv(fields["51"])["00"] == "ID.CO.QRIS.WWW"
    additional = tlv(fields["62"])
    assert additional["05"] == tx["transaction_id"]  # the transaction reference
    assert additional["01"] == tx["order_id"][:25]

    image = await client.get(tx["qr_url"].removeprefix("http://kasir.test"))
    assert image.status_code == 200
    assert image.headers["content-type"] == "image/png"
    assert png_modules(image.content) == [list(map(bool, row)) for row in segno.make(payload, error="m").matrix]


async def test_no_qr_image_for_other_channels(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    tx = await create(client, merchant, channel="DANA")
    assert (await client.get(f"/ewallet/qr/{tx['transaction_id']}.png")).status_code == 404
    assert (await client.get("/ewallet/qr/WLTNOSUCH.png")).status_code == 404


def png_modules(png: bytes) -> list[list[bool]]:
    """Decode the PNG (any bit depth, grey or palette, no interlace) and sample one pixel per module."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks, idat = 8, {}, b""
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        kind = png[pos + 4 : pos + 8]
        data = png[pos + 8 : pos + 8 + length]
        if kind == b"IDAT":
            idat += data
        else:
            chunks[kind] = data
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", chunks[b"IHDR"])
    assert interlace == 0
    assert colour in (0, 3)
    raw = zlib.decompress(idat)
    stride = (width * depth + 7) // 8
    rows: list[bytearray] = []
    previous = bytearray(stride)
    i = 0
    for _ in range(height):
        kind, line = raw[i], bytearray(raw[i + 1 : i + 1 + stride])
        i += 1 + stride
        bpp = max(1, depth // 8)
        for x in range(stride):
            left = line[x - bpp] if x >= bpp else 0
            up, corner = previous[x], previous[x - bpp] if x >= bpp else 0
            if kind == 1:
                line[x] = (line[x] + left) & 0xFF
            elif kind == 2:
                line[x] = (line[x] + up) & 0xFF
            elif kind == 3:
                line[x] = (line[x] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[x] = (line[x] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 0xFF
        rows.append(line)
        previous = line

    def pixel(x: int, y: int) -> int:
        bit = x * depth
        value = (rows[y][bit // 8] >> (8 - depth - bit % 8)) & ((1 << depth) - 1)
        if colour == 3:
            palette: Any = chunks[b"PLTE"]
            return int(palette[value * 3])
        return value * 255 // ((1 << depth) - 1)

    scale, border = 6, 4  # as served
    modules = (width // scale) - 2 * border
    return [
        [pixel((border + c) * scale + scale // 2, (border + r) * scale + scale // 2) < 128 for c in range(modules)]
        for r in range(modules)
    ]
