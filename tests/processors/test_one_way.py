"""The processors seam points one way: products import kasir.processors, kasir.processors imports no product.

A product tells the seam what it offers at start-up (kasir.products); the seam finds nothing by name.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import kasir.processors
from kasir.processors.calls import action_of
from kasir.processors.offers import offer_of
from kasir.processors.protocols import PRODUCTS
from kasir.products import OFFERS, declare_products

PROCESSORS = Path(kasir.processors.__file__).parent
SRC = PROCESSORS.parent
PRODUCT_ROOMS = ("card", "wallet", "bnpl", "va", "links", "payouts", "simulator")


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """Every module `path` imports (at any depth: inside functions too), with its line."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            found.append((node.lineno, node.module))
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def product_imports(path: Path) -> list[str]:
    return [
        f"{path.relative_to(SRC.parent)}:{line}: {module}"
        for line, module in imported_modules(path)
        if module == "kasir" or any(module.startswith(f"kasir.{room}") for room in PRODUCT_ROOMS)
    ]


def test_the_walk_sees_an_import_inside_a_function(tmp_path: Path) -> None:
    # The walk must see what the seam used to do (an import of a product inside a function), or it proves nothing.
    module = tmp_path / "room.py"
    module.write_text("def f():\n    from kasir.card.service import card_service\n    import kasir.wallet.service\n")
    assert [name for _, name in imported_modules(module)] == [
        "kasir.card.service",
        "kasir.card.service.card_service",
        "kasir.wallet.service",
    ]


def test_processors_import_no_product() -> None:
    modules = sorted(PROCESSORS.rglob("*.py"))
    assert PROCESSORS / "service.py" in modules
    offending = [line for path in modules for line in product_imports(path)]
    assert offending == []


def test_the_seam_and_its_declarations_import_nothing_by_name() -> None:
    # Declared explicitly (kasir.products): no importlib.import_module; plug-ins come by entry point.
    paths = [
        *PROCESSORS.rglob("*.py"),
        *(SRC / "simulator").rglob("*.py"),
        SRC / "products.py",
        *(SRC / room / "processing.py" for room in ("card", "wallet", "bnpl")),
    ]
    calls = [
        f"{path.relative_to(SRC.parent)}:{node.lineno}"
        for path in sorted(paths)
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute | ast.Name)
        and getattr(node, "attr", getattr(node, "id", "")) == "import_module"
    ]
    assert calls == []


def test_every_product_declares_its_offer() -> None:
    declare_products()
    assert [offer.product for offer in OFFERS] == list(PRODUCTS)
    for product in PRODUCTS:
        assert offer_of(product).channels()
    assert "OVO" in offer_of("wallet").channels()
    assert offer_of("bnpl").channels() == ("KASIR_BNPL",)
    for name in ("card.charge", "wallet.refund", "wallet.void"):
        assert action_of(name) is not None


def test_an_undeclared_call_is_a_wiring_error_that_says_so() -> None:
    with pytest.raises(LookupError, match=r"'card\.nosuch'.*declare_products\(\)"):
        action_of("card.nosuch")
