"""Wake sockets of worker processes on one SQLite file: a directory per file, none left behind."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kasir.db.wakeup import WakeSocket, wake


async def test_the_last_socket_to_close_removes_the_directory(tmp_path: Path) -> None:
    loop = asyncio.get_running_loop()
    directory = tmp_path / "kasir-wake-test"
    woken: list[str] = []
    first, second = (
        WakeSocket(directory, lambda: woken.append("first")),
        WakeSocket(directory, lambda: woken.append("second")),
    )
    first.open(loop)
    second.open(loop)
    first.close(loop)
    assert directory.is_dir()  # the other worker still listens there

    wake("test", directory)
    for _ in range(100):
        if woken:
            break
        await asyncio.sleep(0.01)
    assert woken == ["second"]

    second.close(loop)
    assert not directory.exists()


async def test_a_directory_removed_between_mkdir_and_bind_is_made_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loop = asyncio.get_running_loop()
    directory = tmp_path / "kasir-wake-test"
    real_mkdir = Path.mkdir
    calls = []

    def mkdir_then_lose_it(self: Path, *args: object, **kwargs: object) -> None:
        calls.append(self)
        if len(calls) > 1:
            real_mkdir(self, *args, **kwargs)  # type: ignore[arg-type]
        # the first time: as if another worker's close() removed it right after

    monkeypatch.setattr(Path, "mkdir", mkdir_then_lose_it)
    wake_socket = WakeSocket(directory, lambda: None)
    wake_socket.open(loop)
    try:
        assert len(calls) == 2
        assert wake_socket.path.exists()
    finally:
        wake_socket.close(loop)
