"""KASIR_PROCESSORS: parsing, entry-point discovery, production's refusal of the simulator, `kasir serve`."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from kasir.config import Settings
from kasir.processors.protocols import BnplLender, CardAcquirer, Processor, WalletIssuer
from kasir.processors.registry import ConfigurationError, check_configuration, parse_processors, resolve
from tests.support.cli import run_kasir

FAKE_PACKAGE = """
from kasir.simulator import SimulatedIssuer

class OnlyWallet:
    name = "onlywallet"
    simulates = False
    card = None
    bnpl = None

    def __init__(self, settings):
        self.wallet = SimulatedIssuer()
        self.settings = settings

    def router(self):
        return None

    async def notifications(self, headers, body):
        return []

def create(settings):
    return OnlyWallet(settings)
"""


@pytest.fixture
def installed_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A processor package as pip would leave it: its module and a dist-info with the entry point."""
    (tmp_path / "onlywallet_processor.py").write_text(FAKE_PACKAGE)
    info = tmp_path / "onlywallet_processor-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: onlywallet-processor\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[kasir.processors]\nonlywallet = onlywallet_processor:create\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def settings(**values: str) -> Settings:
    return Settings(secret_key="k", **values)  # type: ignore[arg-type]


def test_parse() -> None:
    assert parse_processors("") == {}
    assert parse_processors(" card=simulator , bnpl=x ") == {("card", None): "simulator", ("bnpl", None): "x"}
    assert parse_processors("wallet=simulator,wallet.OVO=x") == {("wallet", None): "simulator", ("wallet", "OVO"): "x"}
    for wrong in ("card", "card=", "cards=simulator", "=simulator", "wallet.=x", "wallet.ovo=x", "wallet.O V O=x"):
        with pytest.raises(ConfigurationError, match=r"PRODUCT=NAME or PRODUCT\.CHANNEL=NAME"):
            parse_processors(wrong)


def test_defaults_staging_simulates_everything_production_nothing() -> None:
    staging = resolve(settings(env="staging"))
    assert staging.live_products() == ["card", "wallet", "bnpl", "va", "payout"]
    simulator = staging.by_product["card"]
    assert isinstance(simulator, Processor)
    assert isinstance(simulator.card, CardAcquirer)
    assert isinstance(simulator.wallet, WalletIssuer)
    assert isinstance(simulator.bnpl, BnplLender)
    assert resolve(settings(env="production")).live_products() == []
    assert check_configuration(settings(env="production")) == "products live: none (no processor configured)"
    assert check_configuration(settings(env="staging", processors="bnpl=simulator")) == "products live: bnpl=simulator"


def test_production_refuses_the_simulator() -> None:
    with pytest.raises(ConfigurationError, match="production never simulates"):
        resolve(settings(env="production", processors="card=simulator"))


def test_unknown_processor() -> None:
    with pytest.raises(ConfigurationError, match="no processor 'nosuch' is installed"):
        resolve(settings(processors="card=nosuch"))


@pytest.mark.usefixtures("installed_plugin")
def test_a_processor_is_found_by_its_entry_point() -> None:
    found = resolve(settings(env="production", processors="wallet=onlywallet"))
    assert found.live_products() == ["wallet"]
    assert found.by_product["wallet"].name == "onlywallet"
    with pytest.raises(ConfigurationError, match="does not serve card"):
        resolve(settings(env="production", processors="card=onlywallet"))


@pytest.mark.usefixtures("installed_plugin")
def test_a_channel_may_have_its_own_processor() -> None:
    found = resolve(settings(env="staging", processors="card=simulator,wallet=simulator,wallet.OVO=onlywallet"))
    assert found.for_channel("wallet", "OVO").name == "onlywallet"  # type: ignore[union-attr]
    assert found.for_channel("wallet", "DANA").name == "simulator"  # type: ignore[union-attr]
    assert found.for_channel("bnpl", None) is None
    assert found.live_products() == ["card", "wallet"]
    assert (
        check_configuration(settings(env="staging", processors="card=simulator,wallet=simulator,wallet.OVO=onlywallet"))
        == "products live: card=simulator, wallet=simulator, wallet.OVO=onlywallet"
    )
    # a channel alone: the product's other channels are switched off
    only_ovo = resolve(settings(env="production", processors="wallet.OVO=onlywallet"))
    assert only_ovo.for_channel("wallet", "OVO").name == "onlywallet"  # type: ignore[union-attr]
    assert only_ovo.for_channel("wallet", "DANA") is None
    assert only_ovo.live_products() == ["wallet"]


def test_a_channel_the_product_does_not_have_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="wallet has no channel GOPAY"):
        resolve(settings(processors="wallet.GOPAY=simulator"))
    with pytest.raises(ConfigurationError, match="card has no channel OVO"):
        resolve(settings(processors="card.OVO=simulator"))


def test_production_refuses_the_simulator_for_one_channel() -> None:
    with pytest.raises(ConfigurationError, match="simulator for wallet.DANA: production never simulates"):
        resolve(settings(env="production", processors="wallet.DANA=simulator"))


def test_serve_refuses_the_simulator_in_production_with_one_line(tmp_path: Path) -> None:
    env = {
        "KASIR_DATA_DIR": str(tmp_path),
        "KASIR_SECRET_KEY": "k",
        "KASIR_ENV": "production",
        "KASIR_PROCESSORS": "card=simulator,wallet=simulator",
    }
    result = run_kasir("serve", "--port", "9", env=env)
    assert result.exit_code == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "production never simulates payments" in textwrap.dedent(lines[0])
    assert result.stdout == ""
