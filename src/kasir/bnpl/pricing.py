"""Installment options (docs/decisions.md §6), Decimal end to end.

For the items' total T and a plan (tenure months, flat monthly `rate` %, `provision` %):

    provision          = round_half_up(T × provision% / 100)        whole rupiah
    amount             = T + provision
    monthlyInstallment = ceil((amount + amount × rate% × tenure / 100) / tenure)   whole rupiah
    installmentAmount  = monthlyInstallment × tenure
    totalInterest      = installmentAmount − amount
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from kasir.kit.money import ceil_rupiah, round_half_up_rupiah


@dataclass(frozen=True, slots=True)
class Plan:
    tenure: int  # months
    rate: int  # flat monthly interest, integer percent
    provision: Decimal  # percent of the total


# The shipped default; a merchant's own table (bnpl_pricing.plans) replaces it.
DEFAULT_PLANS: tuple[Plan, ...] = (
    Plan(tenure=3, rate=0, provision=Decimal("1.5")),
    Plan(tenure=6, rate=2, provision=Decimal("1.5")),
    Plan(tenure=12, rate=2, provision=Decimal("1.5")),
)


@dataclass(frozen=True, slots=True)
class InstallmentOption:
    tenure: int
    rate: int
    total: Decimal  # totalTransactionAmount
    provision: Decimal
    amount: Decimal
    monthly_installment: Decimal
    installment_amount: Decimal
    total_interest: Decimal

    @property
    def id(self) -> str:
        return f"{self.tenure}_months"

    @property
    def payment_type(self) -> str:
        return f"{self.tenure} months installment, {self.rate}% monthly interest"


def installment_option(total: Decimal, plan: Plan) -> InstallmentOption:
    provision = round_half_up_rupiah(total * plan.provision / Decimal(100))
    amount = total + provision
    with_interest = amount + amount * Decimal(plan.rate) * Decimal(plan.tenure) / Decimal(100)
    monthly = ceil_rupiah(with_interest / Decimal(plan.tenure))
    installment_amount = monthly * plan.tenure
    return InstallmentOption(
        tenure=plan.tenure,
        rate=plan.rate,
        total=total,
        provision=provision,
        amount=amount,
        monthly_installment=monthly,
        installment_amount=installment_amount,
        total_interest=installment_amount - amount,
    )


def installment_options(total: Decimal, plans: Iterable[Plan]) -> list[InstallmentOption]:
    return [installment_option(total, plan) for plan in sorted(plans, key=lambda p: p.tenure)]


def plans_from_json(data: Sequence[dict[str, Any]]) -> tuple[Plan, ...]:
    """`[{"tenure": 3, "rate": 0, "provision": "1.5"}, ...]`: a merchant's pricing table."""
    plans = []
    for entry in data:
        tenure, rate = entry["tenure"], entry["rate"]
        if not isinstance(tenure, int) or tenure < 1 or not isinstance(rate, int) or rate < 0:
            raise ValueError("tenure must be a positive integer and rate a non-negative integer")
        provision = Decimal(str(entry["provision"]))
        if provision < 0:
            raise ValueError("provision must not be negative")
        plans.append(Plan(tenure=tenure, rate=rate, provision=provision))
    if not plans:
        raise ValueError("a pricing table needs at least one plan")
    return tuple(plans)


def plans_to_json(plans: Iterable[Plan]) -> list[dict[str, Any]]:
    return [{"tenure": p.tenure, "rate": p.rate, "provision": str(p.provision)} for p in plans]
