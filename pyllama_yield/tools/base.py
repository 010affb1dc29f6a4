"""What every server-side tool is: a name, an OpenAI function definition, and ``invoke``.

llama-server's ``/tools`` route lists these (``GET``) and calls one (``POST``); its web page runs an
agent with them on the user's machine. Built-in tools (files, search, shell) and the tools of MCP
servers share this shape, so the route never knows which kind it calls.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

__all__ = ["Push", "Tool", "ToolArgumentError", "ToolError"]

# a streamed tool's sink for output chunks: False when nobody reads any more (the tool stops early)
Push = Callable[[str], bool]


class ToolError(RuntimeError):
    """A request the tool layer refuses outright (an unknown runtime, an option-like container id):
    the route answers 500 with this message, as llama-server does. A tool's own failure is not one:
    it is an ``{"error": ...}`` answer with status 200."""


class ToolArgumentError(ToolError):
    """A required argument is missing or of the wrong JSON type: llama-server's JSON layer throws
    for these and its route answers 400 ``invalid_request_error``, with nlohmann's message."""


class Tool(ABC):
    name: str
    display_name: str
    permission_write: bool = False
    support_stream: bool = False  # invoke() can push its output as it comes
    uses_cwd: bool = False  # resolves paths and runs against the caller's working directory
    kind: str = "server"  # llama-server's "type": "server" (built in) or "mcp"

    @abstractmethod
    def definition(self) -> dict[str, Any]:
        """The OpenAI function-calling definition: ``{"type": "function", "function": {...}}``."""

    @abstractmethod
    def invoke(self, params: dict[str, Any], push: Push | None = None) -> dict[str, Any] | None:
        """Run the tool (blocking; called on a worker thread). ``params`` holds the model's
        arguments plus ``cwd``/``runtime``/``resp_type`` taken from the request's headers. With
        ``push``, output is streamed through it and the return value is ignored."""

    def to_json(self) -> dict[str, Any]:
        """The ``GET /tools`` entry, in llama-server's shape."""
        return {
            "display_name": self.display_name,
            "tool": self.name,
            "type": self.kind,
            "permissions": {"write": self.permission_write},
            "uses_cwd": self.uses_cwd,
            "definition": self.definition(),
        }
