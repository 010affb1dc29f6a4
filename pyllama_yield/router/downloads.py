"""Models into and out of the download cache while the router serves, with llama-server's
contract: ``POST /models {"model": "user/repo[:quant]"}`` checks the name with the Hub, answers at
once and downloads in the background (``download_progress`` events, then ``download_finished`` or
``download_failed``, and the router lists the model); ``DELETE /models?model=`` stops the model's
process or cancels its download, then removes its files (``model_remove``).

A download takes no model slot: it runs in a worker thread of this process (huggingface_hub, so
the cache and the token are the ones ``-hf`` uses), never in a model's process. An explicit
download is the user asking for the network: ``--offline`` governs where models are *found*, as
with llama-server, whose router downloads on ``POST /models`` whatever its ``--offline``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from .. import hub
from ..server.errors import ErrorKind
from .registry import ModelRouter, RouterError

__all__ = ["Download", "Downloads"]

log = logging.getLogger("pyllama_yield.router")

# at most one progress event per file this often (llama-server's 100 ms)
_PROGRESS_EVERY_S = 0.1


@dataclass
class Download:
    name: str
    plan: hub.Plan
    cancel: threading.Event = field(default_factory=threading.Event)
    progress: dict[str, dict[str, int]] = field(default_factory=dict)  # file URL -> done, total
    task: asyncio.Task[None] | None = None


class Downloads:
    def __init__(self, router: ModelRouter, token: str | None) -> None:
        self.router = router
        self.token = token
        self.active: dict[str, Download] = {}

    async def start(self, name: Any) -> None:
        """``POST /models``: the name checked with the Hub (the reason it cannot be had is the
        answer), then the download started in the background."""
        if not isinstance(name, str) or not name:
            raise RouterError("model must be a non-empty string")
        if name in self.active or self.router.find(name) is not None:
            raise RouterError(f"model '{name}' already exists")
        try:
            plan = await asyncio.to_thread(hub.plan, name, token=self.token)
        except hub.HubUnreachable as exc:  # the model may exist: the Hub is what failed
            raise RouterError(f"unable to download: {exc}", ErrorKind.UNAVAILABLE) from None
        except hub.HubError as exc:
            raise RouterError(f"model validation failed, unable to download: {exc}") from None
        if name in self.active:  # the same name asked twice while the Hub answered
            raise RouterError(f"model '{name}' already exists")
        download = self.active[name] = Download(name, plan)
        self.router.events.publish("status_change", name, {"status": "downloading"})
        download.task = asyncio.get_running_loop().create_task(self._run(download))

    async def _run(self, download: Download) -> None:
        loop = asyncio.get_running_loop()
        last_sent: dict[str, float] = {}

        def progress(url: str, done: int, total: int) -> None:  # a worker thread, every chunk
            now = time.monotonic()
            if done < total and now - last_sent.get(url, 0.0) < _PROGRESS_EVERY_S:
                return
            last_sent[url] = now
            loop.call_soon_threadsafe(self._progress, download, url, done, total)

        ok = False
        try:
            await asyncio.to_thread(
                hub.download, download.plan, token=self.token, progress=progress, cancelled=download.cancel.is_set
            )
            ok = True
        except hub.HubError as exc:
            log.warning("download of %s failed: %s", download.name, exc)
        finally:
            del self.active[download.name]
            self.router.reload()  # the cache's new model is listed before anyone hears of it
            self.router.events.publish("download_finished" if ok else "download_failed", download.name)

    def _progress(self, download: Download, url: str, done: int, total: int) -> None:
        download.progress[url] = {"done": done, "total": total}
        self.router.events.publish("download_progress", download.name, {"progress": dict(download.progress)})

    async def remove(self, name: Any) -> None:
        """``DELETE /models?model=`` (and Ollama's ``/api/delete``): a cache model's process stopped,
        or its download cancelled, then its files out of the cache."""
        if not isinstance(name, str) or not name:
            raise RouterError("model must be a non-empty string")
        download = self.active.get(name)
        if download is not None:
            download.cancel.set()
            if download.task is not None:
                await asyncio.shield(download.task)
            spec = name
        else:
            inst = self.router.find(name)
            if inst is None:
                raise RouterError(f"model name={name} is not found", ErrorKind.SERVER)
            if inst.entry.source != "cache":
                raise RouterError(f"model name={inst.entry.id} is not removable (not from cache)", ErrorKind.SERVER)
            if inst.running:
                await self.router.unload(inst)
            spec = inst.entry.id
        removed = await asyncio.to_thread(hub.remove_cached, spec)
        log.info("removed %s from the download cache%s", spec, "" if removed else " (no files were cached)")
        self.router.reload()
        self.router.events.publish("model_remove", spec)

    async def cancel_all(self) -> None:
        """At shutdown: every download stopped (its partial file stays, to be resumed)."""
        tasks = [d.task for d in self.active.values() if d.task is not None]
        for download in self.active.values():
            download.cancel.set()
        await asyncio.gather(*tasks, return_exceptions=True)
