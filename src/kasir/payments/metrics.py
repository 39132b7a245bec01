"""Prometheus counters of payments: created, and settled (moved to an outcome), by product and status.

Counted after the unit of work commits (a rolled-back payment never happened). Status labels are
the states' names (wallet PAID, card SUCCESS, BNPL SUCCESS or CANCELED), whatever the wire calls them.
"""

from __future__ import annotations

from prometheus_client import Counter

from kasir.db import Session, on_commit

CREATED = Counter(
    "kasir_payments_created_total", "Payments created, by product and status at creation", ["product", "status"]
)
SETTLED = Counter(
    "kasir_payments_settled_total",
    "Payments moved to an outcome (paid, failed, expired, refunded, void...), by product and the status reached",
    ["product", "status"],
)


def created(session: Session, product: str, status: str) -> None:
    on_commit(session, CREATED.labels(product, status).inc)


def settled_in(session: Session, product: str, status: str) -> None:
    """A payment of the unit of work moved to `status`: counted when the unit commits."""
    on_commit(session, SETTLED.labels(product, status).inc)
