"""Before any route: CORS (llama-server's rules), and a 503 while no route can be served: "Loading
model" until the model is up, or the reason the engine stopped for good.

A pure ASGI middleware, so a streaming response passes through untouched.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

from .http_server import CasedName

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

CORS_METHODS = "GET, POST, DELETE, OPTIONS"
CORS_HEADERS = "*"


def _is_localhost(origin: str) -> bool:
    try:
        return urlsplit(origin).hostname in ("localhost", "127.0.0.1", "::1")
    except ValueError:
        return False


def allow_origin(origins: str, origin: str | None) -> str | None:
    """The Access-Control-Allow-Origin value: ``*`` echoes the caller's origin (credentials are
    allowed), ``localhost`` echoes only a local origin, anything else is sent as given."""
    if origins == "*":
        return origin or "*"
    if origins == "localhost":
        return origin if origin and _is_localhost(origin) else None
    return origins


class ServerMiddleware:
    def __init__(self, app: ASGIApp, cors_origins: str, unavailable: Callable[[], str | None]) -> None:
        """``unavailable()``: why no route can be served now (a 503 with that message), or None."""
        self.app = app
        self.cors_origins = cors_origins
        self.unavailable = unavailable

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        allowed = allow_origin(self.cors_origins, headers.get("origin"))
        # header names in llama-server's case: clients that read raw header names rely on it
        extra: list[tuple[bytes, bytes]] = (
            [(CasedName(b"Access-Control-Allow-Origin"), allowed.encode())] if allowed else []
        )
        if scope["method"] == "OPTIONS":  # a preflight: browsers send no credentials, so no auth
            extra += [
                (CasedName(b"Access-Control-Allow-Credentials"), b"true"),
                (CasedName(b"Access-Control-Allow-Methods"), CORS_METHODS.encode()),
                (CasedName(b"Access-Control-Allow-Headers"), CORS_HEADERS.encode()),
            ]
            await _reply(send, 200, b"", "text/html", extra)
            return
        if (why := self.unavailable()) is not None:
            body = json.dumps({"error": {"message": why, "type": "unavailable_error", "code": 503}})
            await _reply(send, 503, body.encode(), "application/json; charset=utf-8", extra)
            return

        if not extra:  # nothing to add: no wrapper layer on each streamed chunk
            await self.app(scope, receive, send)
            return

        async def send_with_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, send_with_cors)


async def _reply(send: Send, status: int, body: bytes, content_type: str, extra: list[tuple[bytes, bytes]]) -> None:
    headers = [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode()), *extra]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
