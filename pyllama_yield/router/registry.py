"""The router's models and their processes: which one a name means, loading on demand, at most
``--models-max`` running (the least recently used idle one is evicted for a new one; a model with
requests in flight never is), requests waiting for a model served in arrival order.

Event-loop side only (asyncio primitives, no threads).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

import httpx

from ..server.errors import ErrorKind
from .events import ModelEvents
from .instances import Instance, LoadFailed
from .sources import ModelEntry

__all__ = ["ModelRouter", "RouterError"]


class RouterError(Exception):
    """A request the router refuses, in llama-server's words, with the engine's kind of error
    (the HTTP side picks the status: ``api/errors.py``)."""

    def __init__(self, message: str, kind: ErrorKind = ErrorKind.INVALID_REQUEST) -> None:
        super().__init__(message)
        self.kind = kind


class ModelRouter:
    def __init__(
        self,
        discover: Callable[[], dict[str, ModelEntry]],
        base_args: list[str],
        models_max: int,
        autoload: bool,
        debug_delay_s: float = 0.0,
    ) -> None:
        """``discover``: the models' sources, read now and again on ``reload``. ``debug_delay_s``:
        llama-server's ``LLAMA_SERVER_DEBUG_FAKE_TIMING`` (2 s), a wait before each load and
        before passing on each request, with the model counted busy, so that its tests can
        line requests up behind one another."""
        self._discover = discover
        self.base_args = base_args
        self.models_max = models_max
        self.autoload = autoload
        self.debug_delay_s = debug_delay_s
        self.instances: dict[str, Instance] = {}
        self.events = ModelEvents()
        self._aliases: dict[str, str] = {}
        self._admission = asyncio.Lock()  # asyncio's lock wakes its waiters in arrival order
        self._idle = asyncio.Event()  # a model's last request ended: it may be evicted now
        self._tasks: set[asyncio.Task[None]] = set()  # loads asked with POST /models/load
        self.reload()

    # --- the models ---------------------------------------------------------------------------
    def reload(self) -> None:
        """Read the sources again: new models are added, gone ones dropped (a running one keeps
        running until it is unloaded), the others get their new flags."""
        entries = self._discover()
        for name, entry in entries.items():
            inst = self.instances.get(name)
            if inst is None:
                inst = self.instances[name] = Instance(entry, self.base_args)
                inst.on_change = self._status_changed
            else:
                inst.entry = entry
                if not inst.running:
                    inst.exit_code = None  # llama-server: a reload clears a stopped model's failure
        for name in [n for n in self.instances if n not in entries and not self.instances[n].running]:
            del self.instances[name]
        self._aliases = {a: name for name, i in self.instances.items() for a in i.entry.aliases}
        self.events.publish("models_reload", "*")

    def _status_changed(self, inst: Instance) -> None:
        data: dict[str, Any] = {"status": inst.shown_status}
        if inst.shown_status == "unloaded":
            data["exit_code"] = inst.exit_code or 0
        self.events.publish("status_change", inst.entry.id, data)

    def find(self, name: str) -> Instance | None:
        """A model by id or alias (Ollama's ``name:latest`` too)."""
        for candidate in (name, name.removesuffix(":latest")):
            inst = self.instances.get(candidate) or self.instances.get(self._aliases.get(candidate, ""))
            if inst is not None:
                return inst
        return None

    def resolve(self, name: Any) -> Instance:
        """The model a request names (llama-server's words for a missing or unknown one)."""
        if not isinstance(name, str) or not name:
            raise RouterError("model name is missing from the request")
        inst = self.find(name)
        if inst is None:
            raise RouterError(f"model '{name}' not found", ErrorKind.UNKNOWN_MODEL)
        return inst

    def _running(self) -> list[Instance]:
        return [i for i in self.instances.values() if i.running]

    # --- loading ------------------------------------------------------------------------------
    async def ready(self, inst: Instance, autoload: bool | None = None) -> Instance:
        """``inst`` loaded, loading it first if it is not (and autoload allows it). Waiting for
        room is in arrival order; a caller cancelled while it waits leaves the line and nothing
        is evicted for it. A load, once started, goes on for whoever asks next."""
        if inst.serving:
            return inst
        if not (self.autoload if autoload is None else autoload) and not inst.running:
            raise RouterError("model is not loaded")
        if self.debug_delay_s:
            await asyncio.sleep(self.debug_delay_s)  # before taking the line, as llama-server's load
        async with self._admission:
            while inst.status == "stopping":  # an unload in progress: its process goes first
                await asyncio.sleep(0.02)
            if inst.loading is None and not inst.serving:
                await self._make_room(inst)
                inst.loading = asyncio.get_running_loop().create_task(self._start(inst))
            load = inst.loading
        if load is not None:
            await asyncio.shield(load)
        if not inst.serving:
            raise RouterError(f"model name={inst.entry.id} failed to load", ErrorKind.SERVER)
        return inst

    async def _start(self, inst: Instance) -> None:
        try:
            await inst.start()
        except LoadFailed:
            pass  # the model shows failed; its waiters get the error
        finally:
            inst.loading = None

    async def _make_room(self, wanted: Instance) -> None:
        """Evict least recently used idle models until ``wanted`` fits; wait for a busy one to
        finish when every running model has requests in flight."""
        if self.models_max <= 0:
            return
        while len([i for i in self._running() if i is not wanted]) >= self.models_max:
            others = [i for i in self._running() if i is not wanted and not i.pinned]
            if not others:  # every running model is pinned: no room will ever come
                raise RouterError("model limit reached, try again later", ErrorKind.SERVER)
            idle = [i for i in others if i.n_busy == 0 and i.serving]
            if idle:
                await min(idle, key=lambda i: i.last_used).stop()
                continue
            self._idle.clear()
            await self._idle.wait()

    def load_in_background(self, inst: Instance) -> None:
        """``POST /models/load``: answered at once; the model shows "loading", then "loaded"."""
        if inst.running or inst.queued:
            raise RouterError("model is already running")
        inst.queued, inst.exit_code = True, None
        task = asyncio.get_running_loop().create_task(self._load_quietly(inst))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _load_quietly(self, inst: Instance) -> None:
        try:
            with contextlib.suppress(RouterError):  # a failure shows in GET /models
                await self.ready(inst, autoload=True)
        finally:
            inst.queued = False

    async def unload(self, inst: Instance) -> None:
        if not inst.running:
            raise RouterError("model is not running")
        await inst.stop()
        self._idle.set()

    def begin(self, inst: Instance, wakes: bool = True) -> None:
        """A request in flight on ``inst`` (until :meth:`end`): it is not evicted meanwhile.
        ``wakes``: a request that wakes a sleeping model (a POST; reading ``/props`` does not)."""
        inst.n_busy += 1
        inst.last_used = time.monotonic()
        if wakes and inst.status == "sleeping":
            inst.status = "loaded"

    async def check_sleeping(self, client: httpx.AsyncClient) -> None:
        """Which idle models have gone to sleep (or woken): those whose process can sleep."""
        idle = [i for i in self._running() if i.serving and i.n_busy == 0 and i.can_sleep]
        await asyncio.gather(*(i.check_sleep(client) for i in idle))

    def end(self, inst: Instance) -> None:
        inst.n_busy -= 1
        if inst.n_busy == 0:
            inst.idle_since = time.monotonic()
            self._idle.set()

    async def unload_expired(self) -> None:
        """Unload the loaded models idle for longer than their ``keep-alive``."""
        now = time.monotonic()
        for inst in self._running():
            ttl = inst.keep_alive
            if ttl is not None and ttl >= 0 and inst.serving and inst.n_busy == 0:
                if inst.loading is None and now - inst.idle_since >= ttl:
                    await inst.stop()
                    self._idle.set()

    async def stop_all(self) -> None:
        await asyncio.gather(*(i.stop() for i in self._running()), return_exceptions=True)

    def kill_all(self) -> None:
        for inst in self.instances.values():
            inst.kill_now()
