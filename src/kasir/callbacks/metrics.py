"""Prometheus metrics of callback delivery (exposed at /metrics)."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

SENT = Counter("kasir_callbacks_sent_total", "Callbacks accepted by the merchant", ["kind"])
FAILED = Counter("kasir_callbacks_failed_total", "Callbacks that exhausted their attempts", ["kind"])
RETRIED = Counter("kasir_callbacks_retried_total", "Attempts that were refused and scheduled again", ["kind"])
ATTEMPT_LATENCY = Histogram(
    "kasir_callback_attempt_seconds",
    "HTTP latency of one callback attempt",
    ["kind"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
DELIVERY_LATENCY = Histogram(
    "kasir_callback_delivery_seconds",
    "From recording a callback to its acceptance",
    ["kind"],
    buckets=(0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 5, 15, 60, 300, 900),
)


def record(kind: str, status: str, latency_ms: int, created_unix: float, now_unix: float) -> None:
    ATTEMPT_LATENCY.labels(kind).observe(latency_ms / 1000)
    if status == "delivered":
        SENT.labels(kind).inc()
        DELIVERY_LATENCY.labels(kind).observe(max(0.0, now_unix - created_unix))
    elif status == "failed":
        FAILED.labels(kind).inc()
    elif status == "pending":
        RETRIED.labels(kind).inc()
