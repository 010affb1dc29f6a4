"""Resumable streams (llama-server's ``X-Conversation-Id``): a generation that outlives its client.

A streamed completion sent with an ``X-Conversation-Id`` header is not read by its HTTP response
directly: a task of its own pumps the events into a session buffer for that conversation, and the
response (and any later ``GET /v1/stream?conv_id=ID&from=OFFSET``, e.g. after a page reload) reads
the buffer from a byte offset. A client that goes away no longer cancels the generation; only
``DELETE /v1/stream?conv_id=ID`` (the user's Stop) or a new request on the same conversation does.

All of it runs on the event loop thread, so no lock is needed. Sizes and times are llama-server's:
a session keeps the last 4 MiB, and a finished session is forgotten 5 minutes after it ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable
from typing import Any

from starlette.responses import StreamingResponse

__all__ = ["CONVERSATION_HEADER", "RESUMABLE_PATHS", "OffsetLost", "StreamSession", "StreamSessions"]

TTL_S = 300  # a finished session stays resumable this long
MAX_BYTES = 4 * 1024 * 1024  # a session keeps this many of its latest bytes
CONVERSATION_HEADER = "x-conversation-id"

# the routes whose event streams are resumable: those that stream a generation
RESUMABLE_PATHS = frozenset(
    {
        "/completion",
        "/completions",
        "/infill",
        "/v1/completions",
        "/chat/completions",
        "/v1/chat/completions",
        "/responses",
        "/v1/responses",
        "/v1/messages",
    }
)


class OffsetLost(Exception):
    """The reader's offset fell out of the session's buffer (the bytes were dropped for space)."""


class StreamSession:
    """One generation's SSE bytes: appended by its pump, read from any offset by any reader."""

    def __init__(self, conversation_id: str, max_bytes: int = MAX_BYTES) -> None:
        self.conversation_id = conversation_id
        self.started_at = int(time.time())
        self.completed_at = 0  # unix seconds once finished
        self.cancelled = False  # the user's Stop (or a newer request on the conversation)
        self.dropped = 0  # bytes evicted from the front to stay within max_bytes
        self._buffer = bytearray()
        self._max_bytes = max_bytes
        self._changed = asyncio.Event()
        self.pump: asyncio.Task[None] | None = None

    @property
    def done(self) -> bool:
        return self.completed_at != 0

    @property
    def total_bytes(self) -> int:
        return self.dropped + len(self._buffer)

    def _notify(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def append(self, data: bytes) -> None:
        if self.done or not data:
            return
        self._buffer += data
        if len(self._buffer) > self._max_bytes:
            cut = len(self._buffer) - self._max_bytes
            del self._buffer[:cut]
            self.dropped += cut
        self._notify()

    def finish(self) -> None:
        if not self.done:
            self.completed_at = int(time.time())
            self._notify()

    def cancel(self) -> None:
        """Stop the pump at once (closing the events cancels the generation) and end the readers."""
        self.cancelled = True
        if self.pump is not None:
            self.pump.cancel()
        self.finish()

    async def read(self, offset: int) -> AsyncIterator[bytes]:
        """The bytes from ``offset`` on: what is buffered now, then each append as it comes, until
        the session finishes. Raises :class:`OffsetLost` if ``offset`` was dropped."""
        while True:
            changed = self._changed
            if offset < self.dropped:
                raise OffsetLost(offset)
            if offset < self.total_bytes:
                chunk = bytes(self._buffer[offset - self.dropped :])
                offset += len(chunk)
                yield chunk
                continue
            if self.done:
                return
            await changed.wait()

    def describe(self) -> dict[str, Any]:
        """The ``POST /v1/streams/lookup`` entry."""
        return {
            "conversation_id": self.conversation_id,
            "is_done": self.done,
            "total_bytes": self.total_bytes,
            "started_at": self.started_at,
            "completed_at": self.completed_at,
        }


class StreamSessions:
    """The live sessions, one per conversation id."""

    def __init__(self, ttl_s: float = TTL_S, clock: Callable[[], float] = time.time) -> None:
        self._sessions: dict[str, StreamSession] = {}
        self._ttl_s = ttl_s
        self._clock = clock

    def _sweep(self) -> None:
        """Forget sessions that finished more than the TTL ago (done lazily, on each use)."""
        cutoff = self._clock() - self._ttl_s
        for cid in [c for c, s in self._sessions.items() if s.done and s.completed_at <= cutoff]:
            del self._sessions[cid]

    def get(self, conversation_id: str) -> StreamSession | None:
        self._sweep()
        return self._sessions.get(conversation_id)

    def lookup(self, ids: Iterable[str]) -> list[StreamSession]:
        """The sessions of these ids: each matches its own key and ``<id>::<model>`` keys; a caller
        learns nothing about ids it did not name."""
        self._sweep()
        found = []
        for rid in ids:
            found += [s for cid, s in self._sessions.items() if cid == rid or cid.startswith(rid + "::")]
        return found

    def stop(self, conversation_id: str) -> None:
        """The user's Stop: the pump stops pulling events (which cancels the generation), readers end."""
        session = self._sessions.pop(conversation_id, None)
        if session is not None:
            session.cancel()

    def close(self) -> None:
        """At shutdown: every session ends, so no reader waits forever."""
        for cid in list(self._sessions):
            self.stop(cid)

    def resumable(self, conversation_id: str, response: StreamingResponse) -> StreamingResponse:
        """Move ``response``'s events into a new session for the conversation (replacing and
        cancelling the previous one) and answer with a reader of that session."""
        self._sweep()
        self.stop(conversation_id)
        session = self._sessions[conversation_id] = StreamSession(conversation_id)
        session.pump = asyncio.get_running_loop().create_task(
            _pump(session, response.body_iterator, response.background)
        )
        response.body_iterator = session.read(0)
        response.background = None  # the pump cleans up, when the generation ends rather than the client
        return response


async def _pump(session: StreamSession, events: AsyncIterable[Any], cleanup: Any) -> None:
    """Copy the events into the session until they end or the session is cancelled; closing the
    event iterator then stops the generation."""
    try:
        async for chunk in events:
            if session.cancelled:
                break
            session.append(chunk.encode() if isinstance(chunk, str) else bytes(chunk))
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(Exception):
                await aclose()
        session.finish()
        if cleanup is not None:
            await cleanup()
