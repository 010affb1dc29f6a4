"""Reading an engine's results from asyncio without a thread per wait (both front ends use it)."""

from __future__ import annotations

import asyncio
import os
from collections import deque
from collections.abc import Callable

from ..queue import ResponseReader, Result

__all__ = ["AsyncReader", "Doorbell"]


class Doorbell:
    """Wakes one event loop for the readers whose results came from other threads: a sender marks
    the readers ready and rings a pipe (once per delivery, however many readers it marked), and
    the loop, watching the pipe's reading end, sets their events.

    What it saves over ``call_soon_threadsafe`` is not the write: the write can be made by C code
    that holds no GIL (the loop thread rings inside its decode call, ``common.decode_and_sample``),
    so that the woken loop runs its Python while the model computes, not between the wake and the
    decode. Unix only (a pipe watched by ``add_reader``); close it after the senders stopped."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._read_fd, self.fd = os.pipe()
        os.set_blocking(self._read_fd, False)
        os.set_blocking(self.fd, False)  # a full pipe has been rung: the ring is dropped, never waits
        self._ready: deque[asyncio.Event] = deque()  # appended on any thread, taken on the loop
        loop.add_reader(self._read_fd, self._answer)

    def mark(self, event: asyncio.Event) -> int:
        """Any thread: ``event`` is to be set; returns the pipe to ring for it. Every mark is
        followed by a ring, so the loop always answers after it."""
        self._ready.append(event)
        return self.fd

    def _answer(self) -> None:
        try:
            os.read(self._read_fd, 4096)  # more rings than that: the loop calls again
        except BlockingIOError:
            pass
        while self._ready:
            self._ready.popleft().set()

    def close(self) -> None:
        """Stop watching and close the pipe: on the loop's thread while that loop runs."""
        try:
            on_loop = asyncio.get_running_loop() is self.loop
        except RuntimeError:
            on_loop = False
        if on_loop or not self.loop.is_running():
            self._close_now()
        else:
            self.loop.call_soon_threadsafe(self._close_now)

    def _close_now(self) -> None:
        if not self.loop.is_closed():
            self.loop.remove_reader(self._read_fd)
        os.close(self._read_fd)
        os.close(self.fd)


class AsyncReader:
    """A :class:`ResponseReader` read on the event loop with no thread waiting: the result queue
    wakes it from the sending thread, so a token costs one thread hop, not two, and a result wakes
    only the request it belongs to. With a ``doorbell`` (of this loop), a step's results wake the
    loop once for all its readers, rung from outside the GIL; without one, each reader is woken
    by ``call_soon_threadsafe``.

    A waiting reader is also woken every ``poll_interval_s`` by one re-arming timer, so that
    ``should_stop`` is asked: a token costs one wake-up of the event loop, with no task and no
    timer made per wait (as ``asyncio.wait_for`` would)."""

    def __init__(
        self,
        reader: ResponseReader,
        poll_interval_s: float,
        on_stop: Callable[[], None] = lambda: None,
        doorbell: Doorbell | None = None,
    ) -> None:
        self.reader = reader
        self.poll_interval_s = poll_interval_s
        self._on_stop = on_stop
        event = self._event = asyncio.Event()
        loop = self._loop = asyncio.get_running_loop()
        self._ticker = loop.call_later(poll_interval_s, self._tick)

        def wake() -> int | None:
            if doorbell is not None:
                return doorbell.mark(event)
            if not loop.is_closed():
                loop.call_soon_threadsafe(event.set)
            return None

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
