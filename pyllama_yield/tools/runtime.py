"""``--tools-runtime``: where every tool call runs unless its request names a runtime itself.

``docker:<image>``/``podman:<image>`` spawns a container owned by the server (kept alive by the
engine client's open stdin, removed with ``--rm`` when that closes); any other spec names something
that already exists (``docker-container:<id>``, ``ssh:<target>``) and is only validated here.
"""

from __future__ import annotations

import logging
import os
import subprocess
import tempfile
import threading
import time
from abc import ABC, abstractmethod

from .base import ToolError
from .io import ContainerSpec, make_tools_io

__all__ = ["ContainerRuntime", "StaticRuntime", "ToolsRuntimeError", "ToolsRuntime", "make_tools_runtime"]

log = logging.getLogger("pyllama_yield.tools")

CIDFILE_POLLS = 100  # x 100 ms: how long a container may take to start
CLOSE_TIMEOUT = 30.0  # seconds for the engine client to exit once its stdin is closed


class ToolsRuntimeError(ToolError, ValueError):
    """A ``--tools-runtime`` the server cannot start with (a bad spec, an engine that fails).
    Both a ToolError (llama-server's runtime_error) and a ValueError (a bad option value)."""


class ToolsRuntime(ABC):
    @abstractmethod
    def spec(self) -> str:
        """The runtime spec to put in a tool call's ``runtime`` parameter."""

    def close(self) -> None:  # noqa: B027  (most runtimes own nothing, so overriding is optional)
        """Release what the runtime owns (nothing, unless it spawned a container)."""
        return None

    def __enter__(self) -> ToolsRuntime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class StaticRuntime(ToolsRuntime):
    """A target that already exists and needs no lifecycle: the spec is passed straight through."""

    def __init__(self, spec: str) -> None:
        self._spec = spec

    def spec(self) -> str:
        return self._spec


class ContainerRuntime(ToolsRuntime):
    """Owns the container the tools run in: ``<engine> run --rm -i --cidfile F <image> sh``. The
    shell blocks reading its stdin, which is kept open, so the container lives until ``close()``
    (or until something kills it, after which the next ``spec()`` starts a new one)."""

    def __init__(self, spec: str) -> None:
        parsed = ContainerSpec.parse(spec)
        if parsed is None or parsed.attach:
            raise ToolsRuntimeError("unknown --tools-runtime option: " + spec)
        self.engine = parsed.engine
        self.image = parsed.arg
        if not self.image:
            raise ToolsRuntimeError(f"--tools-runtime {self.engine}:<image> requires an image name")
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self.container_id = ""
        self._spawn()

    def spec(self) -> str:
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                log.warning('%s tools runtime container "%s" died, respawning', self.engine, self.container_id)
                self._spawn()
            return f"{self.engine}-container:{self.container_id}"

    def close(self) -> None:
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is None:
            return
        # EOF makes the container's shell (its pid 1) exit, and --rm then removes the container
        if proc.stdin is not None:
            try:
                proc.stdin.close()
            except OSError:
                pass
        try:
            proc.wait(CLOSE_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def _spawn(self) -> None:
        if self._proc is not None:
            self._proc.wait()  # reap the dead client before starting another
        # the engine refuses an existing cidfile, and it is how we learn the container's id
        cidfile = os.path.join(
            tempfile.gettempdir(), f"llama-tools-runtime-cid-{os.getpid()}-{threading.get_ident()}.tmp"
        )
        _remove(cidfile)
        args = [self.engine, "run", "--rm", "-i", "--cidfile", cidfile, self.image, "sh"]
        try:
            self._proc = subprocess.Popen(
                args, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
        except OSError as e:
            self._proc = None
            raise ToolsRuntimeError(
                f"failed to spawn {self.engine} container for tools runtime (image: {self.image})"
            ) from e
        cid = self._wait_for_cid(cidfile)
        _remove(cidfile)
        if not cid:
            self._proc.kill()
            self._proc.wait()
            self._proc = None
            raise ToolsRuntimeError(f"timed out waiting for {self.engine} container to start (image: {self.image})")
        self.container_id = cid

    def _wait_for_cid(self, cidfile: str) -> str:
        assert self._proc is not None
        for _ in range(CIDFILE_POLLS):
            try:
                with open(cidfile, encoding="utf-8", errors="replace") as f:
                    cid = f.readline().strip()
                if cid:
                    return cid
            except OSError:
                pass
            if self._proc.poll() is not None:
                return ""  # the client is gone (no such image...): no point waiting for the file
            time.sleep(0.1)
        return ""


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


def make_tools_runtime(spec: str) -> ToolsRuntime:
    """The runtime for ``--tools-runtime spec``: a spawned container for ``<engine>:<image>``, else
    the spec itself, checked now so a bad one stops the server at start-up. Raises
    ToolsRuntimeError (a ToolError and a ValueError)."""
    parsed = ContainerSpec.parse(spec)
    if parsed is not None and not parsed.attach:
        return ContainerRuntime(spec)
    try:
        make_tools_io({"runtime": spec})  # nothing to own: only reject a bad spec
    except ToolError as e:
        raise ToolsRuntimeError(str(e)) from e
    return StaticRuntime(spec)
