"""The link's customer pages (docs/decisions.md §10.4), on the card page's layout (Jinja2, no inline script):
the checkout (one button per offered method, in request order), the VA's instructions, and Kasir's own
result page where the merchant gave no redirect URL. Amounts in Indonesian rupiah (`Rp150.000`).
"""

from __future__ import annotations

from typing import Any

from kasir.kit.clock import JAKARTA
from kasir.kit.money import rupiah
from kasir.kit.templates import templates
from kasir.links.repository import LinkRow
from kasir.links.schemas import CARD, QRIS, VA
from kasir.links.service import channels_of, page_path, sent
from kasir.links.states import MAX_FAILED_ATTEMPTS
from kasir.va.repository import VaRow

# What the customer reads for a bank's VA (the entries' codes are the provider's).
BANK_NAMES = {
    "BCA": "BCA",
    "BRI": "BRI",
    "MANDIRI": "Mandiri",
    "BNI": "BNI",
    "PERMATA": "Permata",
    "CIMB": "CIMB Niaga",
    "BSI": "BSI",
    "BNC": "Bank Neo Commerce",
}
VA_REFRESH_SECONDS = 15  # the VA page looks again this often (a meta refresh: no script)
WALLET_NAMES = {"OVO": "OVO", "DANA": "DANA", "SHOPEEPAY": "ShopeePay", "LINKAJA": "LinkAja", "VIRGO": "Virgo"}


def _when(moment: Any) -> str:
    return moment.astimezone(JAKARTA).strftime("%d %b %Y, %H:%M WIB")


def _common(link: LinkRow, merchant_name: str) -> dict[str, Any]:
    return {
        "merchant_name": merchant_name,
        "order_id": link.order_id,
        "amount_text": rupiah(link.amount, compact=True),
        "expires_text": _when(link.expires_at),
    }


def _method(channel: str, acq: str, va_bank: str | None) -> dict[str, Any]:
    if channel == CARD:
        return {"channel": channel, "acq": acq, "button": "Credit or debit card", "label": "Card", "asks_wallet": False}
    if channel == VA:
        bank = BANK_NAMES.get(va_bank or "", acq)
        return {
            "channel": channel,
            "acq": acq,
            "button": f"{bank} virtual account",
            "label": bank,
            "asks_wallet": False,
        }
    if channel == QRIS:
        return {"channel": channel, "acq": acq, "button": "QRIS", "label": "QRIS", "asks_wallet": False}
    name = WALLET_NAMES.get(channel, channel)
    return {"channel": channel, "acq": acq, "button": f"Pay with {name}", "label": name, "asks_wallet": True}


def render_checkout(link: LinkRow, merchant_name: str, *, csrf: str, message: str | None) -> str:
    from kasir.va.banks import CHANNELS as VA_CHANNELS

    given = sent(link)
    customer = given["customer_details"]
    items = [
        {"name": item["name"], "qty": item["qty"], "price_text": rupiah(item["amount"] * item["qty"], compact=True)}
        for item in given["item_details"]
    ]
    methods = [_method(e.channel, e.acq or e.channel, VA_CHANNELS.get(e.acq or "")) for e in channels_of(link)]
    left = MAX_FAILED_ATTEMPTS - link.attempts_failed
    attempts_text = (
        f"{left} attempt{'s' if left != 1 else ''} left." if link.attempts_failed else "Choose a method to pay."
    )
    return templates.get_template("links/checkout.html").render(
        **_common(link, merchant_name),
        description=link.description,
        items=items,
        customer_name=customer["full_name"],
        email=customer["email"] if customer["is_email_show"] else "",
        phone=customer["phone"] if customer["is_phone_show"] else "",
        wallet_id=customer["phone"],
        methods=methods,
        action=f"{page_path(link.id)}/choose",
        csrf=csrf,
        message=message,
        attempts_text=attempts_text,
    )


def grouped(number: str) -> str:
    """A VA number in groups of four, as banks print them (the customer types the digits alone)."""
    return " ".join(number[i : i + 4] for i in range(0, len(number), 4))


def render_va(link: LinkRow, merchant_name: str, va: VaRow, *, simulated: bool, pay_token: str) -> str:
    return templates.get_template("links/va.html").render(
        **_common(link, merchant_name),
        bank_name=BANK_NAMES.get(va.bank, va.bank),
        va_number=va.va_number,
        va_number_text=grouped(va.va_number),
        billing_name=va.billing_name,
        va_id=va.id,
        page=page_path(link.id),
        simulated=simulated,
        pay_token=pay_token,
        refresh_seconds=VA_REFRESH_SECONDS,
    )


def render_result(link: LinkRow, merchant_name: str, status: str) -> str:
    paid = status == "SUCCESS"
    return templates.get_template("links/result.html").render(
        **_common(link, merchant_name),
        status=status,
        heading="Payment successful" if paid else "This payment link has expired",
        message=None if paid else link.response_message,
    )
