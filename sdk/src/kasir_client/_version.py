"""The SDK's version: the package metadata (pyproject.toml reads it here) and the User-Agent."""

__version__ = "0.2.0"
