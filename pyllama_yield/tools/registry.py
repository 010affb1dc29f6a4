"""The tools one server offers: the built-ins asked for with ``--tools``, then the MCP servers' tools.

Also where a call's parameters get what only the request's headers may set: the working directory
(``X-Tool-Cwd``), the runtime the tool runs in (``X-Tool-Runtime``, else ``--tools-runtime``) and
``read_file``'s answer type (``X-Resp-Type``). A model never sets those: values it put in its
arguments are dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from .base import Tool
from .builtin import BUILTIN_TOOL_NAMES, build_builtin_tools
from .mcp import McpServers, McpTool
from .runtime import ToolsRuntime, make_tools_runtime

__all__ = ["ServerTools", "UnknownToolError"]

log = logging.getLogger("pyllama_yield.tools")

# parameter <- request header (case-insensitive)
HEADER_PARAMS = {"cwd": "x-tool-cwd", "runtime": "x-tool-runtime", "resp_type": "x-resp-type"}


class UnknownToolError(LookupError):
    """No such tool, or a stream asked of a tool that cannot stream (llama-server's 404)."""


class ServerTools:
    def __init__(self, tools: list[Tool], runtime: ToolsRuntime | None = None, mcp: McpServers | None = None) -> None:
        self.tools = tools
        self.runtime = runtime
        self.mcp = mcp

    @classmethod
    def build(cls, enabled: list[str], mcp: McpServers | None = None, runtime_spec: str | None = None) -> ServerTools:
        """The built-ins named in ``enabled`` ("all": every one), then ``mcp``'s tools (a name
        already taken is skipped). Raises ValueError for an unknown tool or runtime."""
        unknown = [name for name in enabled if name != "all" and name not in BUILTIN_TOOL_NAMES]
        if unknown:
            raise ValueError(f'unknown tool "{unknown[0]}". available tools: {", ".join(BUILTIN_TOOL_NAMES)}')
        wanted = set(enabled)
        tools: list[Tool] = [t for t in build_builtin_tools() if "all" in wanted or t.name in wanted]
        taken = {t.name for t in tools}
        for tool in [McpTool(spec, mcp) for spec in mcp.tools] if mcp is not None else []:
            if tool.name in taken:
                log.warning(
                    'MCP tool "%s" from server "%s" collides with an existing tool, skipping',
                    tool.name,
                    tool.spec.server,
                )
                continue
            taken.add(tool.name)
            tools.append(tool)
        runtime = make_tools_runtime(runtime_spec) if runtime_spec else None
        return cls(tools, runtime, mcp)

    def listing(self) -> list[dict[str, Any]]:
        """``GET /tools``."""
        return [t.to_json() for t in self.tools]

    def find(self, name: str, stream: bool = False) -> Tool:
        for tool in self.tools:
            if tool.name == name:
                if stream and not tool.support_stream:
                    raise UnknownToolError(f'tool "{name}" does not support stream = true')
                return tool
        raise UnknownToolError(f'unknown tool "{name}"')

    def call_params(self, params: Mapping[str, Any], headers: Mapping[str, str]) -> dict[str, Any]:
        """The model's arguments with the header-only parameters replaced by the headers' values."""
        out = {k: v for k, v in params.items() if k not in HEADER_PARAMS}
        for param, header in HEADER_PARAMS.items():
            if value := headers.get(header, ""):
                out[param] = value
        if "runtime" not in out and self.runtime is not None:
            out["runtime"] = self.runtime.spec()
        return out

    def shutdown(self) -> None:
        """Calls in flight return now (the HTTP server is stopping)."""
        if self.mcp is not None:
            self.mcp.shutdown()

    def close(self) -> None:
        """Stop the MCP servers and the runtime's container."""
        if self.mcp is not None:
            self.mcp.close()
        if self.runtime is not None:
            self.runtime.close()
