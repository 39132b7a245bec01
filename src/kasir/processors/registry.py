"""Which processor serves which product: KASIR_PROCESSORS, Python entry points, production's refusals.

    KASIR_PROCESSORS=card=simulator,wallet=simulator,bnpl=simulator,wallet.OVO=http

names a processor per product and, where one channel goes elsewhere, per product and channel
(`PRODUCT.CHANNEL=NAME` wins over `PRODUCT=NAME` for that channel). Unset, staging uses the
simulator for every product and production uses none. A processor is a plug-in found by name in
the entry-point group `kasir.processors` (an operator's connector ships as its own package, like
examples/processor-http). The staging simulator (kasir.simulator) is one too, named by Kasir's
own pyproject.toml; start-up also installs it with `install` (kasir.products), so a checkout whose
installed metadata predates that entry point finds it the same way. A channel named here must
be one its product declared (kasir.processors.offers).

A product or channel with no processor is switched off: its routes answer that the channel is
not available (`ProductUnavailable`, in each route's wire format). A processor's notifications
apply only to the payments of the channels it serves (`serves`). Production never simulates:
the simulator named there stops `kasir serve` (`check_configuration`) and is never used
(`processor_for`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points

from kasir.config import Settings, get_settings
from kasir.errors import BadRequest, FieldError, NotFound
from kasir.processors.offers import offer_of
from kasir.processors.protocols import (
    PRODUCTS,
    BnplLender,
    CardAcquirer,
    PayoutRail,
    Processor,
    Product,
    VaIssuer,
    WalletIssuer,
)

log = logging.getLogger("kasir.processors")

ENTRY_POINT_GROUP = "kasir.processors"
SIMULATOR = "simulator"
NOT_AVAILABLE = "is not available on this deployment"
# The product's field that names its channel, in its wire format.
_CHANNEL_FIELD: dict[Product, str] = {
    "card": "paymentChannel",
    "wallet": "payment_channel",
    "bnpl": "paymentChannel",
    "va": "payment_channel",
    "payout": "beneficiaryBankCode",
}


class ConfigurationError(ValueError):
    """KASIR_PROCESSORS cannot be served (`kasir serve` prints it and stops)."""


class ProductUnavailable(BadRequest):
    """A product with no processor: card 400 VALIDATION_ERROR (paymentChannel), wallet `03` Failed
    Request (409), BNPL 403xx01 Feature Not Allowed; each says the channel is not available."""

    def __init__(self, product: Product) -> None:
        field = _CHANNEL_FIELD[product]
        super().__init__(f"{field} {NOT_AVAILABLE}", errors=[FieldError(field, f"the channel {NOT_AVAILABLE}")])
        self.product = product
        if product in ("wallet", "va"):
            self.http_status, self.wallet_code = 409, "03"
            self.message = f"Failed Request: {field} {NOT_AVAILABLE}"
        elif product in ("bnpl", "payout"):
            self.http_status, self.snap_case = 403, "01"
            self.message = f"Feature Not Allowed: {field} {NOT_AVAILABLE}"


Route = tuple[Product, str | None]  # (product, channel); None: the product's other channels


def parse_processors(text: str) -> dict[Route, str]:
    """`card=simulator,wallet.OVO=http` -> {("card", None): "simulator", ("wallet", "OVO"): "http"}
    (ConfigurationError otherwise)."""
    chosen: dict[Route, str] = {}
    for entry in filter(None, (part.strip() for part in text.split(","))):
        route, sep, name = (piece.strip() for piece in entry.partition("="))
        product, dot, channel = (piece.strip() for piece in route.partition("."))
        if not sep or not name or product not in PRODUCTS or (dot and not _CHANNEL_NAME.fullmatch(channel)):
            raise ConfigurationError(
                f"KASIR_PROCESSORS: {entry!r} is not PRODUCT=NAME or PRODUCT.CHANNEL=NAME "
                f"with PRODUCT one of {', '.join(PRODUCTS)} and CHANNEL in capitals (OVO, BCACC)"
            )
        chosen[(product, channel or None)] = name  # type: ignore[index]
    return chosen


_CHANNEL_NAME = re.compile(r"[A-Z0-9_]{1,16}")


def known_channels(product: Product) -> tuple[str, ...]:
    """The channels a product declared it takes (card: KASIR_CARD_CHANNELS): a channel named in
    KASIR_PROCESSORS must be one."""
    return tuple(offer_of(product).channels())


ProcessorFactory = Callable[[Settings], Processor]

_INSTALLED: dict[str, ProcessorFactory] = {}


def install(name: str, factory: ProcessorFactory) -> None:
    """A processor plug-in shipped inside Kasir (the simulator), found by `name` as an entry point is."""
    _INSTALLED[name] = factory


def _factory(name: str) -> EntryPoint | ProcessorFactory | None:
    """The installed processor called `name`: its entry point, or else one `install`ed at start-up."""
    for point in entry_points(group=ENTRY_POINT_GROUP, name=name):
        return point
    return _INSTALLED.get(name)


def _load(name: str, settings: Settings) -> Processor:
    factory = _factory(name)
    if factory is None:
        raise ConfigurationError(
            f"KASIR_PROCESSORS: no processor {name!r} is installed (entry point group {ENTRY_POINT_GROUP})"
        )
    try:
        make = factory.load() if isinstance(factory, EntryPoint) else factory
        processor: Processor = make(settings)
    except Exception as exc:  # the processor's own configuration: said in one line, not a traceback
        raise ConfigurationError(f"KASIR_PROCESSORS: processor {name!r} could not start: {exc}") from exc
    return processor


@dataclass(frozen=True, slots=True)
class Processors:
    """The processors of a configuration: by product, and by (product, channel) where a channel goes elsewhere."""

    by_product: dict[Product, Processor]
    by_channel: dict[tuple[Product, str], Processor]
    by_name: dict[str, Processor]

    def for_channel(self, product: Product, channel: str | None) -> Processor | None:
        """The processor of `product`'s `channel` (None: its product-wide one), or None when switched off."""
        if channel is not None:
            chosen = self.by_channel.get((product, channel))
            if chosen is not None:
                return chosen
        return self.by_product.get(product)

    def of_product(self, product: Product) -> list[Processor]:
        """Every processor serving some channel of `product`."""
        found = [self.by_product[product]] if product in self.by_product else []
        found += [p for (prod, _), p in self.by_channel.items() if prod == product and p not in found]
        return found

    def live_products(self) -> list[Product]:
        return [product for product in PRODUCTS if self.of_product(product)]


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
        chosen = {(product, None): SIMULATOR for product in PRODUCTS}
    by_name: dict[str, Processor] = {}
    by_product: dict[Product, Processor] = {}
    by_channel: dict[tuple[Product, str], Processor] = {}
    for (product, channel), name in chosen.items():
        route = f"{product}.{channel}" if channel else product
        if channel is not None and channel not in known_channels(product):
            raise ConfigurationError(
                f"KASIR_PROCESSORS: {route}: {product} has no channel {channel} "
                f"(its channels: {', '.join(known_channels(product))})"
            )
        processor = by_name.get(name) or _load(name, settings)
        by_name[name] = processor
        if processor.simulates and env == "production":
            raise ConfigurationError(
                f"KASIR_PROCESSORS names the simulator for {route}: production never simulates payments; "
                "install and name a processor (docs/operator/processors.md)"
            )
        if getattr(processor, product, None) is None:
            raise ConfigurationError(f"KASIR_PROCESSORS: processor {name!r} does not serve {product}")
        if channel is None:
            by_product[product] = processor
        else:
            by_channel[(product, channel)] = processor
    return Processors(by_product, by_channel, by_name)


