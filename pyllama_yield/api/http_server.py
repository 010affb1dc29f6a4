"""The HTTP server process around an app: uvicorn as ``serve`` runs it, on one or several
``--host`` addresses."""

from __future__ import annotations

import socket
from collections.abc import Callable
from types import FrameType

import uvicorn
from starlette.applications import Starlette

from ..settings import ServerSettings

__all__ = ["listen_sockets", "uvicorn_server"]


def listen_sockets(hosts: list[str], port: int) -> list[socket.socket] | None:
    """Sockets for several ``--host`` addresses (comma-separated, as llama-server takes them);
    None for one, which uvicorn binds itself."""
    if len(hosts) <= 1:
        return None
    socks = []
    for host in hosts:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind((host, port))
        socks.append(sock)
    return socks


def uvicorn_server(
    app: Starlette, settings: ServerSettings, port: int, on_exit: Callable[[], object] | None = None
) -> uvicorn.Server:
    """``on_exit``: called as soon as a stop is asked for (before open connections are drained)."""

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            if on_exit is not None:
                on_exit()
            super().handle_exit(sig, frame)

    log_level = "critical" if settings.log_disable else "info" if settings.verbose else settings.log_level
    return Server(
        uvicorn.Config(
            app,
            host=settings.host,
            port=port,
            log_level=log_level,
            timeout_graceful_shutdown=5,
            # h11, even where httptools is installed: httptools lower-cases header names, and
            # llama-server's clients see its case (Access-Control-Allow-Origin, ...)
            http="h11",
            # asyncio, even where uvloop is installed (uvicorn's default would take it): uvloop
            # measured no faster here (benchmarks/ab/loop-asyncio-uvloop.json), and the server
            # then runs the same wherever it is installed
            loop="asyncio",
        )
    )
