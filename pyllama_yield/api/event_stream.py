"""A streamed answer (SSE, NDJSON) that notices a client leaving without a task group per answer."""

from __future__ import annotations

import asyncio

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

__all__ = ["EventStream"]


class EventStream(StreamingResponse):
    """Starlette's ``StreamingResponse``, but a client that goes away is watched for by one plain
    task that cancels the stream, where Starlette opens an anyio task group and cancel scope for
    every answer on a server that speaks ASGI 2.3 (uvicorn's h11): that costs more per request
    than a short answer's tokens at GPU speed. As there, the stream ends at the disconnect (the
    body iterator is closed: a generation stops) and the background task runs after it."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        streaming = asyncio.current_task()
        assert streaming is not None
        done = False

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            if not done:  # else the answer was complete: nothing to stop
                streaming.cancel()

        watcher = asyncio.get_running_loop().create_task(watch())
        try:
            await self.stream_response(send)
        except asyncio.CancelledError:
            if not watcher.done():
                raise  # cancelled from elsewhere (a shutdown), not by the client's leaving
            uncancel = getattr(streaming, "uncancel", None)  # Python 3.11+: the request is answered
            if uncancel is not None:
                uncancel()
        finally:
            done = True
            watcher.cancel()
        if self.background is not None:
            await self.background()
