"""Kasir: a self-hostable payment platform speaking the SNAP-style gateway interface."""

__version__ = "0.1.0"
