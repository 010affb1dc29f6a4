"""The HTTP server process around an app: uvicorn as ``serve`` runs it, on one or several
``--host`` addresses."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable, Iterable
from types import FrameType
from typing import Any, cast

import uvicorn
from starlette.applications import Starlette
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from ..settings import ServerSettings

__all__ = ["CasedName", "HttpProtocol", "listen_sockets", "uvicorn_server"]


class CasedName(bytes):
    """A response header name that keeps its case on the wire. uvicorn's httptools protocol
    lower-cases each name as it writes it; llama-server's clients, its own test suite among
    them, read a few names in llama-server's case (``Access-Control-Allow-Origin``,
    ``Process-Start-Time-Unix``). Only for names uvicorn does not itself look at
    (``content-length``, ``transfer-encoding``, ``connection``)."""

    def lower(self) -> bytes:
        return self


class HeadWithBody:
    """A connection's transport that sends a response's head (its status line and headers, the
    first write of every response) together with the first part of its body, in one send.

    uvicorn writes the head as soon as the app starts the response; a streamed answer starts it
    with its first token, whose event is written a few tens of microseconds later. Two sends wake
    a local client twice, and the first wake lets the client (often on the event loop's CPU, as
    the model's threads hold the others) parse the headers while the event loop, preempted in
    that send, waits to write the token: ~0.2-0.4 ms on the way to a first token here. One send
    wakes it once, with the token. A head whose body does not come within the same turn of the
    event loop (a 100 Continue, a response of headers only) is sent at the end of that turn."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._head: bytes | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._head is not None:
            data, self._head = self._head + bytes(data), None
        elif bytes(data[:5]) == b"HTTP/":
            self._head = bytes(data)
            self._loop.call_soon(self._send_head)
            return
        self._transport.write(data)

    def writelines(self, chunks: Iterable[bytes | bytearray | memoryview]) -> None:
        self.write(b"".join(chunks))  # after a held head, never past it

    def write_eof(self) -> None:
        self._send_head()
        self._transport.write_eof()

    def _send_head(self) -> None:
        if self._head is not None:
            head, self._head = self._head, None
            if not self._transport.is_closing():
                self._transport.write(head)

    def close(self) -> None:
        self._send_head()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:  # the rest is the transport's
        return getattr(self._transport, name)


class HttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, whose responses leave in one send with their head."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(cast(asyncio.Transport, HeadWithBody(transport, self.loop)))


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
            # llama-server's case are CasedName; a response's head leaves with its body
            http=HttpProtocol,
            # asyncio, even where uvloop is installed (uvicorn's default would take it): uvloop
            # measured no faster here (benchmarks/ab/loop-asyncio-uvloop.json), and the server
            # then runs the same wherever it is installed
            loop="asyncio",
        )
    )
