"""The emitter of the slot loop's results: it sends what a task produced to its readers and, when a
slot's task ends (finished, cancelled or failed), counts it, releases the slot and resumes the task
that waited for it. Loop thread, or the queue's worker for the answers it gives while yielding.
"""

from __future__ import annotations

from ..queue import Result, ServerQueue, ServerResponse
from .errors import ErrorKind, error_result
from .kv_caches import KvCaches
from .metrics import Stats
from .queue_report import QueueReport
from .results import final_result, progress_result
from .slot import Slot, StopType
from .usage import TenantUsage

__all__ = ["SlotEmitter"]


class SlotEmitter:
    def __init__(
        self, responses: ServerResponse, queue: ServerQueue, stats: Stats, kv: KvCaches, usage: TenantUsage
    ) -> None:
        self.responses = responses
        self._usage = usage
        self._queue = queue
        self._stats = stats
        self._kv = kv
        self._report = QueueReport(queue, responses)

    def queue_changed(self) -> None:
        """Tasks were deferred or resumed: the waiting ones that asked are told their place."""
        self._report.update()

    def send(self, result: Result) -> None:
        self.responses.send(result)

    def hold(self) -> None:
        """Results sent from now on wait for :meth:`flush` (one wake per reader per step)."""
        self.responses.hold()

    def flush(self, keep_holding: bool = False, defer_rings: bool = False) -> None:
        self.responses.flush(keep_holding=keep_holding, defer_rings=defer_rings)

    def take_rings(self) -> list[int]:
        """The doorbells of the readers a deferring flush woke: the decode call rings them."""
        return self.responses.take_rings()

    def error(self, id_task: int, message: str, kind: ErrorKind) -> None:
        """A request that failed (counted in the metrics)."""
        self._stats.add(requests_failed=1)
        self.responses.send(error_result(id_task, message, kind))

    def progress(self, s: Slot) -> None:
        """Prompt progress of a streamed request that asked for it (``return_progress``)."""
        params = s.completion.params
        if params.stream and params.return_progress:
            self.responses.send(Result(s.id_task, progress_result(s), is_final=False))

    def finish(self, s: Slot, stop: StopType, cancelled: bool = False) -> None:
        """The slot's task ended: its final result (or its cancellation), then the slot is free."""
        if cancelled:
            self.responses.send(error_result(s.id_task, "cancelled", ErrorKind.CANCELLED))
        else:
            self.responses.send(Result(s.id_task, final_result(s, stop, s.generated.text.take_sendable(True))))
        self._stats.add_prediction(len(s.generated.tokens), s.gen_seconds())
        self._usage.add(s.tenant, len(s.prompt.tokens) + len(s.generated.tokens))
        self._stats.add(requests_finished=1)
        self.release(s)

    def fail(self, s: Slot, message: str, kind: ErrorKind = ErrorKind.SERVER) -> None:
        """The slot's task failed: its error, and the slot's cache is dropped (it may be partial)."""
        self.error(s.id_task, message, kind)
        self._kv.clear_slot(s)
        self.release(s)

    def release(self, s: Slot) -> None:
        s.reset()
        self._queue.pop_deferred_task(s.id)
        self.queue_changed()
        self._stats.publish()
