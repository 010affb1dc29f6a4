"""One model's own ``serve`` process, as llama-server's router runs one per model: on a free local
port, started on demand, ready once its ``/health`` answers 200, stopped with SIGTERM (SIGKILL
after the model's stop timeout). A model that crashes takes down only its own process; the router
sees the exit and the next request starts it again. The process gets SIGTERM when the router
dies (Linux's parent-death signal), so no model outlives its router.

Event-loop side only: the process is polled, never waited on by a thread.
"""

from __future__ import annotations

import asyncio
import ctypes
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable

import httpx

from .sources import ModelEntry

__all__ = ["Instance", "LoadFailed"]

_PR_SET_PDEATHSIG = 1


class LoadFailed(RuntimeError):
    """The model's process exited, or never became ready, while it loaded."""


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):  # not Linux: the router's shutdown stops its children
        pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Instance:
    """A model of the router and its process, if one runs. ``status``: "unloaded", "loading",
    "loaded", "sleeping" (its process runs, its model was freed by ``--sleep-idle-seconds``; a
    request wakes it) or "stopping" (a request for it then waits for the stop and loads it again);
    ``exit_code``: how its last process ended when it ended on its own."""

    def __init__(self, entry: ModelEntry, base_args: list[str]) -> None:
        self.entry = entry
        self.base_args = base_args  # the router's own flags: they win over the model's
        self.on_change: Callable[[Instance], None] | None = None  # hears every change of shown_status
        self._status = "unloaded"
        self.exit_code: int | None = None
        self.port = 0
        self.last_used = 0.0  # the last request's start (least recently used goes first)
        self.idle_since = 0.0  # the last request's end, or the load
        self.n_busy = 0  # requests in flight through the router
        self.queued = False  # POST /models/load asked for it; it waits for room (shown as "loading")
        self.loading: asyncio.Task[None] | None = None  # the start in progress, awaited by every waiter
        self.keep_alive_asked: float | None = None  # Ollama's keep_alive, from the last request that gave one
        self._proc: subprocess.Popen[bytes] | None = None
        self._stopping = False

    @property
    def status(self) -> str:
        return self._status

    @status.setter
    def status(self, value: str) -> None:
        before = self.shown_status
        self._status = value
        if self.on_change is not None and self.shown_status != before:
            self.on_change(self)

    @property
    def serving(self) -> bool:
        """Running and answering: loaded, or asleep (a request wakes it)."""
        return self.running and self._status in ("loaded", "sleeping")

    @property
    def can_sleep(self) -> bool:
        """Its process frees the model when idle (``--sleep-idle-seconds``, the router's or its own)."""
        args = [*self.entry.args(), *self.base_args]  # the router's last: its flag wins
        values = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--sleep-idle-seconds"]
        return bool(values) and values[-1].strip() != "-1"

    async def check_sleep(self, client: httpx.AsyncClient) -> None:
        """ "sleeping" or "loaded", as the process's ``/props`` says (llama-server's child tells its
        router; ours is asked)."""
        try:
            props = (await client.get(f"{self.url}/props", timeout=2)).json()
        except (httpx.HTTPError, ValueError):
            return  # busy or going: the next check sees it
        if self._status in ("loaded", "sleeping") and isinstance(props, dict):
            self.status = "sleeping" if props.get("is_sleeping") else "loaded"

    @property
    def shown_status(self) -> str:
        """The status llama-server would show: a model asked for and waiting for room is "loading",
        one being stopped is still "loaded" until its process is gone."""
        if self.queued and self._status == "unloaded":
            return "loading"
        return self._status.replace("stopping", "loaded")

    def command(self, port: int) -> list[str]:
        own = ["--host", "127.0.0.1", "--port", str(port), "--alias", self.entry.id]
        return [sys.executable, "-m", "pyllama_yield", "serve", *self.entry.args(), *self.base_args, *own]

    @property
    def keep_alive(self) -> float | None:
        """Seconds idle before unloading (None: no limit; < 0: pinned): a request's keep_alive,
        else the preset's."""
        return self.keep_alive_asked if self.keep_alive_asked is not None else self.entry.keep_alive_s

    @property
    def pinned(self) -> bool:
        return self.keep_alive is not None and self.keep_alive < 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        self.refresh()
        return self.status != "unloaded"

    def refresh(self) -> None:
        """Notice a process that ended on its own (crashed, killed, failed to load)."""
        proc = self._proc
        if proc is None or self._stopping:
            return
        code = proc.poll()
        if code is not None:
            self._proc = None
            self.exit_code = 128 - code if code < 0 else code  # a signal, as a shell reports it
            self.status = "unloaded"

    async def start(self, timeout_s: float = 600) -> None:
        """Start the process and wait until it serves; :class:`LoadFailed` when it exits first."""
        self.port = _free_port()
        self.status, self.exit_code, self.last_used = "loading", None, time.monotonic()
        self._proc = subprocess.Popen(
            self.command(self.port), stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent, close_fds=True
        )
        deadline = time.monotonic() + timeout_s
        async with httpx.AsyncClient(timeout=2) as client:
            while True:
                self.refresh()
                if self._proc is None:
                    raise LoadFailed(f"model name={self.entry.id} failed to load")
                try:
                    if (await client.get(f"{self.url}/health")).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass  # not listening yet
                if time.monotonic() > deadline:
                    await self.stop()
                    self.exit_code = 1
                    raise LoadFailed(f"model name={self.entry.id} failed to load")
                await asyncio.sleep(0.05)
        self.status = "loaded"
        self.idle_since = time.monotonic()

    async def stop(self) -> None:
        """SIGTERM, then SIGKILL after the model's stop timeout; the model is unloaded after."""
        proc, self._stopping = self._proc, True
        self.status = "stopping"
        try:
            if proc is not None and proc.poll() is None:
                proc.terminate()
                deadline = time.monotonic() + self.entry.stop_timeout_s
                while proc.poll() is None and time.monotonic() < deadline:
                    await asyncio.sleep(0.02)
                if proc.poll() is None:
                    proc.kill()
                    while proc.poll() is None:
                        await asyncio.sleep(0.02)
        finally:
            self._proc, self._stopping = None, False
            self.status = "unloaded"

    def kill_now(self) -> None:
        """At the router's exit: end the process without waiting for the event loop."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(self.entry.stop_timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._proc = None
        self.status = "unloaded"
