"""The router's HTTP side, with llama-server's router contract: ``/models`` (each model's status),
``/models/load`` and ``/models/unload``, downloads (``POST /models``, ``DELETE /models``) and the
events of ``/models/sse``, ``/props`` with ``role: router``, the server tools (``/tools``, run here
as llama-server's router runs them) and the page's CORS proxy, and every model route
passed to the model's own ``serve`` — a POST by its body's ``model``, a GET by ``?model=`` —
streamed through as it comes. The API key is checked here; the models' processes take none.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

import pyllama_yield._build_config as _build_config  # absolute: see _native.py

from ..api import batches, cors_proxy
from ..api import tools as tool_routes
from ..api.admin import WEBUI
from ..api.app import ROUTES as MODEL_ROUTES
from ..api.app_state import batch_service, json_body
from ..api.auth import guarded
from ..api.errors import ApiError, error_response, failure_error
from ..api.middleware import ServerMiddleware
from ..api.ollama_request import ollama_error
from ..api.openai import model_entry
from ..api.resumable import CONVERSATION_HEADER
from ..server.errors import EngineFailure, ErrorKind
from ..settings import ServerSettings
from ..settings.keys import KeyRing
from ..tools import ServerTools
from . import ollama
from .downloads import Download, Downloads
from .instances import Instance
from .proxy import ModelProxy
from .registry import ModelRouter, RouterError
from .resumable import Conversations, StreamRoutes

__all__ = ["build_router_app"]

log = logging.getLogger("pyllama_yield.router")

PROXIED_GET = ("/metrics", "/lora-adapters", "/slots", "/queue")  # GETs about one model: ``?model=`` names it

Handler = Callable[[Request], Awaitable[Response]]
T = TypeVar("T")


def _listed(model_id: str, status: dict[str, Any], source: str, **more: Any) -> dict[str, Any]:
    """One entry of ``GET /models``, in llama-server's shape."""
    entry = model_entry(model_id, [], [])
    return {**entry, "status": status, "source": source, "can_remove": source == "cache", **more}


def model_json(inst: Instance) -> dict[str, Any]:
    """A model of the router, as llama-server lists it."""
    inst.refresh()
    status: dict[str, Any] = {
        "value": inst.shown_status,
        "args": inst.command(inst.port if inst.running else 0),
    }
    if not inst.running and inst.exit_code:
        status.update(exit_code=inst.exit_code, failed=True)
    e = inst.entry
    modalities = ["text", "image"] if e.has_projector else ["text"]
    architecture = {"input_modalities": modalities, "output_modalities": ["text"]}
    return _listed(e.id, status, e.source, aliases=e.aliases, tags=e.tags, architecture=architecture)


def download_json(download: Download) -> dict[str, Any]:
    """A model being downloaded (``POST /models``), with each file's bytes done and total."""
    return _listed(download.name, {"value": "downloading", "args": []}, "cache", progress=download.progress)


class RouterState:
    """What the routes shared with a single model's server (``/tools``, ``/cors-proxy``) need of
    the app: the flags, the tools, and a worker thread for a blocking call."""

    def __init__(self, settings: ServerSettings, tools: ServerTools | None, keys: KeyRing) -> None:
        self.settings = settings
        self.tools = tools
        self.keys = keys
        # the Batch API at the router: each line goes through the router, its model picked by its body
        slots = settings.parallel if settings.parallel > 0 else 4
        self.batches = batch_service(settings, keys, lambda: slots + 1)

    async def wait_attached(self) -> None:
        """The router serves from its start (a line's model is loaded when the line needs it)."""

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.to_thread(fn, *args)


