"""Reading an engine's results from asyncio without a thread per wait (both front ends use it)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from ..queue import ResponseReader, Result

__all__ = ["AsyncReader"]


class AsyncReader:
    """A :class:`ResponseReader` read on the event loop with no thread waiting: the result queue
    wakes it from the sending thread (one ``call_soon_threadsafe`` per result), so a token costs
    one thread hop, not two, and a result wakes only the request it belongs to.

    A waiting reader is also woken every ``poll_interval_s`` by one re-arming timer, so that
    ``should_stop`` is asked: a token costs one wake-up of the event loop, with no task and no
    timer made per wait (as ``asyncio.wait_for`` would)."""

    def __init__(
        self, reader: ResponseReader, poll_interval_s: float, on_stop: Callable[[], None] = lambda: None
    ) -> None:
        self.reader = reader
        self.poll_interval_s = poll_interval_s
        self._on_stop = on_stop
        self._event = asyncio.Event()
        loop = self._loop = asyncio.get_running_loop()
        self._ticker = loop.call_later(poll_interval_s, self._tick)

        def wake() -> None:
            if not loop.is_closed():
                loop.call_soon_threadsafe(self._event.set)

        reader.listen(wake)

    def __enter__(self) -> AsyncReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _tick(self) -> None:
        self._event.set()
        if not self.reader.stopped:
            self._ticker = self._loop.call_later(self.poll_interval_s, self._tick)

    def stop(self) -> None:
        """Stop reading and cancel what has not finished (see :meth:`ResponseReader.stop`)."""
        self._ticker.cancel()
        if not self.reader.stopped:
            self._on_stop()
        self.reader.stop()

    async def next_batch(self, should_stop: Callable[[], bool] = lambda: False) -> list[Result]:
        """Every result that has come (at least one). Empty when the reader was stopped or
        ``should_stop()`` said so (asked at least every poll interval)."""
        while True:
            self._event.clear()  # before looking: a result sent after the look sets it again
            batch = self.reader.take_available()
            if batch or self.reader.stopped or should_stop():
                return batch
            await self._event.wait()  # a result, the ticker or a stop sets it
