"""docs/decisions.md §6 installment formula: properties (hypothesis) and worked examples."""

from __future__ import annotations

import math
from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from kasir.bnpl.pricing import DEFAULT_PLANS, Plan, installment_option, installment_options
from kasir.bnpl.service import items_total

amounts = st.integers(min_value=1, max_value=10**14).map(lambda cents: Decimal(cents) / 100)
plans = st.builds(
    Plan,
    tenure=st.integers(min_value=1, max_value=36),
    rate=st.integers(min_value=0, max_value=20),
    provision=st.decimals(min_value=0, max_value=10, places=2, allow_nan=False, allow_infinity=False),
)


@given(total=amounts, plan=plans)
def test_installment_properties(total: Decimal, plan: Plan) -> None:
    option = installment_option(total, plan)
    assert option.installment_amount == option.monthly_installment * plan.tenure
    assert option.total_interest == option.installment_amount - option.amount
    assert option.amount == total + option.provision
    assert option.total == total
    for value in (option.provision, option.amount, option.monthly_installment, option.installment_amount):
        assert value >= 0
    assert option.total_interest >= 0
    assert option.monthly_installment == option.monthly_installment.to_integral_value()
    assert option.provision == option.provision.to_integral_value()
    # independent check of the formula with integer arithmetic on cents
    cents = int(total * 100)
    provision_pct_cents = int(plan.provision * 100)  # provision% × 100
    provision_rupiah = (cents * provision_pct_cents + 500_000) // 1_000_000  # round half up of T×p/100 to rupiah
    assert option.provision == provision_rupiah
    amount_cents = cents + provision_rupiah * 100
    numerator = amount_cents * (100 + plan.rate * plan.tenure)  # (amount + amount×rate×tenure/100) × 100 cents
    assert option.monthly_installment == math.ceil(Decimal(numerator) / (100 * 100 * plan.tenure))


item_lists = st.lists(
    st.tuples(st.integers(min_value=1, max_value=10**9).map(lambda c: Decimal(c) / 100), st.integers(1, 1000)),
    min_size=1,
    max_size=8,
)


class _Item:
    def __init__(self, value: Decimal, qty: int) -> None:
        self.amount = type("A", (), {"value": str(value)})()
        self.qty = qty


@given(items=item_lists, data=st.data())
def test_results_independent_of_item_order(items: list[tuple[Decimal, int]], data: st.DataObject) -> None:
    shuffled = data.draw(st.permutations(items))
    first = items_total([_Item(v, q) for v, q in items])
    second = items_total([_Item(v, q) for v, q in shuffled])
    assert first == second
    assert installment_options(first, DEFAULT_PLANS) == installment_options(second, DEFAULT_PLANS)


def test_worked_example_default_table() -> None:
    by_tenure = {o.tenure: o for o in installment_options(Decimal("100000.00"), DEFAULT_PLANS)}
    three = by_tenure[3]  # 0 % interest, 1.5 % provision
    assert (three.provision, three.amount, three.monthly_installment) == (1500, Decimal("101500.00"), 33834)
    assert three.installment_amount == 101502
    assert three.total_interest == 2
    six = by_tenure[6]  # 2 % monthly flat: 101500 × 1.12 / 6 = 18946.666.. -> 18947
    assert six.monthly_installment == 18947
    assert six.installment_amount == 113682
    assert six.total_interest == Decimal("12182.00")


def test_provision_rounds_half_up() -> None:
    option = installment_option(Decimal("100.00"), Plan(tenure=1, rate=0, provision=Decimal("0.5")))
    assert option.provision == 1  # 0.5 -> 1
