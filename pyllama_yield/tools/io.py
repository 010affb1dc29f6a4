"""Where the built-in tools do their IO: the host, or an isolate (a running container, an ssh host).

A tool call's ``runtime`` (from the ``x-tool-runtime`` header or ``--tools-runtime``) picks one:
empty is the host, ``docker-container:<id>``/``podman-container:<id>`` is ``<engine> exec`` into an
existing container, ``ssh:<target>`` is a remote shell. Isolates see the same operations as the
host, each done by a POSIX command (sh, cat, wc, mkdir, dirname, find, timeout) on the far side.
"""

from __future__ import annotations

import functools
import os
import re
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from .base import ToolError
from .listing import (
    GIT_LS_FILES_MAX_OUTPUT,
    JUNK_DIR_NAMES,
    LIST_ENTRIES_TIMEOUT,
    ListEntry,
    ListKind,
    ListResult,
    entry_depth,
    split_lines,
    walk_entries,
)
from .params import value_str
from .process import ChunkSink, ExecResult, run_subprocess

__all__ = [
    "ChunkSink",
    "ContainerIO",
    "ContainerSpec",
    "ExecResult",
    "HostIO",
    "IsolateIO",
    "SshIO",
    "ToolsIO",
    "make_tools_io",
    "run_subprocess",
]

ISOLATE_EXEC_TIMEOUT = 15  # seconds, for the helper commands (stat, cat, find...) in an isolate
ISOLATE_READ_FILE_MAX_SIZE = 64 * 1024 * 1024


@functools.cache
def home_dir() -> str:
    # read once, at first use: the environment may change under a running server
    return os.environ.get("HOME", "")


def expand_home(path: str) -> str:
    """``~`` and ``~/...`` become the home directory; ``~user`` is left alone, as upstream."""
    if not path.startswith("~"):
        return path
    if len(path) > 1 and path[1] not in "/\\":
        return path
    home = home_dir()
    return home + path[1:] if home else path


def lexically_normal(path: str) -> str:
    """``std::filesystem::path::lexically_normal`` without a trailing separator: drops ``.``, folds
    ``..`` and repeated separators, never touching the disk (symlinks are not resolved)."""
    out = os.path.normpath(path)
    # POSIX normpath keeps exactly two leading slashes, lexically_normal folds them to one
    if out.startswith("//") and not out.startswith("///"):
        out = out[1:]
    return out


class ToolsIO(ABC):
    """The operations the tools need, each answering ``None``/``False`` on failure."""

    def __init__(self, cwd: str = "") -> None:
        self.cwd = cwd  # resolves relative paths, and is the working directory of run()

    @abstractmethod
    def resolve(self, path: str) -> str: ...
    @abstractmethod
    def is_directory(self, path: str) -> bool: ...
    @abstractmethod
    def is_regular_file(self, path: str) -> bool: ...
    @abstractmethod
    def file_size(self, path: str) -> int | None: ...
    @abstractmethod
    def read_file(self, path: str) -> bytes | None: ...
    @abstractmethod
    def write_file(self, path: str, content: bytes) -> bool: ...

    @abstractmethod
    def list_entries(self, base: str, max_depth: int, kind: ListKind) -> ListResult:
        """Entries under ``base`` (already resolved); ``max_depth`` 0 is unlimited, 1 children only."""

    @abstractmethod
    def run(self, args: list[str], max_output: int, timeout_secs: int, on_chunk: ChunkSink | None = None) -> ExecResult:
        """Run ``args`` with stdout and stderr merged; ``on_chunk`` sees output as it comes and
        stops the process by returning False."""


class HostIO(ToolsIO):
    """The server's own machine."""

    def resolve(self, path: str) -> str:
        p = expand_home(path)
        if not os.path.isabs(p):
            if self.cwd:
                p = os.path.join(self.cwd, p)
            else:
                try:
                    p = os.path.join(os.getcwd(), p)
                except OSError:
                    return p
        # "." and ".." never reach git or the client
        return lexically_normal(p)

    def is_directory(self, path: str) -> bool:
        return os.path.isdir(self.resolve(path))

    def is_regular_file(self, path: str) -> bool:
        return os.path.isfile(self.resolve(path))

    def file_size(self, path: str) -> int | None:
        # like std::filesystem::file_size: only a regular file (or a link to one) has a size
        full = self.resolve(path)
        try:
            return os.path.getsize(full) if os.path.isfile(full) else None
        except OSError:
            return None

    def read_file(self, path: str) -> bytes | None:
        try:
            with open(self.resolve(path), "rb") as f:
                return f.read()
        except OSError:
            return None

    def write_file(self, path: str, content: bytes) -> bool:
        full = self.resolve(path)
        try:
            parent = os.path.dirname(full)
            if parent:
                os.makedirs(parent, exist_ok=True)
            with open(full, "wb") as f:
                f.write(content)
        except OSError:
            return False
        return True

    def list_entries(self, base: str, max_depth: int, kind: ListKind) -> ListResult:
        if not os.path.isdir(base):
            return ListResult(err="path does not exist or is not a directory")
        deadline = time.monotonic() + LIST_ENTRIES_TIMEOUT
        # git honours .gitignore, but cannot list directories: those always take the walker
        if kind is ListKind.FILES:
            res = self.run(
                ["git", "-C", base, "ls-files", "--cached", "--others", "--exclude-standard"],
                GIT_LS_FILES_MAX_OUTPUT,
                LIST_ENTRIES_TIMEOUT,
            )
            if res.exit_code == 0 and not res.timed_out:
                out = ListResult()
                for rel in split_lines(res.text(), strip_dot_slash=False):
                    if max_depth > 0 and entry_depth(rel) > max_depth:
                        continue
                    if os.path.isfile(os.path.join(base, rel)):
                        out.entries.append(ListEntry(rel, False))
                return out
        return walk_entries(base, max_depth, kind, deadline)

    def run(self, args: list[str], max_output: int, timeout_secs: int, on_chunk: ChunkSink | None = None) -> ExecResult:
        return run_subprocess(args, max_output, timeout_secs, on_chunk, combine_stderr=True, cwd=self.cwd)