def current() -> Processors:
    """The processors of the process's settings (resolved once per configuration)."""
    settings = get_settings()
    return _resolve(settings.env, settings.processors, settings)


def check_configuration(settings: Settings) -> str:
    """`kasir serve`'s check: the line naming the live products, or ConfigurationError."""
    processors = resolve(settings)
    return describe(processors)


def describe(processors: Processors) -> str:
    live = [
        f"{product}={processors.by_product[product].name}" for product in PRODUCTS if product in processors.by_product
    ]
    live += [f"{product}.{channel}={p.name}" for (product, channel), p in processors.by_channel.items()]
    return "products live: " + (", ".join(live) if live else "none (no processor configured)")


def _allowed(processor: Processor | None) -> Processor | None:
    if processor is not None and processor.simulates and get_settings().is_production:
        return None  # never, whatever configured it
    return processor


def processor_for(product: Product, channel: str | None = None) -> Processor | None:
    """The processor of `product`'s `channel` (None: the product-wide one), or None: switched off."""
    return _allowed(current().for_channel(product, channel))


def processors_of(product: Product) -> list[Processor]:
    """Every processor serving a channel of `product` (empty: the product is switched off)."""
    return [p for p in current().of_product(product) if _allowed(p) is not None]


def serves(processor_name: str, product: Product, channel: str | None) -> bool:
    """Whether `processor_name` is the processor of `product`'s `channel` (its notifications apply there)."""
    if product == "bnpl" and channel is None:
        channel = _bnpl_channel()
    processor = processor_for(product, channel)
    return processor is not None and processor.name == processor_name


