"""Helpers with no domain knowledge: money, time, crypto, JSON minify, ids."""
