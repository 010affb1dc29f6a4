"""Settings of the server-side tools for the web page's agent (experimental in llama-server too):
``--tools``, ``--tools-runtime``, MCP servers, the CORS proxy, ``--agent``."""

from __future__ import annotations

from pydantic_settings import BaseSettings

from .fields import arg

__all__ = ["AgentSettings"]


class AgentSettings(BaseSettings):
    """A part of ``ServerSettings``: its fields are flags of ``serve``."""

    tools: list[str] | None = arg(
        None,
        "--tools",
        env="LLAMA_ARG_TOOLS",
        help="built-in tools served at /tools, comma-separated or 'all' (read_file, file_glob_search, grep_search, "
        "exec_shell_command, write_file, edit_file, get_info); do not enable in untrusted environments",
    )
    tools_runtime: str | None = arg(
        None,
        "--tools-runtime",
        env="LLAMA_ARG_TOOLS_RUNTIME",
        help="run the tools in 'docker:<image>'/'podman:<image>' (a container of our own), "
        "'docker-container:<id>'/'podman-container:<id>' or 'ssh:<target>' instead of on this host",
    )
    mcp_servers_config: str | None = arg(
        None, "--mcp-servers-config", env="LLAMA_ARG_MCP_SERVERS_CONFIG", help="JSON file of MCP servers (mcpServers)"
    )
    mcp_servers_json: str | None = arg(
        None, "--mcp-servers-json", env="LLAMA_ARG_MCP_SERVERS_JSON", help="MCP servers as inline JSON (mcpServers)"
    )
    ui_mcp_proxy: bool = arg(
        False,
        "--ui-mcp-proxy",
        "--webui-mcp-proxy",
        neg=("--no-ui-mcp-proxy", "--no-webui-mcp-proxy"),
        env="LLAMA_ARG_UI_MCP_PROXY",
        help="serve /cors-proxy for the page's MCP clients; do not enable in untrusted environments",
    )
    agent: bool = arg(
        False,
        "-ag",
        "--agent",
        neg=("-no-ag", "--no-agent"),
        env="LLAMA_ARG_AGENT",
        help="--tools all and --ui-mcp-proxy together",
    )

    @property
    def server_tools(self) -> list[str]:
        """The built-in tools asked for (``--tools``, comma-separated and repeatable; ``--agent``: all)."""
        if self.agent:
            return ["all"]
        return [name.strip() for item in self.tools or [] for name in item.split(",") if name.strip()]

    @property
    def mcp_proxy(self) -> bool:
        return self.ui_mcp_proxy or self.agent

    @property
    def agentic(self) -> bool:
        """Whether anything here lets a page run commands or reach servers through this one."""
        return bool(self.server_tools or self.mcp_servers_config or self.mcp_servers_json)
