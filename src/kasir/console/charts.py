"""Server-side SVG bar charts: no script, nothing to load, readable without colour (every bar is labelled)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kasir.kit.money import rupiah

# Colours with at least 3:1 contrast against the white card (WCAG 1.4.11, graphical objects).
COLOURS = {
    "paid": "#1a7f37",
    "refunded": "#0969da",
    "void": "#8250df",
    "pending": "#6e7781",
    "expired": "#b35900",
    "failed": "#cf222e",
    "cancelled": "#57606a",
    "delivered": "#1a7f37",
    "retrying": "#b35900",
    "given_up": "#cf222e",
    "p50": "#0969da",
    "p95": "#8250df",
    "volume": "#0969da",
    "rate": "#1a7f37",
}


@dataclass(frozen=True, slots=True)
class Segment:
    key: str
    value: float
    x: float
    width: float
    colour: str


@dataclass(frozen=True, slots=True)
class Bar:
    label: str
    text: str  # the value as shown beside the bar
    y: float
    segments: tuple[Segment, ...]


@dataclass(frozen=True, slots=True)
class Chart:
    title: str
    bars: tuple[Bar, ...]
    legend: tuple[tuple[str, str], ...]
    height: float
    label_width: float = 90
    plot_width: float = 220
    empty: bool = False
    bar_height: float = 22

    @property
    def text_y(self) -> float:
        """Where a bar's label and value sit: on its middle line."""
        return self.bar_height / 2 + 4

    @property
    def width(self) -> float:
        return self.label_width + self.plot_width + 110


def bar_chart(
    title: str,
    rows: Sequence[tuple[str, Sequence[tuple[str, float]], str]],
    *,
    legend: bool = False,
    maximum: float | None = None,
    bar_height: float = 22.0,
) -> Chart:
    """rows: (label, [(segment key, value), ...], text shown beside the bar). `bar_height`: thinner bars for
    many rows (a month's days)."""
    row_height, gap = bar_height, min(10.0, bar_height / 2)
    top = max((sum(v for _k, v in segments) for _l, segments, _t in rows), default=0.0)
    scale_max = maximum if maximum is not None else top
    bars = []
    plot = 220.0
    for index, (label, segments, text) in enumerate(rows):
        x = 0.0
        parts = []
        for key, value in segments:
            width = 0.0 if scale_max <= 0 else plot * value / scale_max
            if value > 0:
                width = max(width, 2.0)  # a small but non-zero value stays visible
            parts.append(Segment(key, value, x, width, COLOURS.get(key, "#57606a")))
            x += width
        bars.append(Bar(label, text, index * (row_height + gap), tuple(parts)))
    keys: list[str] = []
    for _label, segments, _text in rows:
        for key, value in segments:
            if key not in keys and value > 0:
                keys.append(key)
    return Chart(
        title=title,
        bars=tuple(bars),
        legend=tuple((key.replace("_", " "), COLOURS.get(key, "#57606a")) for key in keys) if legend else (),
        height=len(rows) * (row_height + gap),
        empty=top <= 0,
        bar_height=bar_height,
    )


def overview_charts(overview: Any) -> dict[str, Chart]:
    """The Overview page's charts, from kasir.payments.service.Overview."""
    names = {"wallet": "Wallet", "bnpl": "BNPL", "card": "Card", "va": "VA", "link": "Payment link"}
    outcomes = ("paid", "refunded", "void", "pending", "expired", "failed", "cancelled")
    status_rows = [
        (names[p], [(o, float(overview.count(p, o))) for o in outcomes], str(overview.count(p))) for p in names
    ]
    volume_rows = []
    for p in names:
        paid = overview.net_volume(p)
        volume_rows.append((names[p], [("volume", float(paid))], rupiah(paid)))
    rate_rows = []
    for p in names:
        rate = overview.success_rate(p)
        rate_rows.append(
            (names[p], [("rate", 0.0 if rate is None else rate * 100)], "—" if rate is None else f"{rate * 100:.1f} %")
        )
    callbacks = overview.callbacks
    callback_rows = [
        ("Delivered", [("delivered", float(callbacks["delivered"]))], str(callbacks["delivered"])),
        ("Retrying", [("retrying", float(callbacks["retrying"]))], str(callbacks["retrying"])),
        ("Given up", [("given_up", float(callbacks["given_up"]))], str(callbacks["given_up"])),
        ("Waiting", [("pending", float(callbacks["pending"]))], str(callbacks["pending"])),
    ]
    latency_rows = [
        (label, [(key, value or 0.0)], "—" if value is None else f"{value:,.0f} ms")
        for label, key, value in (("p50", "p50", overview.latency_p50_ms), ("p95", "p95", overview.latency_p95_ms))
    ]
    return {
        "chart-status": bar_chart("Payments by product and status", status_rows, legend=True),
        "chart-volume": bar_chart("Paid volume by product (net of refunds and voids)", volume_rows),
        "chart-rate": bar_chart("Success rate by product", rate_rows, maximum=100.0),
        "chart-callbacks": bar_chart("Callbacks", callback_rows),
        "chart-latency": bar_chart("Callback commit → receipt", latency_rows),
    }


def trend_charts(overview: Any) -> dict[str, Chart]:
    """The overview's daily trend (kasir.payments.service.Overview.trend): payments and net paid volume a day."""
    thin = 22.0 if overview.trend_days <= 7 else 12.0
    label = "%a %d %b"
    counts = [(day.day.strftime(label), [("volume", float(day.count))], str(day.count)) for day in overview.trend]
    volumes = [(day.day.strftime(label), [("paid", float(day.net))], rupiah(day.net)) for day in overview.trend]
    days = overview.trend_days
    return {
        "chart-trend-count": bar_chart(f"Payments a day, last {days} days", counts, bar_height=thin),
        "chart-trend-volume": bar_chart(f"Net paid volume a day, last {days} days", volumes, bar_height=thin),
    }
