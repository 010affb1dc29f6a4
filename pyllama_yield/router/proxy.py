"""A request passed on to a model's own ``serve``: first the model made ready (loaded on demand,
in arrival order; a client that leaves while it waits gets out of the line, and nothing is evicted
for it), then the answer streamed back as it comes, the model counted busy until it ends. A client
that leaves mid-answer closes the model's stream, so the model stops generating (a resumable
session, ``X-Conversation-Id``, goes on in the model's process for a later resume).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import httpx
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from ..api.errors import ApiError
from .instances import Instance
from .registry import ModelRouter

__all__ = ["ModelProxy"]

# hop-by-hop and recomputed headers, not passed on either way
_DROP_REQUEST = {"host", "content-length", "transfer-encoding", "accept-encoding", "connection"}
_DROP_RESPONSE = {"server", "content-length", "transfer-encoding", "connection", "keep-alive", "date"}


def autoload(request: Request) -> bool | None:
    """``?autoload=``: true for "true" or "1", false for anything else, the flag's when absent."""
    value = request.query_params.get("autoload")
    return None if not value else value in ("true", "1")


class ModelProxy:
    def __init__(self, router: ModelRouter, timeout_s: float) -> None:
        self.router = router
        self.client = httpx.AsyncClient(timeout=httpx.Timeout(timeout_s, connect=10))

    async def ready(self, request: Request, inst: Instance, stopped: Callable[[], bool] | None = None) -> Instance:
        """``inst`` loaded for this request. ``stopped``: a session request's (``X-Conversation-Id``)
        own end: such a request outlives its client (a page reload resumes it), and only a stop
        of its conversation cancels it while it waits."""
        waiting = asyncio.ensure_future(self.router.ready(inst, autoload(request)))
        while not waiting.done():
            await asyncio.wait({waiting}, timeout=0.1 if stopped else 0.25)
            if waiting.done():
                break
            if stopped is not None and stopped():
                waiting.cancel()
            elif stopped is None and await request.is_disconnected():
                waiting.cancel()
                raise ApiError(f"request cancelled while waiting for model name={inst.entry.id}", 500, "server_error")
        if stopped is not None and stopped():
            raise ApiError("request cancelled by a stop while the model was loading")
        return waiting.result()

    async def forward(self, request: Request, inst: Instance, body: bytes, target: str | None = None) -> Response:
        """The request (to ``target``, a path and query, else its own) on ``inst``'s process, and
        its answer as it comes."""
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _DROP_REQUEST}
        target = target or request.url.path + (f"?{request.url.query}" if request.url.query else "")
        upstream = self.client.build_request(request.method, inst.url + target, headers=headers, content=body)
        self.router.begin(inst, wakes=request.method == "POST")
        try:
            if self.router.debug_delay_s:
                await asyncio.sleep(self.router.debug_delay_s)  # counted busy meanwhile
            answer = await self.client.send(upstream, stream=True)
        except httpx.HTTPError as exc:
            self.router.end(inst)
            raise ApiError(f"proxy error: {exc}", 500, "server_error") from None
        except BaseException:  # cancelled (the client left): the model is not busy for it any more
            self.router.end(inst)
            raise

        released = False

        async def release() -> None:  # the end of the answer, or the client gone: once
            nonlocal released
            if not released:
                released = True
                await answer.aclose()  # a model streaming to a client that left stops (its disconnect)
                self.router.end(inst)

        async def relay() -> AsyncIterator[bytes]:
            try:
                async for chunk in answer.aiter_raw():
                    yield chunk
            finally:
                await release()

        kept = {k: v for k, v in answer.headers.items() if k.lower() not in _DROP_RESPONSE}
        return StreamingResponse(
            relay(), status_code=answer.status_code, headers=kept, background=BackgroundTask(release)
        )

    async def aclose(self) -> None:
        await self.client.aclose()
