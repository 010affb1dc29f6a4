"""``serve`` in router mode: no model of its own, the models of ``--models-dir``, ``--models-preset``
and the download cache, each in its own ``serve`` process started on demand."""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Any

from ..api.app_state import batch_data_dir
from ..api.http_server import listen_sockets, uvicorn_server
from ..cli import flags_for, server_tools
from ..settings import ROUTER_FIELDS, ServerSettings
from .app import build_router_app
from .registry import ModelRouter
from .sources import PresetError, collect

__all__ = ["is_router", "serve_router", "with_remote_preset"]

# the router's own flags, and those each model's process gets from the router instead (the
# server tools, MCP servers and the CORS proxy run in the router, as llama-server's)
_NOT_PASSED_ON = ROUTER_FIELDS - {"offline"} | {
    "model", "mmproj", "hf_repo", "hf_file", "alias", "tags", "host", "port", "api_key", "api_key_file", "data_dir",
    "tools", "agent", "tools_runtime", "mcp_servers_config", "mcp_servers_json", "ui_mcp_proxy",
}  # fmt: skip


def is_router(settings: ServerSettings) -> bool:
    """No model (``-m``, ``-hf``), and a router flag given (on the command line or in the environment)."""
    return settings.model is None and settings.hf_repo is None and bool(settings.model_fields_set & ROUTER_FIELDS)


def with_remote_preset(settings: ServerSettings) -> ServerSettings:
    """``-hf user/repo`` of a repo holding a ``preset.ini`` (llama.cpp's remote preset): router
    mode on that file. Other settings come back as they are. ``HubError`` when the repo cannot
    be read."""
    if settings.hf_repo is None or settings.model is not None or settings.hf_file is not None:
        return settings
    from ..hub import remote_preset

    preset = remote_preset(settings.hf_repo, token=settings.hf_token, offline=settings.offline)
    if preset is None:
        return settings
    print(
        f"NOTE: using preset.ini from HF repo '{settings.hf_repo}': only use presets you trust, "
        "a preset may run any model with any flag",
        file=sys.stderr,
    )
    return settings.model_copy(update={"hf_repo": None, "models_preset": str(preset)})


def serve_router(settings: ServerSettings, given: dict[str, Any], port: int) -> int:
    """Serve until SIGTERM / Ctrl-C; every model process is stopped before this returns.
    ``given``: the flags of the command line, passed on to every model (its preset's lose)."""
    base_args = flags_for({k: v for k, v in given.items() if k not in _NOT_PASSED_ON})
    # the Batch API is the router's: its models' servers keep theirs in a folder of their own, so
    # that none of them takes up (and answers with its own model) a batch the router runs
    base_args += ["--data-dir", str(batch_data_dir(settings) / "model-servers")]
    try:
        delay = 2.0 if os.environ.get("LLAMA_SERVER_DEBUG_FAKE_TIMING") else 0.0  # llama-server's test hook
        router = ModelRouter(lambda: collect(settings), base_args, settings.models_max, settings.models_autoload, delay)
    except (PresetError, ValueError) as exc:
        print(f"error: failed to initialize router models: {exc}", file=sys.stderr)
        return 1
    try:
        tools = server_tools(settings)  # MCP servers start (and warm up) before the router listens
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    names = ", ".join(router.instances) or "none yet"
    print(f"router mode on {settings.host}:{port}: models load on demand ({names})", file=sys.stderr)

    def on_exit() -> None:  # a stop was asked for: what holds connections open lets go at once
        router.events.close_soon()
        if tools is not None:
            tools.shutdown()

    server = uvicorn_server(build_router_app(router, settings, tools), settings, port, on_exit=on_exit)
    for sig in (signal.SIGINT, signal.SIGTERM):  # uvicorn re-raises them after its shutdown
        signal.signal(sig, lambda *_: None)
    try:
        server.run(sockets=listen_sockets(settings.hosts, port))
    finally:
        router.kill_all()  # any model the lifespan could not stop
        if tools is not None:
            tools.close()  # MCP server processes, the runtime's container
    left = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
    print(f"shut down: {'threads left: ' + ', '.join(left) if left else 'no thread left'}", file=sys.stderr)
    return 1 if left else 0
