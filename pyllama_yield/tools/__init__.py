"""llama-server's server-side tools: built-in file, search and shell tools, and MCP servers' tools.

They run on this machine (or in the runtime ``--tools-runtime`` names) for the web page's agent, so
they are off unless ``--tools`` or MCP servers are configured. This package knows nothing of HTTP.
"""

from .base import Push, Tool, ToolArgumentError, ToolError
from .mcp import McpServerConfig, McpServers, McpTool, load_mcp_configs
from .registry import ServerTools, UnknownToolError

__all__ = [
    "McpServerConfig",
    "McpServers",
    "McpTool",
    "Push",
    "ServerTools",
    "Tool",
    "ToolArgumentError",
    "ToolError",
    "UnknownToolError",
    "load_mcp_configs",
]
