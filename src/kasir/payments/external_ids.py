"""The merchant's one external_id namespace (docs/decisions.md §9.2, §10.1), for the tables a room may not name.

The wallet, card and VA rooms name each other's tables in their INSERT ... SELECT guards. The payment link
(kasir.links) builds on those rooms, which must not import it: it declares its table here, from its models
module, and their guards add the declared tables when they are built: on first use, after `kasir.models`
(imported here at that moment) has imported every room's models.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

_DECLARED: list[Any] = []


def declare(model: Any) -> None:
    """`model`'s rows take a merchant's external_id (columns `merchant_id`, `external_id`)."""
    if model not in _DECLARED:
        _DECLARED.append(model)


def declared() -> tuple[Any, ...]:
    """Every declared table, once every room's models are imported."""
    import kasir.models  # noqa: F401, PLC0415  (every room's models, so every declaration, before the guards read them)

    return tuple(_DECLARED)


def holders(merchant_id: Any, external_id: Any) -> list[Any]:
    """`SELECT id` of each declared table's row of the merchant with the external_id: a guard's `NOT EXISTS`."""
    return [
        select(model.id).where(model.merchant_id == merchant_id, model.external_id == external_id)
        for model in declared()
    ]
