"""Where a waiting request stands: each streamed task that waits for a slot and asked to be told
(``TaskParams.report_position``, which the HTTP layer sets for server-sent events) gets its place
whenever it changes, as a partial result the renderers turn into an SSE comment that clients
ignore. Runs where the deferred set changes: a task deferred (the loop thread, or the worker
during a yield) and a slot freed (the loop thread); the two never run at once."""

from __future__ import annotations

from dataclasses import dataclass

from ..queue import Result, ServerQueue, ServerResponse, Task
from .task import CompletionTask

__all__ = ["QueuePosition", "QueueReport"]


@dataclass(frozen=True)
class QueuePosition:
    position: int  # 1: the next task a freed slot takes
    waiting: int  # tasks waiting in all

    def sse_comment(self) -> str:
        return f": queued {self.position} of {self.waiting}\n\n"


def _wants_report(task: Task) -> bool:
    return isinstance(task.payload, CompletionTask) and task.payload.params.report_position


class QueueReport:
    def __init__(self, queue: ServerQueue, responses: ServerResponse) -> None:
        self._queue, self._responses = queue, responses
        self._told: dict[int, int] = {}  # task id -> the position it was last told

    def update(self) -> None:
        if not self._told and not any(_wants_report(t) for t in self._queue.deferred_tasks()):
            return  # nobody to tell: the ordering is not worth its sort
        waiting = self._queue.waiting()
        told: dict[int, int] = {}
        for position, (task, _) in enumerate(waiting, 1):
            if not _wants_report(task):
                continue
            if self._told.get(task.id) != position:
                self._responses.send(Result(task.id, QueuePosition(position, len(waiting)), is_final=False))
            told[task.id] = position
        self._told = told
