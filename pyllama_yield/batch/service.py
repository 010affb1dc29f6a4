"""The Batch API of one server: its store and runner, opened on first use, or at start when the
data folder holds batches to resume."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path

from starlette.types import ASGIApp

from .runner import BatchRunner
from .store import BatchStore

__all__ = ["Batches"]


class Batches:
    """The Batch API's store and runner of one server."""

    def __init__(
        self, data_dir: Path, concurrency: Callable[[], int], headers: Callable[[str], dict[str, str]]
    ) -> None:
        """``concurrency()``: lines in flight (the server's slots); ``headers(tenant)``: what a
        line's request carries to pass as the batch's tenant."""
        self.data_dir = data_dir
        self._concurrency, self._headers = concurrency, headers
        self._store: BatchStore | None = None
        self._runner: BatchRunner | None = None
        self._task: asyncio.Task[None] | None = None

    def open(self, app: ASGIApp, ready: Callable[[], Awaitable[None]]) -> BatchRunner:
        """The store and its runner (on the running event loop), opened now if they are not."""
        if self._runner is None:
            self._store = BatchStore(self.data_dir)
            self._runner = BatchRunner(self._store, app, self._headers, self._concurrency)
            self._task = asyncio.get_running_loop().create_task(self._runner.run(ready))
        return self._runner

    def resume(self, app: ASGIApp, ready: Callable[[], Awaitable[None]]) -> None:
        """At start: open the store if the data folder has one (its open batches go on)."""
        if BatchStore.exists(self.data_dir):
            self.open(app, ready)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._store is not None:
            self._store.close()
