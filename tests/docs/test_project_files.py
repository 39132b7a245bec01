"""The project files a cloner looks for: a licence the packages declare, a changelog, a security policy."""

from __future__ import annotations

import tomllib

from tests.docs.markdown import ROOT

LICENCE = "Apache-2.0"


def test_the_licence_is_apache_2_and_the_sdk_ships_the_same_text():
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text
    assert "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text  # the whole licence, not a pointer to it
    assert (ROOT / "sdk" / "LICENSE").read_text() == text  # the SDK's sdist and wheel are built from sdk/


def test_both_packages_declare_the_licence():
    server = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert server["license"] == LICENCE  # an SPDX expression
    assert server["license-files"] == ["LICENSE"]
    sdk = tomllib.loads((ROOT / "sdk" / "pyproject.toml").read_text())["project"]
    assert sdk["license"] == {"text": LICENCE}  # the form setuptools before 77 reads (the SDK's build, see there)


def test_changelog_and_security_policy():
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert "## Unreleased" in changelog
    assert LICENCE.replace("-", " ").split()[0] in changelog  # says which licence, and why
    security = (ROOT / "SECURITY.md").read_text()
    for heading in ("## Reporting a vulnerability", "## In scope", "## Supported versions"):
        assert heading in security
