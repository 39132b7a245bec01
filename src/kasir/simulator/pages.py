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


def render_wallet_checkout(payment: WalletPayment) -> str:
    tx = SimpleNamespace(
        id=payment.reference,
        order_id=payment.order_id,
        payment_channel=payment.channel,
        amount=payment.amount,
        status=payment.status,
        failure_reason=payment.failure_reason,
        return_url=payment.return_url,
    )
    items = [
        {
            "name": item.name,
            "qty": item.qty,
            "price": rupiah(item.amount, compact=True),
            "subtotal": rupiah(item.amount * item.qty, compact=True),
        }
        for item in payment.items
    ]
    return templates.get_template("simulator/wallet_checkout.html").render(
        tx=tx,
        merchant_name=payment.merchant_name,
        items=items,
        total=rupiah(payment.amount, compact=True),
        customer={"full_name": payment.customer_name},
        pending=payment.status == "PENDING",
        qr_image=payment.qr_image_url,
        pay_token=form_token("wallet-pay", payment.reference),
        fail_token=form_token("wallet-fail", payment.reference),
    )


def render_wallet_refusal(transaction_id: str, message: str) -> str:
    return templates.get_template("simulator/wallet_refusal.html").render(
        transaction_id=transaction_id, message=message
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
