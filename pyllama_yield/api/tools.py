"""``GET /tools`` and ``POST /tools``: llama-server's server-side tools, for the web page's agent.

``POST /tools`` ``{"tool": NAME, "params": {...}, "stream": false}`` answers the tool's own JSON
(``{"error": ...}`` with status 200 when the tool itself failed). With ``"stream": true`` (only
``exec_shell_command``) it is an event stream of ``{"chunk": ...}`` then ``{"done": true}`` (with
``"error"`` if the tool raised). Refusals use llama-server's statuses and its bare error object
(not wrapped in ``"error"``): 400 for a malformed body or arguments, 404 for an unknown tool, 500
for a refused runtime. Off (403) unless ``--tools`` or MCP servers are configured.

The app's ``state.pyllama`` is a :class:`ToolsHost`: a single model's ``AppState``, or a router's.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol, TypeVar

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from ..settings import ServerSettings
from ..tools import ServerTools, Tool, ToolArgumentError, ToolError, UnknownToolError
from ..tools.params import json_type, required
from .app_state import json_value
from .bridge import DisconnectWatch, sse
from .cors_proxy import feature_disabled
from .errors import ApiError
from .json_out import JSONResponse

__all__ = ["ToolsHost", "get_tools", "post_tools"]

T = TypeVar("T")


class ToolsHost(Protocol):
    settings: ServerSettings
    tools: ServerTools | None

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on a worker thread, awaited without blocking the event loop."""
        ...


log = logging.getLogger("pyllama_yield.api")


def _bare_error(message: str, status: int, kind: str) -> JSONResponse:
    return JSONResponse({"code": status, "message": message, "type": kind}, status)


def _host(request: Request) -> ToolsHost:
    host: ToolsHost = request.app.state.pyllama
    return host


def _tools(request: Request) -> ServerTools | None:
    return _host(request).tools


async def get_tools(request: Request) -> Response:
    tools = _tools(request)
    return JSONResponse(tools.listing()) if tools else await feature_disabled(request)


async def post_tools(request: Request) -> Response:
    tools = _tools(request)
    if tools is None:
        return await feature_disabled(request)
    try:
        name, params, stream = _call(await json_value(request))
        tool = tools.find(name, stream)
        params = tools.call_params(params, request.headers)
        if stream:
            return _stream(request, tool, params)
        return JSONResponse(await _host(request).run(tool.invoke, params, None))
    except ApiError as exc:  # malformed JSON, or a body over --max-body-size
        return _bare_error(str(exc), exc.status, exc.kind)
    except ToolArgumentError as exc:
        return _bare_error(str(exc), 400, "invalid_request_error")
    except UnknownToolError as exc:
        return _bare_error(str(exc), 404, "invalid_request_error")
    except ToolError as exc:
        return _bare_error(str(exc), 500, "server_error")


def _call(body: Any) -> tuple[str, dict[str, Any], bool]:
    """The body's tool name, params and stream flag, with the JSON errors llama-server gives."""
    name = required(body, "tool")
    params = body.get("params")
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise ToolArgumentError(f"[json.exception.type_error.304] cannot use at() with {json_type(params)}")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise ToolArgumentError(f"[json.exception.type_error.302] type must be boolean, but is {json_type(stream)}")
    return name, params, stream


def _stream(request: Request, tool: Tool, params: dict[str, Any]) -> StreamingResponse:
    """The tool runs on a worker thread; its chunks cross to the event loop through a queue."""
    host = _host(request)
    loop = asyncio.get_running_loop()
    events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    gone = threading.Event()

    def push(chunk: str) -> bool:
        if chunk:
            loop.call_soon_threadsafe(events.put_nowait, {"chunk": chunk})
        return not gone.is_set()

    def run() -> None:
        done: dict[str, Any] = {"done": True}
        try:
            tool.invoke(params, push)
        except Exception as exc:  # reported in the last event, as llama-server does
            done["error"] = str(exc) or type(exc).__name__
        loop.call_soon_threadsafe(events.put_nowait, done)

    async def stream_events() -> AsyncIterator[str]:
        with DisconnectWatch(request, gone):  # the tool's push() sees the client leave
            worker = asyncio.ensure_future(host.run(run))
            try:
                while True:
                    event = await events.get()
                    yield sse(event)
                    if event.get("done"):
                        return
            finally:
                gone.set()
                await worker

    return StreamingResponse(stream_events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
