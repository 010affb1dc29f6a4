"""The Starlette app: routes of each family mounted over one server context, auth and errors.

The HTTP layer only posts tasks and reads results; it never calls llama.cpp. Needs the
``server`` extra: ``pip install 'pyllama-yield[server]'``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

import anyio
import anyio.lowlevel
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from ..server import Engine
from ..settings import ServerSettings
from ..tools import ServerTools
from . import (
    admin,
    anthropic,
    batches,
    chat,
    cors_proxy,
    embeddings,
    gcp,
    native,
    ollama,
    openai,
    openai_responses,
    openapi,
    resumable_routes,
    tools,
)
from .app_state import AppState
from .auth import guarded
from .errors import ApiError
from .middleware import ServerMiddleware
from .resumable import CONVERSATION_HEADER, RESUMABLE_PATHS

Handler = Callable[[Request], Awaitable[Response]]


def _endpoint(fn: Handler, public: bool = False, wakes: bool = True) -> Handler:
    """``fn`` behind the API key check (unless ``public``); a sleeping server is woken first
    unless the route answers from what sleep keeps (``wakes`` False)."""

    async def run(request: Request) -> Response:
        state: AppState = request.app.state.pyllama
        if wakes and state.engine.is_sleeping:
            await state.bridge.run(state.engine.wait_until_awake)
        response = await fn(request)
        conversation = request.headers.get(CONVERSATION_HEADER)
        if conversation and isinstance(response, StreamingResponse) and request.url.path in RESUMABLE_PATHS:
            return state.streams.resumable(conversation, response)  # the generation outlives its client
        return response

    async def wrapped(request: Request) -> Response:
        return await guarded(request, run, None if public else request.app.state.pyllama.keys)

    return wrapped


def _gated(fn: Handler, enabled: Callable[[ServerSettings], bool], flag: str, what: str) -> Handler:
    """A route that a flag turns on (llama-server answers 501 when it is off)."""

    async def gated(request: Request) -> Response:
        state: AppState = request.app.state.pyllama
        if not enabled(state.settings):
            raise ApiError(f"This server does not support {what}. Start it with `{flag}`", 501, "not_supported_error")
        return await fn(request)

    return gated


# what a sleeping server answers without waking up (as llama-server): the rest wakes it first
STAY_ASLEEP = {("/", "GET"), ("/health", "GET"), ("/v1/health", "GET"), ("/metrics", "GET"), ("/props", "GET")}
STAY_ASLEEP |= {("/models", "GET"), ("/v1/models", "GET"), ("/openapi.json", "GET"), ("/_app/version.json", "GET")}
# nor do the routes that never touch the model
STAY_ASLEEP |= {("/tools", "GET"), ("/tools", "POST"), ("/cors-proxy", "GET"), ("/cors-proxy", "POST")}
STAY_ASLEEP |= {("/v1/stream", "GET"), ("/v1/stream", "DELETE"), ("/v1/streams/lookup", "POST")}

# path, handler, methods, public (no API key needed)
ROUTES: list[tuple[str, Handler, list[str], bool]] = [
    ("/", admin.index, ["GET"], True),
    ("/openapi.json", openapi.openapi_json, ["GET"], True),
    ("/_app/version.json", admin.ui_version, ["GET"], True),
    ("/health", native.health, ["GET"], True),
    ("/props", admin.get_props, ["GET"], False),
    ("/props", admin.post_props, ["POST"], False),
    ("/apply-template", admin.apply_template, ["POST"], False),
    ("/slots/{id_slot}", admin.slot_action, ["POST"], False),
    ("/lora-adapters", admin.get_lora_adapters, ["GET"], False),
    ("/lora-adapters", admin.post_lora_adapters, ["POST"], False),
    ("/v1/health", native.health, ["GET"], True),
    ("/metrics", _gated(native.metrics, lambda s: s.metrics, "--metrics", "metrics endpoint"), ["GET"], False),
    ("/slots", _gated(native.slots, lambda s: s.slots, "--slots", "slots endpoint"), ["GET"], False),
    ("/queue", _gated(native.queue, lambda s: s.slots, "--slots", "queue endpoint"), ["GET"], False),
    ("/tokenize", native.tokenize, ["POST"], False),
    ("/detokenize", native.detokenize, ["POST"], False),
    ("/completion", native.completion, ["POST"], False),
    ("/completions", native.completion, ["POST"], False),
    ("/infill", native.infill, ["POST"], False),
    ("/embedding", embeddings.embedding, ["POST"], False),
    ("/embeddings", embeddings.embedding, ["POST"], False),
    ("/v1/embeddings", embeddings.v1_embeddings, ["POST"], False),
    ("/rerank", embeddings.rerank, ["POST"], False),
    ("/reranking", embeddings.rerank, ["POST"], False),
    ("/v1/rerank", embeddings.rerank, ["POST"], False),
    ("/v1/reranking", embeddings.rerank, ["POST"], False),
    ("/v1/models", openai.models, ["GET"], False),
    ("/models", openai.models, ["GET"], False),
    ("/v1/completions", openai.completions, ["POST"], False),
    ("/v1/chat/completions", chat.chat_completions, ["POST"], False),
    ("/chat/completions", chat.chat_completions, ["POST"], False),
    ("/v1/chat/completions/input_tokens", chat.count_tokens, ["POST"], False),
    ("/chat/completions/input_tokens", chat.count_tokens, ["POST"], False),
    ("/v1/responses", openai_responses.responses, ["POST"], False),
    ("/responses", openai_responses.responses, ["POST"], False),
    ("/v1/responses/input_tokens", openai_responses.count_tokens, ["POST"], False),
    ("/responses/input_tokens", openai_responses.count_tokens, ["POST"], False),
    ("/v1/messages", anthropic.messages, ["POST"], False),
    ("/v1/messages/count_tokens", anthropic.count_tokens, ["POST"], False),
    ("/v1/stream", resumable_routes.get_stream, ["GET"], False),
    ("/v1/stream", resumable_routes.delete_stream, ["DELETE"], False),
    ("/v1/streams/lookup", resumable_routes.lookup_streams, ["POST"], False),
    ("/tools", tools.get_tools, ["GET"], False),
    ("/tools", tools.post_tools, ["POST"], False),
    ("/cors-proxy", cors_proxy.cors_proxy, ["GET"], False),
    ("/cors-proxy", cors_proxy.cors_proxy, ["POST"], False),
    *((path, fn, methods, False) for path, fn, methods in ollama.ROUTES),
    *((path, fn, methods, False) for path, fn, methods in batches.ROUTES),
]


# Starlette tries the routes in order, a regular expression each: the ones most requests take go
# first (in ROUTES' order, /completion came after 16 others and /v1/chat/completions after 28: 11 and
# 29 us per request here, hot; first, 1 and 4 us)
MATCHED_FIRST: tuple[str, ...] = ("/completion", "/v1/chat/completions", "/chat/completions", "/v1/completions")
MATCHED_FIRST += ("/completions", "/health", "/v1/health", "/metrics", "/v1/messages", "/v1/responses", "/responses")


def _match_order(route: tuple[str, Handler, list[str], bool]) -> int:
    """Where a route of ``ROUTES`` goes in the router (a stable sort: one path's methods keep their order)."""
    return MATCHED_FIRST.index(route[0]) if route[0] in MATCHED_FIRST else len(MATCHED_FIRST)


@contextlib.asynccontextmanager
async def _lifespan(app: Starlette) -> AsyncIterator[None]:
    await _import_what_a_stream_needs()
    state: AppState = app.state.pyllama
    state.batches.resume(app, state.wait_attached)  # batches a previous run left open go on
    yield
    await state.batches.close()
    state.streams.close()  # on the event loop: pumps cancelled, readers released


async def _import_what_a_stream_needs() -> None:
    """anyio imports its asyncio backend's task groups, streams and sockets on first use, which
    is a streamed answer's (Starlette runs each in a task group): about 10 ms, paid at startup
    rather than by the first client."""
    async with anyio.create_task_group() as group:
        group.start_soon(anyio.lowlevel.checkpoint)


def build_app(
    engine: Engine | None,
    settings: ServerSettings | None = None,
    *,
    poll_interval_s: float = 0.25,
    tools: ServerTools | None = None,
) -> Starlette:
    """The Starlette app for ``settings`` (the flags). It serves ``engine`` (a started server context)
    once attached: pass it here, or later with ``app.state.pyllama.attach(engine)`` (until then every
    request gets 503 "Loading model", as llama-server answers while it loads). ``tools``: what
    ``/tools`` serves (``--tools`` and MCP servers; None: the route answers 403)."""
    settings = settings or ServerSettings()
    state = AppState(settings, poll_interval_s)
    state.tools = tools
    routes: list[BaseRoute] = [
        Route(path, _endpoint(fn, public, (path, methods[0]) not in STAY_ASLEEP), methods=methods)
        for path, fn, methods, public in sorted(ROUTES, key=_match_order)
    ]
    if gcp.enabled():  # Vertex AI's prediction protocol over the POST routes (and its health path)
        posts = {path: _endpoint(fn, public) for path, fn, methods, public in ROUTES if methods == ["POST"]}
        routes.append(Route(gcp.predict_route(), _endpoint(gcp.make_predict(posts)), methods=["POST"]))
        if health := gcp.health_route():
            routes.append(Route(health, _endpoint(native.health, True, False), methods=["GET"]))
    if settings.ui:  # the page's other files, public as in llama-server (the API key guards the API)
        routes.append(Mount("/", StaticFiles(directory=settings.path or admin.WEBUI), name="webui"))
    middleware = [
        Middleware(ServerMiddleware, cors_origins=settings.cors_allowed, unavailable=lambda: state.unavailable)
    ]
    app = Starlette(routes=routes, middleware=middleware, lifespan=_lifespan)
    app.state.pyllama = state
    described = [(path, methods[0], public) for path, _, methods, public in ROUTES]
    if gcp.enabled():
        described.append((gcp.predict_route(), "POST", False))
    app.state.pyllama_routes = tuple(described)  # what /openapi.json describes
    if engine is not None:
        state.attach(engine)
    return app
