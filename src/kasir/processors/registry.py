"""Which processor serves which product: KASIR_PROCESSORS, Python entry points, production's refusals.

    KASIR_PROCESSORS=card=simulator,wallet=simulator,bnpl=simulator

names a processor per product. Unset, staging uses the simulator for every product and
production uses none. A processor is found by name in the entry-point group `kasir.processors`
(an operator's connector ships as its own package); the simulator is built in. A product with
no processor is switched off: its routes answer that the channel is not available
(`ProductUnavailable`, in each route's wire format). Production never simulates: the simulator
named there stops `kasir serve` (`check_configuration`) and is never used (`processor_for`).
"""

from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

from kasir.config import Settings, get_settings
from kasir.errors import BadRequest, FieldError, NotFound
from kasir.processors.protocols import PRODUCTS, BnplLender, CardAcquirer, Processor, Product, WalletIssuer

log = logging.getLogger("kasir.processors")

ENTRY_POINT_GROUP = "kasir.processors"
SIMULATOR = "simulator"
NOT_AVAILABLE = "is not available on this deployment"
# The product's field that names its channel, in its wire format.
_CHANNEL_FIELD: dict[Product, str] = {"card": "paymentChannel", "wallet": "payment_channel", "bnpl": "paymentChannel"}


class ConfigurationError(ValueError):
    """KASIR_PROCESSORS cannot be served (`kasir serve` prints it and stops)."""


class ProductUnavailable(BadRequest):
    """A product with no processor: card 400 VALIDATION_ERROR (paymentChannel), wallet `03` Failed
    Request (409), BNPL 403xx01 Feature Not Allowed; each says the channel is not available."""

    def __init__(self, product: Product) -> None:
        field = _CHANNEL_FIELD[product]
        super().__init__(f"{field} {NOT_AVAILABLE}", errors=[FieldError(field, f"the channel {NOT_AVAILABLE}")])
        self.product = product
        if product == "wallet":
            self.http_status, self.wallet_code = 409, "03"
            self.message = f"Failed Request: {field} {NOT_AVAILABLE}"
        elif product == "bnpl":
            self.http_status, self.snap_case = 403, "01"
            self.message = f"Feature Not Allowed: {field} {NOT_AVAILABLE}"


def parse_processors(text: str) -> dict[Product, str]:
    """`card=simulator,wallet=http` -> {"card": "simulator", "wallet": "http"} (ConfigurationError otherwise)."""
    chosen: dict[Product, str] = {}
    for entry in filter(None, (part.strip() for part in text.split(","))):
        product, sep, name = (piece.strip() for piece in entry.partition("="))
        if not sep or not name or product not in PRODUCTS:
            raise ConfigurationError(
                f"KASIR_PROCESSORS: {entry!r} is not PRODUCT=NAME with PRODUCT one of {', '.join(PRODUCTS)}"
            )
        chosen[product] = name  # type: ignore[index]
    return chosen


def _factories() -> dict[str, Any]:
    """Every installed processor by name: the entry points, and the built-in simulator."""
    found: dict[str, Any] = {SIMULATOR: "kasir.processors.simulator:create"}
    for point in entry_points(group=ENTRY_POINT_GROUP):
        found[point.name] = point
    return found


def _load(name: str, settings: Settings) -> Processor:
    factory = _factories().get(name)
    if factory is None:
        raise ConfigurationError(
            f"KASIR_PROCESSORS: no processor {name!r} is installed (entry point group {ENTRY_POINT_GROUP})"
        )
    try:
        if isinstance(factory, str):
            module, _, attribute = factory.partition(":")
            make = getattr(importlib.import_module(module), attribute)
        else:
            make = factory.load()
        processor: Processor = make(settings)
    except Exception as exc:  # the processor's own configuration: said in one line, not a traceback
        raise ConfigurationError(f"KASIR_PROCESSORS: processor {name!r} could not start: {exc}") from exc
    return processor


@dataclass(frozen=True, slots=True)
class Processors:
    """The processors of a configuration, by product (a product without one is absent)."""

    by_product: dict[Product, Processor]
    by_name: dict[str, Processor]

    def live_products(self) -> list[Product]:
        return [product for product in PRODUCTS if product in self.by_product]


def resolve(settings: Settings) -> Processors:
    """The processors `settings` names. ConfigurationError when a name is unknown, a processor lacks the
    product it is named for, or production names the simulator."""
    return _resolve(settings.env, settings.processors, settings)


_resolved: dict[tuple[str, str], Processors] = {}


def _resolve(env: str, configured: str, settings: Settings) -> Processors:
    key = (env, configured)
    found = _resolved.get(key)
    if found is None:
        found = _resolved[key] = _build(env, configured, settings)
    return found


def _build(env: str, configured: str, settings: Settings) -> Processors:
    chosen = parse_processors(configured)
    if not configured.strip() and env != "production":
        chosen = dict.fromkeys(PRODUCTS, SIMULATOR)
    by_name: dict[str, Processor] = {}
    by_product: dict[Product, Processor] = {}
    for product, name in chosen.items():
        processor = by_name.get(name) or _load(name, settings)
        by_name[name] = processor
        if processor.simulates and env == "production":
            raise ConfigurationError(
                f"KASIR_PROCESSORS names the simulator for {product}: production never simulates payments; "
                "install and name a processor (README, Processors)"
            )
        if getattr(processor, product) is None:
            raise ConfigurationError(f"KASIR_PROCESSORS: processor {name!r} does not serve {product}")
        by_product[product] = processor
    return Processors(by_product, by_name)


def current() -> Processors:
    """The processors of the process's settings (resolved once per configuration)."""
    settings = get_settings()
    return _resolve(settings.env, settings.processors, settings)


def check_configuration(settings: Settings) -> str:
    """`kasir serve`'s check: the line naming the live products, or ConfigurationError."""
    processors = resolve(settings)
    return describe(processors)


def describe(processors: Processors) -> str:
    live = [f"{product}={processors.by_product[product].name}" for product in processors.live_products()]
    return "products live: " + (", ".join(live) if live else "none (no processor configured)")


def processor_for(product: Product) -> Processor | None:
    processor = current().by_product.get(product)
    if processor is not None and processor.simulates and get_settings().is_production:
        return None  # never, whatever configured it
    return processor


def card_acquirer() -> CardAcquirer:
    processor = processor_for("card")
    if processor is None or processor.card is None:
        raise ProductUnavailable("card")
    return processor.card


def wallet_issuer() -> WalletIssuer:
    processor = processor_for("wallet")
    if processor is None or processor.wallet is None:
        raise ProductUnavailable("wallet")
    return processor.wallet


def bnpl_lender() -> BnplLender:
    processor = processor_for("bnpl")
    if processor is None or processor.bnpl is None:
        raise ProductUnavailable("bnpl")
    return processor.bnpl


def require(product: Product) -> None:
    """Refuse (ProductUnavailable) when `product` has no processor."""
    if processor_for(product) is None:
        raise ProductUnavailable(product)


def simulator_serves(product: Product) -> bool:
    processor = processor_for(product)
    return processor is not None and processor.simulates


def page_of(product: Product) -> None:
    """A customer page of a switched-off product is not served: 404."""
    if processor_for(product) is None:
        raise NotFound("Not Found")
