"""The HTTP server process around an app: uvicorn as ``serve`` runs it, on one or several
``--host`` addresses."""

from __future__ import annotations

import socket
from collections.abc import Callable
from types import FrameType

import uvicorn
from starlette.applications import Starlette

from ..settings import ServerSettings

__all__ = ["CasedName", "listen_sockets", "uvicorn_server"]


class CasedName(bytes):
    """A response header name that keeps its case on the wire. uvicorn's httptools protocol
    lower-cases each name as it writes it; llama-server's clients, its own test suite among
    them, read a few names in llama-server's case (``Access-Control-Allow-Origin``,
    ``Process-Start-Time-Unix``). Only for names uvicorn does not itself look at
    (``content-length``, ``transfer-encoding``, ``connection``)."""

    def lower(self) -> bytes:
        return self


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
            # httptools: its parser is C where h11's is Python, ~0.1 ms less per request on the
            # way to the first token (a model at GPU speed); names that clients read in
            # llama-server's case are CasedName
            http="httptools",
            # asyncio, even where uvloop is installed (uvicorn's default would take it): uvloop
            # measured no faster here (benchmarks/ab/loop-asyncio-uvloop.json), and the server
            # then runs the same wherever it is installed
            loop="asyncio",
        )
    )
