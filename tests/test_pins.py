"""Libraries whose classes Kasir extends or whose compiler it reads run only in the minor range tested.

`kasir.kit.http_server` subclasses uvicorn's HTTP protocol; `kasir.db.statements` reads SQLAlchemy's
compiled statements (positional parameters, binds, prefetch columns). A release outside the pinned
range may change what those depend on: this test says so by name instead of letting a subtle
failure speak later.
"""

from __future__ import annotations

import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest
from packaging.requirements import Requirement

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
EXTENDED = ("uvicorn", "sqlalchemy")


def pinned() -> dict[str, Requirement]:
    dependencies = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    requirements = (Requirement(line) for line in dependencies)
    return {requirement.name.lower(): requirement for requirement in requirements}


@pytest.mark.parametrize("name", EXTENDED)
def test_an_extended_library_is_pinned_to_a_minor_range_and_installed_within_it(name: str) -> None:
    requirement = pinned()[name]
    upper = [spec for spec in requirement.specifier if spec.operator == "<"]
    assert upper, f"pyproject.toml pins {name} with no upper bound ({requirement}): pin the tested minor range"
    installed = version(name)
    assert requirement.specifier.contains(installed, prereleases=True), (
        f"{name} {installed} is installed, outside the range pyproject.toml pins ({requirement.specifier}) "
        f"and Kasir was tested with: check what Kasir relies on (see this test's docstring), then move the pin"
    )
