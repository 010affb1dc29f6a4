"""Which deferred task a freed slot takes, when many users share the slots (Q3 generalized).

A task that asked for the freed slot goes first (Q3 as written). Otherwise the most urgent
priority (lower is sooner, vLLM's meaning); among equals, start-time fair queuing over tenants
(Goyal, Vin and Cheng, 1996): each task that will need a slot is tagged when posted with the
virtual time at which its tenant's turn comes (the later of now, the start tag of the latest task
that started, and the end of the tenant's previous task, which is 1/weight after its start), and
the smallest tag goes first. So a tenant with sixteen tasks queued does not make another one's
single task wait behind all sixteen: that task's tag is the virtual now, ahead of the sixteen's
later tags; with weights, a tenant of weight 2 starts twice as many tasks. A tenant's own tasks
keep their order, and with one tenant and one priority this is Q3's "else the oldest".

Every method runs under the queue's lock.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from .tasks import Task, TaskType

__all__ = ["FairShare"]

SLOT_TASKS = frozenset({TaskType.COMPLETION, TaskType.EMBEDDING})  # the tasks that take a slot


def _equal(tenant: str) -> float:
    return 1.0


class FairShare:
    def __init__(self) -> None:
        self.weigh: Callable[[str], float] = _equal  # a tenant's weight (> 0), e.g. its API key's
        self._now = 0.0  # virtual time: the start tag of the latest task that started
        self._end: dict[str, float] = {}  # tenant -> end tag of its latest task (while ahead of now)
        self._tags: dict[int, float] = {}  # task id -> start tag, until the task starts
        self._waiting: dict[int, float] = {}  # tasks deferred now -> since when (monotonic s)

    def posted(self, task: Task) -> None:
        if task.type not in SLOT_TASKS or task.id in self._tags:
            return
        start = max(self._now, self._end.get(task.tenant, 0.0))
        self._tags[task.id] = start
        self._end[task.tenant] = start + 1.0 / self.weigh(task.tenant)

    def deferred(self, task: Task) -> None:
        self._waiting.setdefault(task.id, time.monotonic())

    def handled(self, task: Task) -> None:
        """The new-task callback took ``task``: unless it deferred it, the task started."""
        if task.id in self._waiting:
            return
        start = self._tags.pop(task.id, None)
        if start is not None and start > self._now:
            self._now = start
            self._end = {t: end for t, end in self._end.items() if end > start}  # the rest are behind now

    def forget(self, task_id: int) -> None:
        """A task cancelled before it started."""
        self._tags.pop(task_id, None)
        self._waiting.pop(task_id, None)

    def pick(self, waiting: Sequence[Task], id_slot: int) -> Task | None:
        """The task of ``waiting`` (oldest first) that slot ``id_slot`` takes."""
        if not waiting:
            return None
        chosen = next((t for t in waiting if t.id_slot == id_slot), None)
        if chosen is None:
            chosen = min(enumerate(waiting), key=self._rank)[1]
        self._waiting.pop(chosen.id, None)
        return chosen

    def order(self, waiting: Sequence[Task]) -> list[Task]:
        """``waiting`` (oldest first) in the order slots will take them (none asking for one)."""
        return [t for _, t in sorted(enumerate(waiting), key=self._rank)]

    def _rank(self, item: tuple[int, Task]) -> tuple[int, float, int]:
        age, task = item
        return task.priority, self._tags.get(task.id, 0.0), age

    def tag(self, task_id: int) -> float | None:
        """A task's start tag until it starts."""
        return self._tags.get(task_id)

    def waiting_since(self, task_id: int) -> float | None:
        return self._waiting.get(task_id)
