"""Runs the open batches, on the server's event loop: one batch at a time, each line a request to
this server's own app (in-process, through ``httpx.ASGITransport``: the same routes, checks and
answers as over HTTP) at the last priority, so interactive requests waiting for a slot always go
first. Up to ``concurrency`` lines are in flight, enough to keep every slot busy when nothing else
wants it. Each answer is committed before the next line of that worker starts; a batch whose
lines are all answered is finalized into its output and error files.

A server stopped (or killed) mid-batch loses only the lines in flight, which run again when it
starts next; a cancelled batch stops its lines in flight and is finalized with what was answered.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import httpx
from starlette.types import ASGIApp

from ..server.params import PRIORITY_LIMIT
from .lines import error_file, output_file
from .store import BatchRecord, BatchStore, LineRecord

__all__ = ["BatchRunner"]

log = logging.getLogger("pyllama_yield.batch")


class BatchRunner:
    def __init__(
        self, store: BatchStore, app: ASGIApp, headers: Callable[[str], dict[str, str]], concurrency: Callable[[], int]
    ) -> None:
        """``headers(tenant)``: what a line's request carries to pass as the batch's tenant;
        ``concurrency()``: lines in flight (asked once the model is served)."""
        self.store = store
        self._app, self._headers, self._concurrency = app, headers, concurrency
        self._wake = asyncio.Event()
        self._current: str | None = None  # the batch running now
        self._workers: list[asyncio.Task[None]] = []

    def wake(self) -> None:
        """A batch was created or cancelled (on the event loop)."""
        self._wake.set()

    def cancel(self, batch_id: str) -> None:
        """Stop a batch: its lines in flight are cancelled, and it is finalized with what was answered."""
        self.store.set_status(batch_id, "cancelling")
        if self._current == batch_id:
            for worker in self._workers:
                worker.cancel()
        self.wake()

    async def run(self, ready: Callable[[], Awaitable[None]]) -> None:
        """The runner's task, until cancelled at shutdown. ``ready``: until the model is loaded."""
        await ready()
        n_workers = max(1, self._concurrency())
        while True:
            self._wake.clear()
            for batch_id in await asyncio.to_thread(self.store.open_batches):
                await self._run_batch(batch_id, n_workers)
            await self._wake.wait()

    async def _run_batch(self, batch_id: str, n_workers: int) -> None:
        record = await asyncio.to_thread(self.store.batch, batch_id)
        if record is None:
            return
        if record.status in ("in_progress", "validating"):
            pending = iter(await asyncio.to_thread(self.store.pending_lines, batch_id))
            transport = httpx.ASGITransport(app=self._app)
            async with httpx.AsyncClient(transport=transport, base_url="http://batch", timeout=None) as client:
                self._current = batch_id
                self._workers = [asyncio.create_task(self._worker(client, record, pending)) for _ in range(n_workers)]
                try:
                    await asyncio.gather(*self._workers, return_exceptions=True)
                finally:
                    self._current, self._workers = None, []
        await asyncio.to_thread(self._finalize, batch_id)

    async def _worker(self, client: httpx.AsyncClient, record: BatchRecord, lines: Iterator[LineRecord]) -> None:
        for line in lines:  # shared by the workers: each line is taken once
            status, answer = await self._send(client, record, line)
            await asyncio.to_thread(self.store.answer, record.id, line.n, status, answer)

    async def _send(self, client: httpx.AsyncClient, record: BatchRecord, line: LineRecord) -> tuple[int, Any]:
        assert line.request is not None
        # the last priority, and the batch's tenant as the request's user when it names none (a
        # router's model servers see no API keys)
        body = {"user": record.tenant or None, **line.request["body"], "stream": False, "priority": PRIORITY_LIMIT}
        try:
            response = await client.post(record.endpoint, json=body, headers=self._headers(record.tenant))
            return response.status_code, response.json()
        except (httpx.HTTPError, ValueError) as exc:  # not an answer of the route's: ours to report
            log.exception("batch %s line %d failed", record.id, line.n)
            return 500, {"error": {"code": 500, "message": f"{type(exc).__name__}: {exc}", "type": "server_error"}}

    def _finalize(self, batch_id: str) -> None:
        """Output and error files from the answers, then the batch's final state. Their ids are
        fixed by the batch's, so finalizing again (after a restart) rewrites the same files."""
        record = self.store.batch(batch_id)
        if record is None:
            return
        cancelled = record.status == "cancelling"
        if not cancelled:
            self.store.set_status(batch_id, "finalizing")
        lines = self.store.lines(batch_id)
        files: dict[str, str | None] = {}
        for kind, data in (("output", output_file(lines)), ("error", error_file(lines))):
            file_id = f"file-{batch_id}-{kind}"
            if data:
                self.store.add_file(f"{batch_id}_{kind}.jsonl", "batch_output", data, record.tenant, file_id)
            files[f"{kind}_file_id"] = file_id if data else None
        final = "cancelled" if cancelled else "completed"
        self.store.set_status(batch_id, final, **files)
        log.info("batch %s %s", batch_id, final)
