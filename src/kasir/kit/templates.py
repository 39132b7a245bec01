"""The one Jinja environment of every room's pages: the console, the card's hosted page, the simulator's.

Each room's template directory is on the loader under the room's name (`console/payment.html`,
`card/payment.html`: two rooms may use the same file name). Autoescape is on for every template.
Filters every room may use are registered here; a room's own (the console's) where it renders.
"""

from __future__ import annotations

from pathlib import Path

from jinja2 import Environment, FileSystemLoader, PrefixLoader, select_autoescape

from kasir.kit.money import rupiah

_KASIR = Path(__file__).resolve().parent.parent

templates = Environment(
    loader=PrefixLoader(
        {
            "card": FileSystemLoader(_KASIR / "card" / "pages"),
            "console": FileSystemLoader(_KASIR / "console" / "pages"),
            "links": FileSystemLoader(_KASIR / "links" / "pages"),
            "simulator": FileSystemLoader(_KASIR / "simulator" / "pages"),
        }
    ),
    autoescape=select_autoescape(["html"], default=True),
    trim_blocks=True,
    lstrip_blocks=True,
)
templates.filters["rupiah"] = rupiah
