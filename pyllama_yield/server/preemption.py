"""Priorities that do not wait for a slot to free: when a task waits that is more urgent (a lower
``priority``) than the least urgent completion running, that completion yields its slot at the
start of the next step. Its state goes aside whole: its KV cells copied to host memory (every
context's: the target's and the draft model's), its sampler, text, tokens and timings kept as
they are. It waits in the queue like any task (ahead of its own priority's others) and, given a
slot again, has its cells put back and goes on where it stopped: its client sees a pause, nothing
is computed again, nothing is lost. Loop thread only, between steps (never during a decode).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ..llama import LlamaError
from ..queue import ServerQueue, Task, TaskType
from .emitter import SlotEmitter
from .kv_caches import KvCaches
from .slot import Slot, Suspended
from .task import CompletionTask

__all__ = ["Preemption", "Resumed"]

log = logging.getLogger("pyllama_yield.server")


@dataclass
class Resumed:
    """The payload of a suspended completion's task while it waits for a slot again."""

    held: Suspended
    cells: list[bytearray]  # its sequence's state in each context (target, then draft)


class Preemption:
    def __init__(self, slots: list[Slot], kv: KvCaches, queue: ServerQueue, emitter: SlotEmitter) -> None:
        self._slots, self._kv, self._queue, self._emitter = slots, kv, queue, emitter

    def run(self) -> None:
        """Preempt one completion if a more urgent task waits for any slot (one per step: the
        freed slot's new task starts before the next step looks again)."""
        # the slots first (no lock): a free slot, or none running a completion, and nothing to do
        if any(not s.busy for s in self._slots):
            return
        running = [s for s in self._slots if isinstance(s.task, CompletionTask)]
        if not running:
            return
        victim = max(running, key=lambda s: (s.priority, s.t_start))  # the least urgent, the latest started
        urgent = self._queue.most_urgent_waiting()
        if urgent is None or victim.priority <= urgent:
            return
        cells = [ctx.seq_state_bytes(victim.id) for ctx in self._kv.contexts()]
        for ctx in self._kv.contexts():
            ctx.seq_rm(victim.id)
        held = victim.suspend()
        log.info("slot %d: task %d (priority %d) yields to priority %d", victim.id, held.id_task, held.priority, urgent)
        resumed = Resumed(held, cells)
        task = Task(TaskType.COMPLETION, id=held.id_task, payload=resumed, tenant=held.tenant, priority=held.priority)
        self._queue.defer(task)
        self._queue.pop_deferred_task(victim.id)  # the urgent task, next
        self._emitter.queue_changed()

    def resume(self, slot: Slot, resumed: Resumed) -> None:
        """Put a suspended completion back on ``slot`` (idle): its cells, then its state. A state
        llama.cpp will not take back (no room in the KV cache even with the idle slots' caches
        dropped) fails the request with the cause."""
        for attempt in (1, 2):
            try:
                for ctx, cells in zip(self._kv.contexts(), resumed.cells, strict=True):
                    ctx.seq_rm(slot.id)
                    ctx.load_seq_state_bytes(cells, slot.id)
                break
            except LlamaError as exc:
                self._kv.clear_slot(slot)
                if attempt == 2 or not self._kv.clear_idle(self._slots):
                    raise RuntimeError(f"could not resume the preempted request: {exc}") from None
        slot.resume(resumed.held)
        log.info("slot %d: task %d resumes", slot.id, resumed.held.id_task)
