"""The indexes the payments query (kasir.payments) reads the product tables by.

The tables belong to their rooms; these indexes serve only the console's and the admin API's
list (newest first, all merchants or one) and search (any id a merchant or customer quotes).
Declared here, on the rooms' tables, so the metadata and migrations 0009, 0020, 0023 and 0026 agree. The VA
room declares its own list indexes (created, merchant_created, va_number: migration 0021), the payment link its
own (created, merchant_created, external, order: migration 0024); the rest are here.

A payment link's card order, wallet transaction or VA (`link_id` set) is the link's, not a payment of its own:
the overview counts the link, and leaves them out by `link_id`, which every overview index carries so that the
numbers are still read from the index alone (migration 0026).
"""

from __future__ import annotations

from sqlalchemy import Index

from kasir.bnpl.models import BnplTransaction
from kasir.callbacks.models import Callback
from kasir.card.models import CardOrder
from kasir.links.models import PaymentLink
from kasir.va.models import VirtualAccount
from kasir.wallet.models import WalletTransaction

INDEXES = (
    Index("ix_wallet_transaction_created", WalletTransaction.created_at, WalletTransaction.id),
    Index(
        "ix_wallet_transaction_merchant_created",
        WalletTransaction.merchant_id,
        WalletTransaction.created_at,
        WalletTransaction.id,
    ),
    Index("ix_wallet_transaction_external", WalletTransaction.external_id),
    Index("ix_wallet_transaction_order", WalletTransaction.order_id),
    Index("ix_wallet_transaction_reference", WalletTransaction.reference_id),
    Index("ix_bnpl_transaction_created", BnplTransaction.created_at, BnplTransaction.id),
    Index(
        "ix_bnpl_transaction_merchant_created",
        BnplTransaction.merchant_id,
        BnplTransaction.created_at,
        BnplTransaction.id,
    ),
    Index("ix_bnpl_transaction_partner_reference", BnplTransaction.partner_reference_no),
    Index("ix_card_order_created", CardOrder.created_at, CardOrder.id),
    Index("ix_card_order_merchant_created", CardOrder.merchant_id, CardOrder.created_at, CardOrder.id),
    Index("ix_card_order_external", CardOrder.external_id),
    Index("ix_card_order_order", CardOrder.order_id),
    # The list filtered by status (the console's "wallet + paid"): newest first within one status, without
    # reading and sorting every row of that status (migration 0020).
    Index(
        "ix_wallet_transaction_status_created",
        WalletTransaction.status,
        WalletTransaction.created_at,
        WalletTransaction.id,
    ),
    Index("ix_bnpl_transaction_status_created", BnplTransaction.status, BnplTransaction.created_at, BnplTransaction.id),
    Index("ix_card_order_status_created", CardOrder.status, CardOrder.created_at, CardOrder.id),
    # The overview's numbers (PaymentsRepository.totals), read from the index alone, a day at a time: every
    # column the overview sums or filters on, the merchant last (migration 0020).
    Index(
        "ix_wallet_transaction_overview",
        WalletTransaction.created_at,
        WalletTransaction.status,
        WalletTransaction.amount,
        WalletTransaction.refunded_amount,
        WalletTransaction.merchant_id,
        WalletTransaction.link_id,
    ),
    Index(
        "ix_bnpl_transaction_overview",
        BnplTransaction.created_at,
        BnplTransaction.status,
        BnplTransaction.amount_cents,
        BnplTransaction.merchant_id,
    ),
    Index(
        "ix_card_order_overview",
        CardOrder.created_at,
        CardOrder.status,
        CardOrder.amount,
        CardOrder.merchant_id,
        CardOrder.link_id,
    ),
    # VAs as the others (migration 0023): search by external_id and order_id across merchants (the unique
    # (merchant_id, external_id) serves one merchant only), the list by status, and the overview's numbers,
    # whose paid volume is what came in (total_paid_amount), whatever the VA's state.
    Index("ix_virtual_account_external", VirtualAccount.external_id),
    Index("ix_virtual_account_order", VirtualAccount.order_id),
    Index("ix_virtual_account_status_created", VirtualAccount.status, VirtualAccount.created_at, VirtualAccount.id),
    Index(
        "ix_virtual_account_overview",
        VirtualAccount.created_at,
        VirtualAccount.status,
        VirtualAccount.total_paid_amount,
        VirtualAccount.merchant_id,
        VirtualAccount.link_id,
    ),
    # Payment links as the others (migration 0026): the list by status, and the overview's numbers.
    Index("ix_payment_link_status_created", PaymentLink.status, PaymentLink.created_at, PaymentLink.id),
    Index(
        "ix_payment_link_overview",
        PaymentLink.created_at,
        PaymentLink.status,
        PaymentLink.amount,
        PaymentLink.merchant_id,
    ),
)

# The overview counts the period's callbacks by status.
CALLBACK_INDEXES = (Index("ix_callback_created", Callback.created_at),)
