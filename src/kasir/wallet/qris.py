"""The EMVCo merchant-presented QR payload of the QRIS channel (dynamic QR).

A payload is a run of TLV fields: a 2-digit id, a 2-digit length, the value; templates
(26-51, 62) nest TLV fields in their value. It ends with field 63, the CRC-16/CCITT-FALSE
(poly 0x1021, init 0xFFFF, no reflection, no final xor) of everything before it including
the `6304` of the CRC field itself, as 4 upper-case hex digits.

    00 payload format "01"          01 point of initiation "12" (dynamic)
    26 merchant account (GUI, PAN, merchant id, criteria)
    51 national merchant id (QRIS: GUI ID.CO.QRIS.WWW, NMID, criteria)
    52 merchant category code       53 currency "360" (IDR)
    54 amount (whole rupiah)        58 country "ID"
    59 merchant name (25)           60 merchant city (15)
    62 additional data: 01 bill number (order id), 05 reference label (transaction id),
       07 terminal label
    63 CRC
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

GUI_ACQUIRER = "ID.CO.KASIR.WWW"
GUI_QRIS = "ID.CO.QRIS.WWW"
MERCHANT_CATEGORY = "5999"  # miscellaneous retail
CURRENCY_IDR = "360"  # ISO 4217 numeric
COUNTRY = "ID"
DEFAULT_CITY = "JAKARTA"


def crc16_ccitt_false(data: bytes) -> int:
    crc = 0xFFFF
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def tlv(tag: str, value: str) -> str:
    if len(tag) != 2 or not tag.isdigit():
        raise ValueError(f"bad EMVCo tag {tag!r}")
    if not 0 < len(value) <= 99:
        raise ValueError(f"EMVCo field {tag} must be 1 to 99 characters")
    return f"{tag}{len(value):02d}{value}"


def parse_tlv(data: str) -> dict[str, str]:
    """One level of TLV fields; ValueError on a malformed run."""
    fields: dict[str, str] = {}
    position = 0
    while position < len(data):
        if position + 4 > len(data):
            raise ValueError("truncated TLV field")
        tag, length = data[position : position + 2], data[position + 2 : position + 4]
        if not (tag.isdigit() and length.isdigit()):
            raise ValueError(f"bad TLV header at {position}")
        end = position + 4 + int(length)
        if end > len(data):
            raise ValueError(f"TLV field {tag} runs past the end")
        fields[tag] = data[position + 4 : end]
        position = end
    return fields


def _ascii(value: str, limit: int) -> str:
    """EMVCo names are ANS: printable ASCII only, cut to the field's length."""
    folded = unicodedata.normalize("NFKD", value).encode("ascii", "ignore").decode()
    cleaned = re.sub(r"[^ -~]", "", folded).strip()
    return (cleaned or "MERCHANT")[:limit].strip() or "MERCHANT"


@dataclass(frozen=True, slots=True)
class QrisPayment:
    merchant_id: str
    merchant_name: str
    amount: int
    transaction_id: str
    order_id: str
    terminal_id: str
    city: str = DEFAULT_CITY


def build_payload(payment: QrisPayment) -> str:
    merchant_digits = "".join(str(ord(ch) % 10) for ch in payment.merchant_id)[-15:].rjust(15, "0")
    account = tlv("00", GUI_ACQUIRER) + tlv("01", "9360" + merchant_digits) + tlv("02", payment.merchant_id[:15])
    account += tlv("03", "UMI")
    national = tlv("00", GUI_QRIS) + tlv("02", "ID" + merchant_digits) + tlv("03", "UMI")
    additional = (
        tlv("01", payment.order_id[:25]) + tlv("05", payment.transaction_id[:25]) + tlv("07", payment.terminal_id)
    )
    body = (
        tlv("00", "01")
        + tlv("01", "12")
        + tlv("26", account)
        + tlv("51", national)
        + tlv("52", MERCHANT_CATEGORY)
        + tlv("53", CURRENCY_IDR)
        + tlv("54", str(payment.amount))
        + tlv("58", COUNTRY)
        + tlv("59", _ascii(payment.merchant_name, 25))
        + tlv("60", _ascii(payment.city, 15))
        + tlv("62", additional)
        + "6304"
    )
    return body + f"{crc16_ccitt_false(body.encode('ascii')):04X}"


def crc_is_valid(payload: str) -> bool:
    if len(payload) < 8 or payload[-8:-4] != "6304":
        return False
    return f"{crc16_ccitt_false(payload[:-4].encode('ascii')):04X}" == payload[-4:]
