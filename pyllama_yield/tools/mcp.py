"""Tools of MCP servers (``--mcp-servers-config`` / ``--mcp-servers-json``), through the official ``mcp`` SDK.

The configuration is the Cursor-compatible ``{"mcpServers": {NAME: {...}}}`` that llama-server reads:
an entry with ``command`` (and ``args``, ``env``, ``cwd``) is a local server spoken to over stdio; an
entry with ``url`` (and ``headers``; ``"type": "sse"`` for the older transport) is a remote one over
HTTP, which llama-server does not offer. ``timeout_ms`` bounds each call (default 30 s).

As in llama-server: at start-up each server is started once, asked for its tools and stopped
(warm-up, at most 10 s each); a call then starts its server on demand and keeps it running, starts
it again if it died, and waits 5 s before retrying one that failed to start. A server that is
misconfigured, dead or slow turns into an ``{"error": ...}`` answer, never into a failure of ours.

The SDK is asynchronous; its sessions live on one event loop in a thread of their own, so the
blocking tool interface (and an in-process caller without an event loop) can use them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Coroutine
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from .base import Push, Tool

__all__ = ["McpServerConfig", "McpServers", "McpTool", "McpToolDef", "load_mcp_configs"]

log = logging.getLogger("pyllama_yield.tools.mcp")

WARMUP_TIMEOUT_S = 10.0  # tool discovery per server at start-up
COOLDOWN_S = 5.0  # after a server failed to start, calls are refused this long
CLOSE_TIMEOUT_S = 5.0
T = TypeVar("T")


@dataclass(frozen=True)
class McpServerConfig:
    name: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    transport: str = "stdio"  # "stdio", "http" (streamable HTTP) or "sse"
    timeout_ms: int = 30000


@dataclass(frozen=True)
class McpToolDef:
    server: str
    name: str  # the server's own name for it, without the "<server>_" prefix
    description: str
    input_schema: dict[str, Any] | None


def parse_mcp_config(text: str) -> list[McpServerConfig]:
    """The servers of one ``{"mcpServers": {...}}`` document; an entry with neither a command nor a
    URL is skipped with a warning. Raises ValueError for text that is not such JSON."""
    doc = json.loads(text)
    servers = doc.get("mcpServers") if isinstance(doc, dict) else None
    if not isinstance(servers, dict):
        return []
    out = []
    for name, cfg in servers.items():
        if not isinstance(cfg, dict):
            raise ValueError(f"MCP server {name!r}: expected an object")
        command, url = str(cfg.get("command") or ""), str(cfg.get("url") or "")
        if not command and not url:
            log.warning("MCP server '%s' has neither a command nor a url, skipping", name)
            continue
        kind = "stdio" if command else "sse" if cfg.get("type") == "sse" else "http"
        out.append(
            McpServerConfig(
                name=name,
                command=command,
                args=tuple(str(a) for a in cfg.get("args") or []),
                env={str(k): str(v) for k, v in (cfg.get("env") or {}).items()},
                cwd=cfg.get("cwd") or None,
                url=url,
                headers={str(k): str(v) for k, v in (cfg.get("headers") or {}).items()},
                transport=kind,
                timeout_ms=int(cfg.get("timeout_ms", 30000)),
            )
        )
    return out


def load_mcp_configs(config_path: str | None, inline_json: str | None) -> list[McpServerConfig]:
    """The servers of ``--mcp-servers-config`` then ``--mcp-servers-json`` (a name given twice: the
    first wins). Raises ValueError naming the cause: the server must not start on a bad config."""
    texts = []
    if config_path:
        try:
            texts.append(Path(config_path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise ValueError(f"failed to open MCP config file: {config_path} ({exc.strerror})") from None
    if inline_json:
        texts.append(inline_json)
    configs: dict[str, McpServerConfig] = {}
    for text in texts:
        try:
            parsed = parse_mcp_config(text)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"failed to parse MCP config JSON: {exc}") from None
        for cfg in parsed:
            if cfg.name in configs:
                log.warning("MCP config: duplicate server name '%s', skipping", cfg.name)
                continue
            configs[cfg.name] = cfg
    return list(configs.values())


def _result_to_answer(result: Any) -> dict[str, Any]:
    """A ``tools/call`` result in the ``/tools`` shape: its text parts joined, ``isError`` an error."""
    text = "\n".join(part.text for part in result.content if getattr(part, "type", "") == "text")
    if result.isError:
        return {"error": text or "MCP tool returned an error"}
    return {"plain_text_response": text}


class _Connection:
    """One running session with one MCP server, opened and closed by a task of its own (the SDK's
    transports must be left by the task that entered them)."""

    def __init__(self, config: McpServerConfig) -> None:
        self.config = config
        self.session: Any = None
        self._ready = asyncio.Event()
        self._closing = asyncio.Event()
        self._ended = asyncio.Event()  # the server went away (its stream ended) or we closed it
        self._error: BaseException | None = None
        self._owner: asyncio.Task[None] | None = None

    @property
    def alive(self) -> bool:
        return self.session is not None and not self._ended.is_set()

    async def open(self, timeout_s: float) -> None:
        """Start the server and initialize the session; raises what went wrong."""
        self._owner = asyncio.create_task(self._own(), name=f"mcp-{self.config.name}")
        try:
            await asyncio.wait_for(self._ready.wait(), timeout_s)
        except TimeoutError:
            await self.close()
            raise TimeoutError(f"no answer to initialize within {timeout_s:g} s") from None
        if self._error is not None:
            await self.close()
            raise self._error

    async def _own(self) -> None:
        from mcp import ClientSession

        try:
            async with AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._watched(self._transport()))
                self.session = await stack.enter_async_context(ClientSession(read, write))
                await self.session.initialize()
                self._ready.set()
                closing = asyncio.ensure_future(self._closing.wait())
                ended = asyncio.ensure_future(self._ended.wait())
                await asyncio.wait({closing, ended}, return_when=asyncio.FIRST_COMPLETED)
                closing.cancel()
                ended.cancel()
        except Exception as exc:  # a failed start or a broken transport: the caller reports it
            self._error = exc
            log.debug("MCP '%s': %r", self.config.name, exc)
        finally:
            self._ended.set()
            self._ready.set()

    def _transport(self) -> AbstractAsyncContextManager[Any]:
        cfg = self.config
        if cfg.transport == "stdio":
            from mcp import StdioServerParameters
            from mcp.client.stdio import stdio_client

            # the parent's whole environment, the config's on top (llama-server's rule; the SDK
            # alone would pass only a few variables)
            env = {**os.environ, **cfg.env}
            return stdio_client(StdioServerParameters(command=cfg.command, args=list(cfg.args), env=env, cwd=cfg.cwd))
        if cfg.transport == "sse":
            from mcp.client.sse import sse_client

            return sse_client(cfg.url, headers=cfg.headers or None)
        from mcp.client.streamable_http import streamablehttp_client

        return streamablehttp_client(cfg.url, headers=cfg.headers or None)

    @asynccontextmanager
    async def _watched(self, transport: AbstractAsyncContextManager[Any]) -> AsyncIterator[tuple[Any, Any]]:
        """The transport's streams, the read side relayed so that its end (the server exited or
        hung up) is noticed at once, not at the next call."""
        import anyio

        async with transport as streams:
            read, write = streams[0], streams[1]
            relay_send, relay_recv = anyio.create_memory_object_stream[Any](0)

            async def relay() -> None:
                async with relay_send:
                    async for message in read:
                        await relay_send.send(message)
                self._ended.set()

            async with anyio.create_task_group() as group:
                group.start_soon(relay)
                yield relay_recv, write
                group.cancel_scope.cancel()

    async def list_tools(self) -> list[McpToolDef]:
        result = await self.session.list_tools()
        return [
            McpToolDef(self.config.name, t.name, t.description or "", t.inputSchema if t.inputSchema else None)
            for t in result.tools
        ]

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        timeout_s = self.config.timeout_ms / 1000
        try:
            result = await asyncio.wait_for(self.session.call_tool(tool, arguments), timeout_s)
        except TimeoutError:
            return {"error": "request timed out"}
        except Exception as exc:  # the SDK's McpError (the server's JSON-RPC error) or a broken stream
            message = getattr(getattr(exc, "error", None), "message", None) or str(exc) or type(exc).__name__
            return {"error": message if self.alive else f"transport closed: {message}"}
        return _result_to_answer(result)

    async def close(self) -> None:
        self._closing.set()
        if self._owner is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._owner), CLOSE_TIMEOUT_S)
            except TimeoutError:
                self._owner.cancel()


class McpServers:
    """The configured MCP servers: their tools, and calls to them from any thread."""

    def __init__(self, configs: list[McpServerConfig]) -> None:
        self.configs = {c.name: c for c in configs}
        self.tools: list[McpToolDef] = []
        self._connections: dict[str, _Connection] = {}
        self._cooldown: dict[str, float] = {}  # server -> monotonic time before which it is not started
        self._calls: set[asyncio.Future[Any]] = set()
        self._stopping = False
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="pyllama-mcp", daemon=True)
        self._lock: asyncio.Lock | None = None  # created on the loop

    def __bool__(self) -> bool:
        return bool(self.configs)

    def _run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout_s)

    def start(self) -> McpServers:
        """Start the loop thread and discover every server's tools (warm-up)."""
        self._thread.start()
        self.tools = self._run(self._warm_up())
        return self

    async def _warm_up(self) -> list[McpToolDef]:
        self._lock = asyncio.Lock()
        found = await asyncio.gather(*(self._discover(cfg) for cfg in self.configs.values()))
        return [t for tools in found for t in tools]

    async def _discover(self, cfg: McpServerConfig) -> list[McpToolDef]:
        conn = _Connection(cfg)
        try:
            await conn.open(WARMUP_TIMEOUT_S)
            tools = await asyncio.wait_for(conn.list_tools(), WARMUP_TIMEOUT_S)
            log.info("MCP warmup: '%s' discovered %d tools", cfg.name, len(tools))
            return tools
        except Exception as exc:
            log.warning("MCP warmup: '%s' failed: %s", cfg.name, exc or type(exc).__name__)
            return []
        finally:
            await conn.close()

    def call_tool(self, server: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Call one tool (blocking); the answer is the ``/tools`` shape, errors included."""
        if self._stopping:
            return {"error": "cancelled"}
        try:
            return self._run(self._call(server, tool, arguments))
        except RuntimeError as exc:  # the loop was stopped under us (shutdown)
            return {"error": f"cancelled ({exc})"}

    async def _call(self, server: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        call = asyncio.ensure_future(self._call_on(server, tool, arguments))
        self._calls.add(call)
        try:
            return await call
        except asyncio.CancelledError:
            return {"error": "cancelled"}
        finally:
            self._calls.discard(call)

    async def _call_on(self, server: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        conn = await self._connection(server)
        if conn is None:
            return {"error": f"MCP server unavailable: {server}"}
        return await conn.call(tool, arguments)

    async def _connection(self, server: str) -> _Connection | None:
        """The server's running session: started on first use, and again after it died."""
        assert self._lock is not None
        async with self._lock:  # one start at a time, so concurrent first calls share one process
            if self._stopping or time.monotonic() < self._cooldown.get(server, 0.0):
                return None
            conn = self._connections.get(server)
            if conn is not None and conn.alive:
                return conn
            if conn is not None:
                log.warning("MCP '%s' is no longer running: starting it again", server)
                await conn.close()
            cfg = self.configs.get(server)
            if cfg is None:
                return None
            conn = _Connection(cfg)
            try:
                await conn.open(cfg.timeout_ms / 1000)
            except Exception as exc:
                log.warning("MCP '%s': failed to start: %s", server, exc or type(exc).__name__)
                self._cooldown[server] = time.monotonic() + COOLDOWN_S
                return None
            self._connections[server] = conn
            return conn

    def shutdown(self) -> None:
        """Make calls in flight return at once ("cancelled") and refuse new ones (non-blocking;
        call when the HTTP server starts to stop, so no request waits on a tool)."""
        self._stopping = True
        # the SDK gives a stdio server 2 s to exit after its stdin closes; one busy in a call would
        # hold our exit that long, so at shutdown it gets a moment and is then killed
        import mcp.client.stdio

        mcp.client.stdio.PROCESS_TERMINATION_TIMEOUT = 0.2
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(lambda: [c.cancel() for c in list(self._calls)])

    def close(self) -> None:
        """Stop every server process and the loop thread (blocking)."""
        self.shutdown()
        if not self._thread.is_alive():
            return
        try:
            self._run(self._close_all(), CLOSE_TIMEOUT_S + 1)
        except Exception as exc:  # noqa: BLE001 - teardown goes on regardless
            log.warning("MCP: closing servers: %s", exc)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(CLOSE_TIMEOUT_S)
        _join_child_waiters(CLOSE_TIMEOUT_S)

    async def _close_all(self) -> None:
        await asyncio.gather(*(c.close() for c in self._connections.values()), return_exceptions=True)
        self._connections.clear()


def _join_child_waiters(timeout_s: float) -> None:
    """Wait (bounded) for asyncio's per-child ``waitpid`` threads (its threaded child watcher,
    before Python 3.12): each ends once its server process, stopped above, has been reaped; a
    busy machine may not have run it yet when the servers are closed."""
    deadline = time.monotonic() + timeout_s
    for t in threading.enumerate():
        if t.name.startswith("asyncio-waitpid-"):
            t.join(max(0.0, deadline - time.monotonic()))


class McpTool(Tool):
    """One tool of an MCP server, served as ``<server>_<tool>``."""

    kind = "mcp"

    def __init__(self, spec: McpToolDef, servers: McpServers) -> None:
        self.spec = spec
        self.servers = servers
        self.name = self.display_name = f"{spec.server}_{spec.name}"

    def definition(self) -> dict[str, Any]:
        schema = self.spec.input_schema if isinstance(self.spec.input_schema, dict) else {}
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.spec.description, "parameters": schema},
        }

    def invoke(self, params: dict[str, Any], push: Push | None = None) -> dict[str, Any] | None:
        # cwd/runtime/resp_type come from our request headers, for the built-in tools' file access:
        # they are not the MCP tool's arguments
        arguments = {k: v for k, v in params.items() if k not in ("cwd", "runtime", "resp_type")}
        return self.servers.call_tool(self.spec.server, self.spec.name, arguments)
