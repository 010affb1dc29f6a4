"""The router's model events, streamed as llama-server's ``GET /models/sse`` streams them: one
``data: {"model": ..., "event": ..., "data": ...}`` line per event (``status_change``,
``download_progress``, ``download_finished``, ``download_failed``, ``model_remove``,
``models_reload``), to every client subscribed when it happens.

Event-loop side: :meth:`ModelEvents.publish` is called on the loop (threads hand their events
over with ``loop.call_soon_threadsafe``); :meth:`ModelEvents.close_soon` may be called from a
signal handler: at shutdown every stream ends, so that no listener holds the router open.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

__all__ = ["ModelEvents"]

log = logging.getLogger("pyllama_yield.router")

# events a client has not read yet; past that the oldest go (a client that stopped reading must
# not grow the router's memory without end)
_BACKLOG = 1024


class ModelEvents:
    def __init__(self) -> None:
        self._clients: set[asyncio.Queue[dict[str, Any] | None]] = set()  # None: the stream ends
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False

    def publish(self, event: str, model: str, data: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"model": model, "event": event}
        if data is not None:
            message["data"] = data
        for queue in self._clients:
            if queue.full():
                queue.get_nowait()
            queue.put_nowait(message)

    def subscribe(self) -> asyncio.Queue[dict[str, Any] | None]:
        """A new client's queue: it hears every event from now on, until :meth:`unsubscribe`."""
        self._loop = asyncio.get_running_loop()
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue(_BACKLOG)
        if self._closed:
            queue.put_nowait(None)
        self._clients.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[dict[str, Any] | None]) -> None:
        self._clients.discard(queue)

    def close_soon(self) -> None:
        """Every stream ends (thread- and signal-safe): the router is stopping."""
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._close)

    def _close(self) -> None:
        self._closed = True
        for queue in self._clients:
            if queue.full():
                queue.get_nowait()
            queue.put_nowait(None)

    async def stream(
        self, queue: asyncio.Queue[dict[str, Any] | None], gone: Callable[[], Awaitable[bool]]
    ) -> AsyncIterator[str]:
        """A subscribed client's events as SSE lines, until ``gone()`` says it left or the router
        stops."""
        try:
            while True:
                try:
                    message = await asyncio.wait_for(queue.get(), timeout=1.0)
                except asyncio.TimeoutError:
                    if await gone():
                        return
                    continue
                if message is None:
                    return
                yield f"data: {json.dumps(message)}\n\n"
        finally:
            self.unsubscribe(queue)
