"""Whether the event loop stayed free while a test waited on something."""

from __future__ import annotations

import asyncio


class LoopTicks:
    """Counts 10 ms ticks of the running loop from now on: a wait that blocks the loop leaves it near 0."""

    def __init__(self) -> None:
        self.count = 0
        self._task = asyncio.create_task(self._tick())

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(0.01)
            self.count += 1

    def stop(self) -> None:
        self._task.cancel()
