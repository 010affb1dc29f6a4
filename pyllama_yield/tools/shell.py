"""The shell tools: ``exec_shell_command`` (streamable) and ``get_info`` (OS and working directory)."""

from __future__ import annotations

import os
from typing import Any

from .base import Push, Tool
from .io import make_tools_io
from .params import function_definition, prop, required, value_int, value_str

__all__ = ["ExecShellCommandTool", "GetInfoTool"]

EXEC_MAX_OUTPUT_SIZE = 16 * 1024
EXEC_MAX_TIMEOUT = 60  # seconds
EXEC_DEFAULT_TIMEOUT = 10
GET_INFO_MAX_OUTPUT = 4096
GET_INFO_TIMEOUT = 5


def _exit_tail(exit_code: int, timed_out: bool) -> str:
    return f"\n[exit code: {exit_code}]" + (" [exit due to timed out]" if timed_out else "")


class ExecShellCommandTool(Tool):
    name = "exec_shell_command"
    display_name = "Execute shell command"
    uses_cwd = True
    permission_write = True
    support_stream = True

    def definition(self) -> dict[str, Any]:
        return function_definition(
            self.name,
            "Execute a shell command and return its output (stdout and stderr combined).",
            {
                "command": prop("string", "Shell command to execute"),
                "timeout": prop("integer", f"Timeout in seconds (default 10, max {EXEC_MAX_TIMEOUT})"),
                "max_output_size": prop("integer", f"Maximum output size in bytes (default {EXEC_MAX_OUTPUT_SIZE})"),
            },
            ["command"],
        )

    def invoke(self, params: dict[str, Any], push: Push | None = None) -> dict[str, Any] | None:
        command: str = required(params, "command")
        timeout = min(value_int(params, "timeout", EXEC_DEFAULT_TIMEOUT), EXEC_MAX_TIMEOUT)
        max_output = value_int(params, "max_output_size", EXEC_MAX_OUTPUT_SIZE)
        # upstream casts to size_t first, so a negative size is huge and ends up at the cap
        max_output = EXEC_MAX_OUTPUT_SIZE if max_output < 0 else min(max_output, EXEC_MAX_OUTPUT_SIZE)
        # the user's own command line is the one thing that goes through a shell (an isolate is POSIX too)
        args = ["sh", "-c", command]
        io = make_tools_io(params)

        if push is None:
            res = io.run(args, max_output, timeout)
            return {"plain_text_response": res.text() + _exit_tail(res.exit_code, res.timed_out)}

        listening = True

        def on_chunk(chunk: str) -> bool:
            nonlocal listening
            listening = push(chunk)
            return listening

        res = io.run(args, max_output, timeout, on_chunk)
        if listening:  # nobody to tell the exit code to otherwise
            push(_exit_tail(res.exit_code, res.timed_out))
        return None


class GetInfoTool(Tool):
    name = "get_info"
    display_name = "Get Runtime Info"
    uses_cwd = True

    def definition(self) -> dict[str, Any]:
        return function_definition(
            self.name, "Returns runtime info: the OS name/version and the current working directory", {}, None
        )

    def invoke(self, params: dict[str, Any], push: Push | None = None) -> dict[str, Any] | None:
        io = make_tools_io(params)
        res = io.run(["uname", "-a"], GET_INFO_MAX_OUTPUT, GET_INFO_TIMEOUT)
        # a failed spawn or a timeout leaves a diagnostic in the output, which is no OS name
        os_info = res.text().strip() if res.exit_code == 0 and not res.timed_out else "unknown"

        cwd = value_str(params, "cwd", "")
        if not cwd:
            if not value_str(params, "runtime", ""):
                try:
                    cwd = os.getcwd()
                except OSError:
                    cwd = ""  # std::filesystem::current_path's error leaves an empty path
            else:
                pwd = io.run(["pwd"], GET_INFO_MAX_OUTPUT, GET_INFO_TIMEOUT)
                cwd = pwd.text().strip() if pwd.exit_code == 0 and not pwd.timed_out else "unknown"
        return {"os": os_info, "cwd": cwd}
