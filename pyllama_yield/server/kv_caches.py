"""The owner of the KV caches: the target model's context and the draft model's, whose caches
hold the slots' sequences at the same positions. Every part of the slot loop that reads or trims
a cache goes through it; it frees the caches while the server sleeps and makes them again on wake.
Loop thread only.
"""

from __future__ import annotations

from collections.abc import Callable

from ..llama import Context
from .slot import Slot
from .speculative import NoDraft

__all__ = ["KvCaches"]


class KvCaches:
    """The target context (``ctx``, made by ``new_context``; owned here) and the contexts of the
    drafter (which owns them)."""

    def __init__(self, new_context: Callable[[], Context], drafter: NoDraft) -> None:
        self._new_context = new_context
        self.ctx = new_context()
        self.drafter = drafter

    def contexts(self) -> tuple[Context, ...]:
        """The contexts whose caches hold the slots' sequences: the target's, then the draft's."""
        return (self.ctx, *self.drafter.contexts)

    def clear_slot(self, s: Slot) -> None:
        """Drop what slot ``s`` holds in every cache."""
        for ctx in self.contexts():
            ctx.seq_rm(s.id)
        s.memory.forget()

    def clear_idle(self, slots: list[Slot]) -> bool:
        """Free the cells idle slots keep for prompt reuse; False when there were none."""
        idle = [s for s in slots if not s.busy and s.memory.tokens]
        for s in idle:
            self.clear_slot(s)
        return bool(idle)

    def shift(self, s: Slot, n_keep: int, n_discard: int) -> None:
        """Context shift: drop ``n_discard`` cached tokens after the first ``n_keep`` and move the
        later ones back, in every cache (the draft's holds the same positions)."""
        n_past = len(s.memory.tokens)
        for ctx in self.contexts():
            ctx.seq_rm(s.id, n_keep, n_keep + n_discard)
            ctx.seq_add(s.id, n_keep + n_discard, n_past, -n_discard)
        s.memory.discard(n_keep, n_discard)

    def reset_draft(self, s: Slot, n_keep: int) -> None:
        """The draft context gets the slot's first ``n_keep`` cached tokens again (it holds
        nothing else of the sequence afterwards)."""
        for draft_ctx in self.drafter.contexts:
            draft_ctx.seq_rm(s.id)
        if n_keep:
            self.drafter.prefill(s, n_keep)

    def sleep(self, slots: list[Slot]) -> None:
        """Free the caches (and compute buffers) while idle; every slot forgets what it held."""
        self.ctx.close()
        self.drafter.sleep()
        for s in slots:
            s.memory.forget()

    def wake(self) -> None:
        self.ctx = self._new_context()
        self.drafter.wake()

    def close(self) -> None:
        self.ctx.close()