def shell_quote_join(argv: list[str]) -> str:
    """One string that a POSIX shell splits back into exactly ``argv`` (every word single-quoted)."""
    return " ".join("'" + arg.replace("'", "'\\''") + "'" for arg in argv)


class IsolateIO(ToolsIO):
    """Every operation is a command run in the isolate, which is created and torn down elsewhere.
    Isolate paths are POSIX whatever the host is."""

    @abstractmethod
    def build_argv(self, inner: list[str], needs_stdin: bool) -> list[str]:
        """The host-side argv that runs ``inner`` (a complete POSIX argv) in the isolate."""

    def resolve(self, path: str) -> str:
        if not self.cwd or path.startswith("/"):
            return path
        return self.cwd + "/" + path

    def _exec(self, inner: list[str], max_output: int, combine_stderr: bool = True) -> ExecResult:
        return run_subprocess(self.build_argv(inner, False), max_output, ISOLATE_EXEC_TIMEOUT, None, combine_stderr)

    def _ok(self, inner: list[str]) -> bool:
        res = self._exec(inner, 4096)
        return res.exit_code == 0 and not res.timed_out

    def is_directory(self, path: str) -> bool:
        return self._ok(["sh", "-c", '[ -d "$1" ]', "_", self.resolve(path)])

    def is_regular_file(self, path: str) -> bool:
        return self._ok(["sh", "-c", '[ -f "$1" ]', "_", self.resolve(path)])

    def file_size(self, path: str) -> int | None:
        res = self._exec(["sh", "-c", 'wc -c < "$1"', "_", self.resolve(path)], 64)
        if res.exit_code != 0 or res.timed_out:
            return None
        m = re.match(r"\s*(\d+)", res.text())  # std::stoull: leading blanks, then digits
        return int(m.group(1)) if m else None

    def read_file(self, path: str) -> bytes | None:
        # stderr must not be spliced into the file's bytes
        res = self._exec(["cat", "--", self.resolve(path)], ISOLATE_READ_FILE_MAX_SIZE, combine_stderr=False)
        return res.output if res.exit_code == 0 and not res.timed_out else None

    def write_file(self, path: str, content: bytes) -> bool:
        # the content goes on stdin: no argv for the far side to re-parse, no temp file on the host
        inner = ["sh", "-c", 'mkdir -p "$(dirname "$1")" && cat > "$1"', "_", self.resolve(path)]
        res = run_subprocess(self.build_argv(inner, True), 4096, ISOLATE_EXEC_TIMEOUT, None, True, "", content)
        return res.exit_code == 0 and not res.timed_out

    def list_entries(self, base: str, max_depth: int, kind: ListKind) -> ListResult:
        abs_base = self.resolve(base)
        if not self.is_directory(base):
            return ListResult(err="path does not exist or is not a directory")
        if kind is ListKind.FILES:
            cmd = 'cd "$1" && git ls-files --cached --others --exclude-standard'
            res = self._exec(["sh", "-c", cmd, "_", abs_base], GIT_LS_FILES_MAX_OUTPUT)
            if res.exit_code == 0 and not res.timed_out:
                rels = split_lines(res.text(), strip_dot_slash=False)
                entries = [ListEntry(r, False) for r in rels if max_depth <= 0 or entry_depth(r) <= max_depth]
                return ListResult(entries=entries)
        out = ListResult()
        if kind is not ListKind.FILES:
            out.entries += [ListEntry(r, True) for r in self._find(abs_base, max_depth, True, out)]
        if kind is not ListKind.DIRS:
            out.entries += [ListEntry(r, False) for r in self._find(abs_base, max_depth, False, out)]
        return out

    def _find(self, abs_base: str, max_depth: int, dirs: bool, out: ListResult) -> list[str]:
        # one `find` pass; junk directories are printed (dirs pass) but pruned, and only
        # -mindepth/-maxdepth are used so a busybox image works as well as a GNU one
        prune = " -o ".join("-name " + n for n in JUNK_DIR_NAMES)
        cmd = 'cd "$1" && find . -mindepth 1'
        if max_depth > 0:
            cmd += f" -maxdepth {max_depth}"
        cmd += f" \\( {prune} \\) -prune"
        cmd += " -print -o -type d -print" if dirs else " -o -type f -print"
        res = self._exec(["sh", "-c", cmd, "_", abs_base], GIT_LS_FILES_MAX_OUTPUT)
        out.truncated = out.truncated or res.timed_out
        return split_lines(res.text(), strip_dot_slash=True)

    def run(self, args: list[str], max_output: int, timeout_secs: int, on_chunk: ChunkSink | None = None) -> ExecResult:
        # killing the host-side client does not kill what runs in the isolate, so the isolate's own
        # `timeout` bounds it; the host deadline is 5 s later to let that one exit cleanly
        inner = ["timeout", f"{timeout_secs}s", *args]
        argv = self.build_argv(self._with_cwd(inner), True)
        return run_subprocess(argv, max_output, timeout_secs + 5, on_chunk, combine_stderr=True)

    def _with_cwd(self, inner: list[str]) -> list[str]:
        # not every transport has a `-w`, so the command changes directory itself (127: could not run)
        if not self.cwd:
            return inner
        return ["sh", "-c", 'cd "$1" || exit 127; shift; exec "$@"', "_", self.cwd, *inner]