class RouterRoutes:
    """The handlers, over one router and one HTTP client to the models' processes."""

    def __init__(self, router: ModelRouter, settings: ServerSettings) -> None:
        self.router = router
        self.settings = settings
        self.proxy = ModelProxy(router, settings.timeout)
        self.downloads = Downloads(router, settings.hf_token)
        self.conversations = Conversations()
        self.streams = StreamRoutes(router, self.proxy, self.conversations)

    async def health(self, request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def props(self, request: Request) -> Response:
        if request.method == "GET" and "model" not in request.query_params:
            return JSONResponse(
                {
                    "role": "router",
                    "max_instances": self.router.models_max,
                    "models_autoload": self.router.autoload,
                    "model_alias": "llama-server",
                    "model_path": "none",
                    "default_generation_settings": {"params": {}, "n_ctx": 0},
                    "build_info": f"b{_build_config.LLAMA_BUILD_NUMBER}-{_build_config.LLAMA_COMMIT}",
                }
            )
        return await (self.proxy_get if request.method == "GET" else self.proxy_post)(request)

    async def models(self, request: Request) -> Response:
        if request.query_params.get("reload"):
            self.router.reload()
        data = [model_json(i) for i in self.router.instances.values() if not i.entry.hidden]
        data += [download_json(d) for d in self.downloads.active.values()]
        return JSONResponse({"data": data, "object": "list"})

    async def download(self, request: Request) -> Response:
        await self.downloads.start((await json_body(request, empty_is_object=True)).get("model"))
        return JSONResponse({"success": True})

    async def remove(self, request: Request) -> Response:
        await self.downloads.remove(request.query_params.get("model"))
        return JSONResponse({"success": True})

    async def events(self, request: Request) -> Response:
        """``GET /models/sse``: subscribed before the answer starts, so no event after it is lost."""
        queue = self.router.events.subscribe()
        lines = self.router.events.stream(queue, request.is_disconnected)
        return StreamingResponse(lines, media_type="text/event-stream", background=BackgroundTask(
            self.router.events.unsubscribe, queue))  # fmt: skip

    async def load(self, request: Request) -> Response:
        inst = self.router.find(str((await json_body(request, empty_is_object=True)).get("model", "")))
        if inst is None:
            raise ApiError("model is not found", 404, "not_found_error")
        self.router.load_in_background(inst)
        return JSONResponse({"success": True})

    async def unload(self, request: Request) -> Response:
        name = str((await json_body(request, empty_is_object=True)).get("model", ""))
        if name in self.downloads.active:  # llama-server: unloading a download cancels it
            await self.downloads.remove(name)
            return JSONResponse({"success": True})
        inst = self.router.find(name)
        if inst is None:
            raise ApiError("model is not found")
        await self.router.unload(inst)
        return JSONResponse({"success": True})

    async def proxy_post(self, request: Request) -> Response:
        body = await request.body()
        try:
            fields = json.loads(body or b"{}") if body else {}
            name = ollama.body_model(fields)
        except (ValueError, AttributeError):
            raise ApiError("the request body is not a JSON object") from None
        if request.url.path.startswith("/api/") and "keep_alive" in fields:
            # Ollama's keep_alive is the router's to keep: the model's time to stay loaded
            try:
                seconds = ollama.keep_alive_seconds(fields.pop("keep_alive"))
            except ValueError as exc:
                raise ApiError(str(exc)) from None
            self.router.resolve(name).keep_alive_asked = seconds
            body = json.dumps(fields).encode()
        inst = self.router.resolve(name)
        conv_id = request.headers.get(CONVERSATION_HEADER)
        if not conv_id:
            return await self.proxy.forward(request, await self.proxy.ready(request, inst), body)
        # a session request: remembered before the wait, so that a stop can cancel it meanwhile
        ticket = self.conversations.remember(conv_id, inst.entry.id)
        inst = await self.proxy.ready(request, inst, stopped=lambda: not self.conversations.alive(conv_id, ticket))
        return await self.proxy.forward(request, inst, body)

    async def pull(self, request: Request) -> Response:
        """Ollama's ``/api/pull``: NDJSON progress (or, with ``stream: false``, the last status)."""
        body = await json_body(request, empty_is_object=True)
        events = ollama.pull(self.router, body, self.settings.hf_token)
        try:
            first = await events.__anext__()  # a bad name: a plain error
            if body.get("stream") is False:
                last = first
                async for event in events:
                    last = event
                return JSONResponse(last)
        except ValueError as exc:
            raise ApiError(str(exc)) from None

        async def lines() -> AsyncIterator[str]:
            yield json.dumps(first) + "\n"
            try:
                async for event in events:
                    yield json.dumps(event) + "\n"
            except ValueError as exc:
                yield json.dumps({"error": str(exc)}) + "\n"

        return StreamingResponse(lines(), media_type="application/x-ndjson")

    async def delete(self, request: Request) -> Response:
        await self.downloads.remove(ollama.removable(self.router, await json_body(request, empty_is_object=True)))
        return Response(status_code=200)

    async def proxy_get(self, request: Request) -> Response:
        inst = await self.proxy.ready(request, self.router.resolve(request.query_params.get("model")))
        return await self.proxy.forward(request, inst, b"")


async def _answered(response: Response) -> Response:
    return response


def _endpoint(fn: Handler, keys: KeyRing, public: bool = False) -> Handler:
    async def wrapped(request: Request) -> Response:
        ollama_shape = request.url.path.startswith("/api/")

        async def run(request: Request) -> Response:
            try:
                return await fn(request)
            except RouterError as exc:
                error = failure_error(EngineFailure(str(exc), exc.kind))
                if ollama_shape and exc.kind is ErrorKind.UNKNOWN_MODEL:
                    error.status = 404  # Ollama's clients expect a 404 for a model it does not have
                raise error from None

        return await guarded(request, run, None if public else keys, ollama_error if ollama_shape else error_response)

    return wrapped


async def _watch_idle(router: ModelRouter, client: httpx.AsyncClient) -> None:
    """Every second: models idle past their keep-alive are unloaded, and the status of those that
    can sleep follows their process."""
    while True:
        await asyncio.sleep(1)
        try:
            await router.unload_expired()
            await router.check_sleeping(client)
        except Exception:  # a failed stop or check must not end the watch
            log.exception("watching idle models failed")


def _page(settings: ServerSettings) -> list[BaseRoute]:
    """The chat page, as a single model serves it (public, as llama-server's: the API key guards
    the API); against a router it offers a picker of the models. None with ``--no-ui``."""
    if not settings.ui:
        return []
    folder = Path(settings.path or WEBUI)

    async def index(request: Request) -> Response:
        return FileResponse(folder / "index.html", headers={"Cache-Control": "no-cache"})

    return [Route("/", index, methods=["GET"]), Mount("/", StaticFiles(directory=folder), name="webui")]


def proxied_posts(own: list[tuple[str, Handler, list[str], bool]]) -> list[str]:
    """Every POST route of a model's server that the router does not answer itself (``own``): the
    request's ``model`` picks the instance it goes to."""
    answered = {path for path, _, methods, _ in own if "POST" in methods}
    paths = [path for path, _, methods, _ in MODEL_ROUTES if "POST" in methods and path not in answered]
    return list(dict.fromkeys(paths))


def build_router_app(router: ModelRouter, settings: ServerSettings, tools: ServerTools | None = None) -> Starlette:
    """``tools``: what ``/tools`` serves (``--tools`` and MCP servers; None: the route answers 403)."""
    h = RouterRoutes(router, settings)
    keys = settings.key_ring()
    table: list[tuple[str, Handler, list[str], bool]] = [
        ("/health", h.health, ["GET"], True),
        ("/v1/health", h.health, ["GET"], True),
        ("/props", h.props, ["GET", "POST"], False),
        ("/models", h.models, ["GET"], False),
        ("/models", h.download, ["POST"], False),
        ("/models", h.remove, ["DELETE"], False),
        ("/models/sse", h.events, ["GET"], False),
        ("/v1/models", h.models, ["GET"], False),
        ("/models/load", h.load, ["POST"], False),
        ("/models/unload", h.unload, ["POST"], False),
        ("/api/tags", lambda r: _answered(ollama.tags(router)), ["GET"], False),
        ("/api/ps", lambda r: _answered(ollama.ps(router)), ["GET"], False),
        ("/api/version", lambda r: _answered(ollama.version(r)), ["GET"], False),
        ("/api/pull", h.pull, ["POST"], False),
        ("/api/delete", h.delete, ["DELETE"], False),
        ("/tools", tool_routes.get_tools, ["GET"], False),
        ("/tools", tool_routes.post_tools, ["POST"], False),
        ("/cors-proxy", cors_proxy.cors_proxy, ["GET"], False),
        ("/cors-proxy", cors_proxy.cors_proxy, ["POST"], False),
        ("/v1/stream", h.streams.get, ["GET"], False),
        ("/v1/stream", h.streams.delete, ["DELETE"], False),
        ("/v1/streams/lookup", h.streams.lookup, ["POST"], False),
        *((path, h.proxy_get, ["GET"], False) for path in PROXIED_GET),
        *((path, fn, methods, False) for path, fn, methods in batches.ROUTES),
    ]
    table += [(path, h.proxy_post, ["POST"], False) for path in proxied_posts(table)]
    routes: list[BaseRoute] = [
        Route(path, _endpoint(fn, keys, public), methods=methods) for path, fn, methods, public in table
    ]
    routes += _page(settings)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        for inst in router.instances.values():  # load-on-startup, in the background
            if inst.entry.load_on_startup:
                router.load_in_background(inst)
        reaper = asyncio.get_running_loop().create_task(_watch_idle(router, h.proxy.client))
        state: RouterState = app.state.pyllama
        state.batches.resume(app, state.wait_attached)  # batches a previous run left open go on
        try:
            yield
        finally:
            await state.batches.close()
            reaper.cancel()
            await h.downloads.cancel_all()
            await router.stop_all()
            await h.proxy.aclose()

    middleware = [Middleware(ServerMiddleware, cors_origins=settings.cors_allowed, unavailable=lambda: None)]
    app = Starlette(routes=routes, middleware=middleware, lifespan=lifespan)
    app.state.pyllama = RouterState(settings, tools, keys)
    return app
