"""HTTP metrics, and the registry a scrape reads (one process, or every process of `kasir serve --workers N`).

Aggregation across processes: `kasir serve --workers N` (N > 1) runs prometheus-client's
multiprocess mode in a directory Kasir manages (`<data_dir>/metrics/<port>`, emptied at start):
each process writes its counters and histograms to its own files there and any process's
/metrics sums them all. One process keeps them in memory. `kasir worker` serves its own
(KASIR_WORKER_METRICS_PORT): it may run on another machine.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

MULTIPROCESS_ENV = "PROMETHEUS_MULTIPROC_DIR"  # prometheus-client reads it when it is first imported

HTTP_REQUESTS = Counter(
    "kasir_http_requests_total", "HTTP requests answered, by route template and status", ["method", "route", "status"]
)
HTTP_ERRORS = Counter(
    "kasir_http_errors_total",
    "HTTP requests answered with a 4xx or 5xx status, by route template and status",
    ["method", "route", "status"],
)
HTTP_LATENCY = Histogram(
    "kasir_http_request_duration_seconds",
    "From a request's arrival to the end of its answer, by route template",
    ["method", "route"],
    buckets=(0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)

# The labelled children, found once per (method, route, status): labels() costs a lock and a
# tuple of strings on every request otherwise.
_children: dict[tuple[str, str, int], tuple[Counter, Counter | None, Histogram]] = {}


def observe_request(method: str, route: str, status: int, seconds: float) -> None:
    key = (method, route, status)
    children = _children.get(key)
    if children is None:
        code = str(status)
        errors = HTTP_ERRORS.labels(method, route, code) if status >= 400 else None
        children = _children[key] = (
            HTTP_REQUESTS.labels(method, route, code),
            errors,
            HTTP_LATENCY.labels(method, route),
        )
    requests, errors, latency = children
    requests.inc()
    if errors is not None:
        errors.inc()
    latency.observe(seconds)


def prepare_multiprocess(data_dir: Path, port: int) -> Path:
    """The directory the processes of `kasir serve --workers N` share, emptied, and named in the environment
    the processes inherit (set before they import prometheus-client)."""
    directory = (data_dir / "metrics" / str(port)).resolve()
    if directory.exists():
        shutil.rmtree(directory)  # counts of an earlier run would be summed into this one's
    directory.mkdir(parents=True)
    os.environ[MULTIPROCESS_ENV] = str(directory)
    return directory


def scrape_registry(*extra: Collector) -> CollectorRegistry:
    """What /metrics exposes: this process's registry, or every process's files in multiprocess mode;
    `extra` collectors (read at scrape time, such as counts from the database) are added."""
    directory = os.environ.get(MULTIPROCESS_ENV)
    if not directory:
        for collector in extra:
            if collector not in _registered:
                REGISTRY.register(collector)
                _registered.add(collector)
        return REGISTRY
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=directory)
    for collector in extra:
        registry.register(collector)
    return registry


_registered: set[Collector] = set()
