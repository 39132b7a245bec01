"""`served` without blocking the session loop while `kasir serve` starts (see tests/sdk/conftest.py)."""

from tests.sdk.conftest import served

__all__ = ["served"]
