"""The hosted payment page and the closed page (Jinja2, no build step), in staging and production.

The page collects the card and hands it to the configured acquirer (kasir.processors); what
the acquirer wants shown under the form (the simulator's table of cards) is its `page_notice()`.

Card numbers and CVNs are never rendered back: after a declined attempt the page keeps the
expiry, the holder name, the tenor and the save-card choice, and asks for the number and
the CVN again (they exist only in the browser and in the request that carried them).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kasir.card.repository import CardOrderRow
from kasir.card.schemas import TENORS
from kasir.card.states import MAX_FAILED_ATTEMPTS, CardOrderStatus
from kasir.db import Session
from kasir.kit.money import rupiah
from kasir.kit.templates import templates
from kasir.merchants.service import merchant_service
from kasir.processors.registry import simulator_serves


def tenor_options(amount: int) -> list[dict[str, str]]:
    from kasir.card.service import installment

    options = []
    for tenor in TENORS:
        monthly = rupiah(installment(amount, tenor), compact=True)
        label = f"Full payment · {monthly}" if tenor == "0" else f"{tenor} months · {monthly} / month"
        options.append({"tenor": tenor, "monthly_text": monthly, "label": label})
    return options


def chosen_installment(amount: int, tenor: str) -> str:
    from kasir.card.service import installment

    if tenor == "0":
        return f"Full payment: {rupiah(amount, compact=True)}"
    return f"{tenor} × {rupiah(installment(amount, tenor), compact=True)} per month (0% interest)"


def offers_save_card(order: CardOrderRow) -> bool:
    """Whether the page offers "save this card": always, but on a payment link that did not ask for it (§10.1)."""
    return bool(json.loads(order.details).get("offersSaveCard", True))


async def common(session: Session, order: CardOrderRow) -> dict[str, Any]:
    merchant = await merchant_service.get(session, order.merchant_id)
    details: dict[str, Any] = json.loads(order.details)
    items = [
        {
            "name": item["name"],
            "qty": item["qty"],
            "price_text": rupiah(int(item["amount"]) * int(item["qty"]), compact=True),
        }
        for item in details.get("itemDetails", [])
    ]
    return {
        "order": order,
        # A payment link's order is known to the customer by the link's order id (the merchant's), not Kasir's own.
        "order_id": details.get("shownOrderId", order.order_id),
        "offers_save_card": details.get("offersSaveCard", True),
        "merchant_name": merchant.name,
        "amount_text": rupiah(order.amount, compact=True),
        "items": items,
        "description": details.get("paymentDetails", {}).get("transactionDescription", ""),
        "simulated": simulator_serves(
            "card", order.payment_channel
        ),  # the staging banner: never on a real acquirer's page
    }


async def render_payment(
    session: Session,
    order: CardOrderRow,
    *,
    csrf: str,
    message: str | None = None,
    values: dict[str, Any] | None = None,
    errors: dict[str, str] | None = None,
) -> str:
    values = dict(values or {})
    values.setdefault("tenor", order.tenor if order.tenor in TENORS else "0")
    if message is None and order.attempts_failed and order.status == CardOrderStatus.PENDING.value:
        left = MAX_FAILED_ATTEMPTS - order.attempts_failed
        message = f"Payment failed: {order.response_message}. {left} attempt{'s' if left != 1 else ''} left."
    from kasir.processors.registry import card_acquirer

    return templates.get_template("card/payment.html").render(
        **await common(session, order),
        notice=card_acquirer(order.payment_channel).page_notice(),
        action=f"/card/pages/{order.id}/pay",
        attempt=order.attempts_made + 1,
        attempt_label=order.attempts_failed + 1,
        max_attempts=MAX_FAILED_ATTEMPTS,
        csrf=csrf,
        message=message,
        values=values,
        errors=errors or {},
        # A payment link's order is full payment only (docs/decisions.md §10.3).
        tenors=tenor_options(order.amount)[:1] if order.link_id is not None else tenor_options(order.amount),
        chosen_installment=chosen_installment(order.amount, values["tenor"]),
    )


async def render_closed(
    session: Session,
    order: CardOrderRow,
    *,
    return_url: str | None,
    message: str | None = None,
    status: str | None = None,
) -> str:
    """The page of a paid or closed order (`status` EXPIRED for one past expiredTime the worker has yet to close)."""
    paid = order.status == CardOrderStatus.SUCCESS.value
    heading = "Payment successful" if paid else "This payment link is closed"
    return templates.get_template("card/closed.html").render(
        **await common(session, order),
        status=status or order.status,
        heading=heading,
        message=message or (None if paid else order.response_message),
        return_url=return_url,
        link_text=None,
    )


def attempt_number(fields: Mapping[str, str]) -> int:
    """The attempt a page's form (or the challenge's return URL) names; -1 when it names none."""
    value = fields.get("attempt", "")
    return int(value) if value.isdigit() and len(value) < 6 else -1


async def render_refusal(session: Session, order: CardOrderRow, heading: str) -> str:
    """A page's form refused, nothing charged (sent twice, stale token): the card page's and the
    simulator's challenge page's."""
    return await render_notice(
        session,
        order,
        heading=heading,
        message="Nothing was charged by this request. Open the payment page again to see where the payment stands.",
        link=f"/card/pages/{order.id}",
    )


async def render_notice(session: Session, order: CardOrderRow, *, heading: str, message: str, link: str) -> str:
    """A refused form (sent twice, stale token): say so and link back to the page."""
    return templates.get_template("card/closed.html").render(
        **await common(session, order),
        status="NOTICE",
        heading=heading,
        message=message,
        return_url=link,
        link_text="Back to the payment page",
    )