class ContainerIO(IsolateIO):
    """An already running container, through ``<engine> exec`` (docker and podman agree on it)."""

    def __init__(self, engine: str, container_id: str, cwd: str = "") -> None:
        super().__init__(cwd)
        self.engine = engine
        self.container_id = container_id

    def build_argv(self, inner: list[str], needs_stdin: bool) -> list[str]:
        return [self.engine, "exec", *(["-i"] if needs_stdin else []), self.container_id, *inner]


_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")


class SshIO(IsolateIO):
    """A remote host over ssh. This is remoting, not isolation: the tools can do whatever the
    target account can."""

    # no console to answer a prompt, so key-based auth only, with a host key trusted beforehand
    SSH_ARGV = (
        "ssh",
        "-o", "BatchMode=yes",
        "-o", "PasswordAuthentication=no",
        "-o", "KbdInteractiveAuthentication=no",
        "-o", "StrictHostKeyChecking=yes",
    )  # fmt: skip

    def __init__(self, target: str, cwd: str = "") -> None:
        super().__init__(cwd)
        self.target = target

    @staticmethod
    def is_valid_target(target: str) -> bool:
        # the target can come from a client header and ssh reads options from its argv:
        # "-oProxyCommand=..." would run anything on the host
        return bool(target) and target[0] != "-" and all(c in _ALNUM or c in ".-_@" for c in target)

    def build_argv(self, inner: list[str], needs_stdin: bool) -> list[str]:
        # the remote shell re-parses its command line, so `inner` goes as one quoted word
        return [*self.SSH_ARGV, *([] if needs_stdin else ["-n"]), self.target, shell_quote_join(inner)]


@dataclass
class ContainerSpec:
    """``<engine>:<image>`` (spawn and own a container) or ``<engine>-container:<id>`` (attach)."""

    engine: str
    arg: str  # the image when spawning, the container id when attaching
    attach: bool = False

    @staticmethod
    def parse(spec: str) -> ContainerSpec | None:
        for engine in ("docker", "podman"):
            if spec.startswith(engine + "-container:"):
                return ContainerSpec(engine, spec[len(engine) + len("-container:") :], True)
            if spec.startswith(engine + ":"):
                return ContainerSpec(engine, spec[len(engine) + 1 :], False)
        return None

    @staticmethod
    def is_valid_id(container_id: str) -> bool:
        # lands on the `<engine> exec` command line: "--privileged" would be an engine option
        if not container_id or container_id[0] not in _ALNUM:
            return False
        return all(c in _ALNUM or c in ".-_" for c in container_id)


def make_tools_io(params: dict[str, Any]) -> ToolsIO:
    """The IO a call's ``params`` ask for (``cwd``, ``runtime``). A bad runtime raises ToolError:
    an isolate was asked for, so falling back to the host would be wrong."""
    cwd = value_str(params, "cwd", "")
    runtime = value_str(params, "runtime", "")
    if not runtime:
        return HostIO(cwd)
    container = ContainerSpec.parse(runtime)
    if container is not None:
        # spawning belongs to the --tools-runtime that owns the container; a call only attaches
        if not container.attach:
            raise ToolError("tool runtime must name a running container: " + runtime)
        if not ContainerSpec.is_valid_id(container.arg):
            raise ToolError("invalid container id: " + container.arg)
        return ContainerIO(container.engine, container.arg, cwd)
    if runtime.startswith("ssh:"):
        target = runtime[len("ssh:") :]
        if not SshIO.is_valid_target(target):
            raise ToolError("invalid ssh target: " + target)
        return SshIO(target, cwd)
    raise ToolError("unknown tool runtime: " + runtime)
