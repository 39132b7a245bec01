"""In-process wake-up of the delivery engine after a commit that recorded callbacks."""

from __future__ import annotations

from collections.abc import Callable

NOTIFY_CHANNEL = "kasir_callbacks"  # PostgreSQL LISTEN/NOTIFY channel of other processes' workers

_listeners: list[Callable[[], None]] = []


def subscribe(listener: Callable[[], None]) -> Callable[[], None]:
    _listeners.append(listener)
    return lambda: _listeners.remove(listener)


def wake_dispatcher() -> None:
    for listener in list(_listeners):
        listener()
