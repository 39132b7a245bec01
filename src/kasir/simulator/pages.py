"""The simulator's pages: the test-card table, the 3-D Secure OTP page, the wallet checkout page and
the BNPL approval page (Jinja2). Every form carries a token bound to its transaction and form
(kasir.kit.pages.form_token): another site's form cannot pay or fail a payment."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from kasir.kit.money import rupiah
from kasir.kit.pages import form_token
from kasir.kit.templates import templates
from kasir.processors.protocols import BnplApplication, WalletPayment
from kasir.simulator.cards import TEST_CARDS
from kasir.wallet.schemas import FAILURE_CHANNEL


def test_cards_notice() -> str:
    cards = [
        {"number_text": " ".join(card.number[i : i + 4] for i in range(0, len(card.number), 4)),
         "description": card.description}
        for card in TEST_CARDS
    ]  # fmt: skip
    return templates.get_template("simulator/test_cards.html").render(test_cards=cards)


def render_otp(
    common: dict[str, Any],
    *,
    order_id: str,
    attempt: int,
    masked_card: str,
    otp: str,
    csrf: str,
    tries_left: int | None = None,
) -> str:
    """`tries_left`: after a wrong code, how many the customer may still type (None: none was wrong yet)."""
    return templates.get_template("simulator/otp.html").render(
        **common,
        action=f"/card/pages/{order_id}/3ds",
        attempt=attempt,
        csrf=csrf,
        otp=otp,
        masked_card=masked_card,
        tries_left=tries_left,
    )


# What a shopper reads of a wallet payment that no longer waits (the page, and a form sent after it closed):
# words, not the wire's state names.
WALLET_OUTCOMES = {
    "PAID": "Paid. Thank you!",
    "REFUNDED": "Paid, then refunded by the shop.",
    "VOID": "Cancelled by the shop: the payment was returned.",
    "failed": "The payment was declined.",
    "EXPIRED": "This payment expired before it was paid.",
}
WALLET_CLOSED = {
    "PAID": "This payment is already paid.",
    "REFUNDED": "This payment is already paid (and refunded).",
    "VOID": "This payment was cancelled by the shop.",
    "failed": "This payment was declined.",
    "EXPIRED": "This payment has expired.",
}


def render_wallet_checkout(payment: WalletPayment) -> str:
    items = [
        {"name": item.name, "qty": item.qty, "subtotal": rupiah(item.amount * item.qty, compact=True)}
        for item in payment.items
    ]
    outcome = WALLET_OUTCOMES.get(payment.status, "")
    if payment.status == "failed" and payment.failure_reason:
        outcome = f"{outcome} {payment.failure_reason}"
    return templates.get_template("simulator/wallet_checkout.html").render(
        simulated=True,
        reference=payment.reference,
        order_id=payment.order_id,
        merchant_name=payment.merchant_name,
        channel=payment.channel,
        amount=payment.amount,
        total=rupiah(payment.amount, compact=True),
        items=items,
        customer_name=payment.customer_name,
        status=payment.status,
        pending=payment.status == "PENDING",
        paid=payment.status == "PAID",
        outcome=outcome,
        return_url=payment.return_url,
        can_fail=payment.channel == FAILURE_CHANNEL,
        qr_image=payment.qr_image_url,
        pay_token=form_token("wallet-pay", payment.reference),
        fail_token=form_token("wallet-fail", payment.reference),
    )


def render_wallet_refusal(transaction_id: str, message: str, merchant_name: str = "") -> str:
    return templates.get_template("simulator/wallet_refusal.html").render(
        simulated=True, transaction_id=transaction_id, message=message, merchant_name=merchant_name
    )


# The BNPL application's outcome in the customer's words (not the SNAP codes and descriptions).
BNPL_OUTCOMES = {
    "00": "Approved: you pay in {tenure} monthly installments of {monthly}.",
    "05": "This application expired before you decided.",
    "06": "You declined paying later: nothing will be charged.",
}
BNPL_CLOSED = {
    "00": "You already approved this plan.",
    "05": "This application has expired.",
    "06": "You already declined this plan.",
}


def _plan(plan: Mapping[str, Any]) -> dict[str, Any]:
    """One installment plan as the customer reads it: what a month costs, what it all costs and why. On a 0 %
    plan the installments rounded up to whole rupiah may add a few rupiah: that is rounding, not interest."""
    provision = Decimal(plan["provision"]["value"])
    interest = Decimal(plan["totalInterest"]["value"])
    parts = [f"Total {rupiah(Decimal(plan['installmentAmount']['value']), compact=True)}"]
    if provision:
        parts.append(f"provision {rupiah(provision, compact=True)}")
    if plan["rate"]:
        parts.append(f"interest {rupiah(interest, compact=True)} ({plan['rate']}% a month)")
    elif interest:
        parts.append(f"no interest ({rupiah(interest, compact=True)} from rounding the installments up)")
    else:
        parts.append("no interest")
    return {
        "tenure": plan["tenure"],
        "monthly": rupiah(Decimal(plan["monthlyInstallment"]["value"]), compact=True),
        "terms": " · ".join(parts),
    }


def render_bnpl_approval(application: BnplApplication) -> str:
    items = [
        {
            "name": item.get("name", ""),
            "qty": item.get("qty", 1),
            "subtotal": rupiah(Decimal(item["amount"]["value"]) * int(item.get("qty", 1)), compact=True),
        }
        for item in application.items
    ]
    plans = [_plan(plan) for plan in application.plans]
    chosen = next((plan for plan in plans if plan["tenure"] == application.tenure), None)
    outcome = BNPL_OUTCOMES.get(application.status, "").format(
        tenure=application.tenure, monthly=chosen["monthly"] if chosen else ""
    )
    return templates.get_template("simulator/bnpl_approval.html").render(
        simulated=True,
        reference=application.reference,
        order_id=application.partner_reference_no,
        merchant_name=application.merchant_name,
        amount=application.amount,
        total=rupiah(Decimal(application.amount), compact=True),
        items=items,
        customer_name=application.customer_name,
        status=application.status,
        pending=application.status == "01",
        approved=application.status == "00",
        outcome=outcome,
        plans=plans,
        approve_token=form_token("bnpl-approve", application.reference),
        reject_token=form_token("bnpl-reject", application.reference),
    )


def render_bnpl_refusal(reference_no: str, message: str, merchant_name: str = "") -> str:
    return templates.get_template("simulator/bnpl_refusal.html").render(
        simulated=True, reference_no=reference_no, message=message, merchant_name=merchant_name
    )