def card_acquirer(channel: str | None) -> CardAcquirer:
    processor = processor_for("card", channel)
    if processor is None or processor.card is None:
        raise ProductUnavailable("card")
    return processor.card


def wallet_issuer(channel: str | None) -> WalletIssuer:
    processor = processor_for("wallet", channel)
    if processor is None or processor.wallet is None:
        raise ProductUnavailable("wallet")
    return processor.wallet


def va_issuer(channel: str | None) -> VaIssuer:
    processor = processor_for("va", channel)
    issuer = getattr(processor, "va", None)
    if issuer is None:
        raise ProductUnavailable("va")
    return issuer  # type: ignore[no-any-return]


def payout_rail(bank: str) -> PayoutRail:
    """The payout rail of `bank` (a 3-digit bank code or an e-wallet: `payout.014=NAME` wins over `payout=NAME`);
    ProductUnavailable (403xx01) when there is none (docs/decisions.md §11.9)."""
    processor = processor_for("payout", bank)
    rail = getattr(processor, "payout", None)
    if rail is None:
        raise ProductUnavailable("payout")
    return rail  # type: ignore[no-any-return]


def payout_rail_name(bank: str) -> str | None:
    """The name of the processor that is `bank`'s payout rail, or None."""
    processor = processor_for("payout", bank)
    return processor.name if processor is not None and getattr(processor, "payout", None) is not None else None


def bnpl_lender() -> BnplLender:
    processor = processor_for("bnpl", _bnpl_channel())
    if processor is None or processor.bnpl is None:
        raise ProductUnavailable("bnpl")
    return processor.bnpl


def _bnpl_channel() -> str:
    return known_channels("bnpl")[0]


def require(product: Product, channel: str | None) -> None:
    """Refuse (ProductUnavailable) when `product`'s `channel` has no processor."""
    if product == "bnpl" and channel is None:
        channel = _bnpl_channel()
    if processor_for(product, channel) is None:
        raise ProductUnavailable(product)


def simulator_serves(product: Product, channel: str | None = None) -> bool:
    """Whether the simulator serves `product`'s `channel` (None: any channel of the product)."""
    if channel is None:
        return any(p.simulates for p in processors_of(product))
    processor = processor_for(product, channel)
    return processor is not None and processor.simulates


def page_of(product: Product) -> None:
    """A customer page of a switched-off product is not served: 404."""
    if not processors_of(product):
        raise NotFound("Not Found")
