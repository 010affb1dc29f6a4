"""llama-server's built-in tools, in its order. Kept minimal on purpose, as upstream asks: file IO
and a shell only; anything higher level belongs to an MCP server or the web page."""

from __future__ import annotations

from .base import Tool
from .files import EditFileTool, ReadFileTool, WriteFileTool
from .search import FileGlobSearchTool, GrepSearchTool
from .shell import ExecShellCommandTool, GetInfoTool

__all__ = ["BUILTIN_TOOL_NAMES", "build_builtin_tools"]

_BUILTIN_CLASSES: tuple[type[Tool], ...] = (
    ReadFileTool,
    FileGlobSearchTool,
    GrepSearchTool,
    ExecShellCommandTool,
    WriteFileTool,
    EditFileTool,
    GetInfoTool,
)

BUILTIN_TOOL_NAMES: tuple[str, ...] = tuple(cls.name for cls in _BUILTIN_CLASSES)


def build_builtin_tools() -> list[Tool]:
    """Fresh instances of every built-in tool, in upstream order (``--tools`` picks among them)."""
    return [cls() for cls in _BUILTIN_CLASSES]
