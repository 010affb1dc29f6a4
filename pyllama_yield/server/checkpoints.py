"""Context checkpoints (llama-server's ``--ctx-checkpoints``), for models whose memory cannot be
rolled back to any position by removing the later ones: a sliding-window (SWA) cache forgets
positions older than its window, a recurrent model keeps one state.

Before the decode that ends a prompt, the slot keeps a copy of that part of its memory (a
*partial* sequence state, small: the window's cells). A later prompt that shares only a prefix
with the cache can then go back to a checkpoint at or before the shared part; without one, the
whole prompt is evaluated again. Removing positions from such a memory "succeeds" but leaves the
window without the cells the next tokens attend to, i.e. silently wrong logits, which is why the
reuse rule below checks the memory's oldest position.

To make a checkpoint close to the end of every prompt, a prompt's last 4 tokens (and, for long
prompts, the ubatch before them) are decoded in a step of their own, as in llama-server.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .slot import Checkpoint, Slot

if TYPE_CHECKING:
    from ..llama import Context

__all__ = ["CheckpointPolicy"]

log = logging.getLogger("pyllama_yield.server")

N_LAST_APART = 4  # a prompt's last tokens decoded in a step of their own, after a checkpoint


@dataclass(frozen=True)
class CheckpointPolicy:
    """When checkpoints are made and used; ``active`` only for models that need them."""

    n_max: int  # per slot (0: none)
    min_step: int  # tokens between two checkpoints, once a slot holds n_max of them
    n_swa: int  # the model's window (0 with --swa-full: then the whole cache stays)
    recurrent: bool
    n_batch: int
    n_ubatch: int

    @property
    def limited_rollback(self) -> bool:
        """The memory cannot be cut back to any position (whether or not checkpoints are made)."""
        return self.n_swa > 0 or self.recurrent

    @property
    def active(self) -> bool:
        return self.n_max > 0 and self.limited_rollback

    def usable_prefix(self, ctx: Context, slot: Slot, n_keep: int) -> int:
        """How many of the ``n_keep`` cached tokens the slot can really keep (at least one prompt
        token is still to evaluate): all when the memory still holds the window before them; else
        up to a checkpoint, restored here; else none. Checkpoints past what is kept are dropped."""
        if not self.limited_rollback:
            return n_keep
        pos_next = n_keep
        if 0 < n_keep <= len(slot.memory.tokens):
            # llama-server's rule: a checkpoint (or the whole prompt again) as soon as the memory's
            # oldest position reaches n_keep - n_swa, so also for a short prompt whose memory starts
            # at 0. Its re-evaluated tokens then land in the same batches as a fresh slot's: the
            # same prompts in one request give the same answers (upstream test_completion.py)
            threshold = max(0, n_keep - self.n_swa)
            if ctx.seq_pos_min(slot.id) >= threshold:
                n_keep, pos_next = self._restore(ctx, slot, n_keep, threshold)
        slot.memory.checkpoints = [c for c in slot.memory.checkpoints if c.pos_max <= pos_next]
        return n_keep

    def _restore(self, ctx: Context, slot: Slot, n_keep: int, threshold: int) -> tuple[int, int]:
        for cp in reversed(slot.memory.checkpoints):
            if cp.pos_max > n_keep:
                continue
            if cp.pos_min < threshold or cp.pos_min == 0:
                ctx.load_seq_state_bytes(cp.data, slot.id, partial=True)
                pos_next = min(n_keep, max(cp.pos_min + 1, cp.pos_max))
                log.debug("slot %d: restored a context checkpoint of %d tokens", slot.id, cp.n_tokens)
                return min(pos_next, cp.n_tokens), pos_next
        log.debug("slot %d: the cache lacks the window before the shared prefix: prompt evaluated again", slot.id)
        return 0, 0

    def chunk_end(self, start: int, end: int, n_prompt: int) -> int:
        """Where a prompt chunk ``[start, end)`` stops so that the last 4 tokens (and, before
        them, an ubatch) are decoded apart, each with a checkpoint before it."""
        if not self.active:
            return end
        for offset in (N_LAST_APART + self.n_ubatch, N_LAST_APART):
            cut = n_prompt - min(self.n_batch, offset)
            if start < cut < end:
                return cut
        return end

    def maybe_create(self, ctx: Context, slot: Slot, start: int, stop: int, n_prompt: int) -> None:
        """Before the decode of the chunk ``[start, stop)`` of a prompt: keep a checkpoint of the
        memory as it is (the chunk not yet in it) when the prompt ends within an ubatch after it."""
        if not self.active:
            return
        near_end = n_prompt < stop + self.n_ubatch
        if not (stop == n_prompt or near_end):
            return
        pos_min, pos_max = ctx.seq_pos_min(slot.id), ctx.seq_pos_max(slot.id)
        if pos_min < 0:  # nothing in the memory yet
            return
        if slot.memory.checkpoints and not near_end and start <= slot.memory.checkpoints[-1].n_tokens + self.min_step:
            return
        self._make_room(slot, start)
        data = ctx.seq_state_bytes(slot.id, partial=True)
        slot.memory.checkpoints.append(Checkpoint(pos_min, pos_max, start, data, slot.id_task))
        log.debug(
            "slot %d: context checkpoint %d of %d (positions %d..%d, %d tokens, %.3f MiB)",
            slot.id, len(slot.memory.checkpoints), self.n_max, pos_min, pos_max, start, len(data) / 2**20,
        )  # fmt: skip

    def _make_room(self, slot: Slot, n_tokens: int) -> None:
        cps = slot.memory.checkpoints
        if len(cps) + 1 >= self.n_max:  # full: first drop those too close to an earlier one
            kept: list[Checkpoint] = []
            for cp in cps:
                if cp.id_task != slot.id_task and kept and cp.n_tokens <= kept[-1].n_tokens + self.min_step:
                    continue
                kept.append(cp)
            cps = kept
        cps = cps[max(0, len(cps) - self.n_max + 1) :]  # then the oldest
        slot.memory.checkpoints = [cp for cp in cps if cp.n_tokens != n_tokens]  # superseded
