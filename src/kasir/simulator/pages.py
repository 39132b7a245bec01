"""The simulator's pages: the test-card table, the 3-D Secure OTP page, the wallet checkout page and
the BNPL approval page (Jinja2). Every form carries a token bound to its transaction and form
(kasir.kit.pages.form_token): another site's form cannot pay or fail a payment."""

from __future__ import annotations

from types import SimpleNamespace
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


def render_otp(common: dict[str, Any], *, order_id: str, attempt: int, masked_card: str, otp: str, csrf: str) -> str:
    return templates.get_template("simulator/otp.html").render(
        **common, action=f"/card/pages/{order_id}/3ds", attempt=attempt, csrf=csrf, otp=otp, masked_card=masked_card
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


def render_bnpl_approval(application: BnplApplication) -> str:
    tx = SimpleNamespace(
        id=application.reference,
        partner_reference_no=application.partner_reference_no,
        status=application.status,
        status_desc=application.status_desc,
        tenure=application.tenure,
    )
    return templates.get_template("simulator/bnpl_approval.html").render(
        tx=tx,
        merchant_name=application.merchant_name,
        items=application.items,
        customer={"fullName": application.customer_name},
        amount={"value": application.amount, "currency": application.currency},
        options=application.plans,
        pending=application.status == "01",
        approve_token=form_token("bnpl-approve", application.reference),
        reject_token=form_token("bnpl-reject", application.reference),
    )


def render_bnpl_refusal(reference_no: str, message: str) -> str:
    return templates.get_template("simulator/bnpl_refusal.html").render(reference_no=reference_no, message=message)
