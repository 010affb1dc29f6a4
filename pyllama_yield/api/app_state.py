"""What every route needs: the server context, the bridge to it, and the request body."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from starlette.requests import Request

from ..batch import Batches, default_data_dir
from ..server import Engine
from ..settings import ServerSettings
from ..settings.keys import KeyRing
from ..tools import ServerTools
from .auth import INTERNAL_HEADER, TENANT_HEADER
from .bridge import Bridge
from .errors import ApiError
from .resumable import StreamSessions

T = TypeVar("T")


class AppState:
    """The app's state; the server context arrives once the model is loaded (:meth:`attach`):
    until then the middleware answers every request with 503 "Loading model"."""

    def __init__(self, settings: ServerSettings, poll_interval_s: float = 0.25) -> None:
        self.settings = settings
        self.keys = settings.key_ring()
        # a batch keeps one line more in flight than there are slots: one always waits for the next
        # free slot (behind any interactive request, whose priority is more urgent), so none idles
        self.batches = batch_service(settings, self.keys, lambda: self.engine.n_parallel + 1)
        self.poll_interval_s = poll_interval_s
        self.engine: Engine = None  # type: ignore[assignment]  # set by attach()
        self.bridge: Bridge = None  # type: ignore[assignment]
        self.streams = StreamSessions()  # resumable streams (X-Conversation-Id)
        self.tools: ServerTools | None = None  # /tools (--tools, MCP servers)

    @property
    def unavailable(self) -> str | None:
        """Why every request gets a 503 now: the model is loading, or the engine stopped for good
        (its rpc-server died, say); None while it serves."""
        if self.engine is None:
            return "Loading model"
        return self.engine.failure

    def attach(self, engine: Engine) -> None:
        s = self.settings
        threads = s.threads_http if s.threads_http > 0 else 512
        self.bridge = Bridge(engine, self.poll_interval_s, threads, max_queue=s.max_queue, timeout_s=s.timeout)
        engine.queue.fair_share.weigh = self.keys.weight  # a tenant's share of the slots: its key's weight
        self.engine = engine

    async def wait_attached(self) -> None:
        """Until the model is loaded and served (the Batch API's runner starts then)."""
        while self.engine is None:
            await asyncio.sleep(0.1)  # set by another thread, once; nothing to wait on but the value

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on a bridge thread (``/tools``' calls), awaited without blocking the loop."""
        return await self.bridge.run(fn, *args)

    def close(self) -> None:
        """Join the HTTP threads (after the server context stopped, which wakes them)."""
        if self.bridge is not None:
            self.bridge.close()

    @property
    def model_name(self) -> str:
        return self.engine.info["model"]

    @property
    def fingerprint(self) -> str:
        return self.engine.info["system_fingerprint"]


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refused with a 413 as soon as it is known to pass ``limit`` bytes: from
    its Content-Length before reading anything, else while it streams in."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ApiError(f"request body too large ({declared} bytes, limit {limit})", 413)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ApiError(f"request body too large (over {limit} bytes)", 413)
        chunks.append(chunk)
    return b"".join(chunks)


async def json_value(request: Request, empty: Any = None) -> Any:
    """The request's JSON body, whatever its type (at most ``--max-body-size`` bytes); ``empty``:
    what an empty body reads as (None: it is malformed). The app's state (a model server's or
    the router's) has the settings."""
    settings: ServerSettings = request.app.state.pyllama.settings
    raw = await read_body(request, settings.max_body_size)
    if not raw and empty is not None:
        return empty
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ApiError(f"malformed JSON body: {exc}") from exc


def batch_service(settings: ServerSettings, keys: KeyRing, in_flight: Callable[[], int]) -> Batches:
    """The Batch API of a server (or router) with these flags: its data folder, and the header its
    lines pass the API key check with, as the batch's tenant."""
    internal = {INTERNAL_HEADER: keys.internal}
    return Batches(batch_data_dir(settings), in_flight, lambda tenant: {**internal, TENANT_HEADER: tenant})


def batch_data_dir(settings: ServerSettings) -> Path:
    return Path(settings.data_dir) if settings.data_dir else default_data_dir()


async def json_body(request: Request, empty_is_object: bool = False) -> dict[str, Any]:
    """The request's JSON object; ``empty_is_object``: an empty body reads as ``{}`` (the
    router's own routes: a missing body means no fields)."""
    body = await json_value(request, {} if empty_is_object else None)
    if not isinstance(body, dict):
        raise ApiError("the JSON body must be an object")
    return body
