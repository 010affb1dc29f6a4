"""Which slot takes a completion, and the host-memory prompt cache around that choice, as in
llama-server (``get_available_slot``):

1. the slot the request names (``id_slot``), else
2. the idle slot whose cached tokens cover the largest share of the prompt, if that share is above
   ``--slot-prompt-similarity`` (0.1), else
3. the least recently used idle slot.

A slot picked by (3), or by (2) while keeping less than half of what it holds, first saves its
prompt to the host-memory cache (``--cache-ram``) and loads the cached prompt that fits the new one
best, if any does. With ``--cache-idle-slots``, starting a task also saves the idle slots' prompts
(and, with a unified KV cache, frees their cells for the busy ones).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..llama import LlamaError
from .slot import Slot, common_prefix

if TYPE_CHECKING:
    from ..llama import Context
    from .kv_caches import KvCaches
    from .prompt_cache import PromptCache
    from .task import CompletionTask

__all__ = ["choose_slot", "save_idle_slots", "swap_cached_prompt"]

log = logging.getLogger("pyllama_yield.server")


def choose_slot(slots: list[Slot], ct: CompletionTask, similarity: float) -> tuple[Slot | None, bool]:
    """The slot for ``ct`` (None: wait for one) and whether to update the prompt cache first."""
    tokens = ct.prompt_tokens
    named = slots[ct.params.id_slot] if ct.params.id_slot >= 0 else None
    if named is not None and named.busy:
        return None, False
    chosen, update_cache = named, False
    if similarity > 0 and tokens:
        best = 0.0
        for s in slots:
            if s.busy or not s.memory.tokens or (named is not None and s is not named):
                continue
            sim = common_prefix(s.memory.tokens, tokens) / len(tokens)
            if sim > best and sim > similarity:
                best, chosen = sim, s
        if chosen is not None and best > 0:
            update_cache = best * len(tokens) / len(chosen.memory.tokens) < 0.5  # it would lose most
    if chosen is None:
        idle = [s for s in slots if not s.busy]
        if not idle:
            return None, False
        chosen = min(idle, key=lambda s: (s.memory.t_last_used, s.id))
        update_cache = True
    return chosen, update_cache


def _save(cache: PromptCache, kv: KvCaches, slot: Slot) -> bool:
    sizes: dict[Context, int] = {}  # measured once, then read with the same sizes

    def measure() -> int:
        sizes.update((c, c.seq_state_size(slot.id)) for c in kv.contexts())
        return sum(sizes.values())

    def read() -> tuple[bytearray, bytearray]:
        target, *draft = (c.seq_state_bytes(slot.id, sizes[c]) for c in kv.contexts())
        return target, draft[0] if draft else bytearray()

    return cache.save(slot.memory.tokens, measure, read, slot.memory.lora, slot.memory.checkpoints)


def swap_cached_prompt(cache: PromptCache, kv: KvCaches, slot: Slot, tokens: list[int]) -> None:
    """Save ``slot``'s prompt to the host-memory cache, then load the cached prompt that fits
    ``tokens`` better than what the slot holds (the slot is emptied if loading fails)."""
    log.debug("updating prompt cache")
    _save(cache, kv, slot)
    best = cache.take_best(slot.memory.tokens, tokens)
    if best is not None:
        try:
            for ctx, data in zip(kv.contexts(), (best.target, best.draft), strict=False):
                if data:
                    ctx.seq_rm(slot.id)
                    ctx.load_seq_state_bytes(data, slot.id)
            slot.memory.replace(best.tokens, best.checkpoints)
            slot.memory.lora = best.lora
            log.debug("slot %d: loaded a cached prompt of %d tokens", slot.id, len(best.tokens))
        except LlamaError:
            log.warning("slot %d: could not load a cached prompt; starting empty", slot.id)
            kv.clear_slot(slot)
    cache.update()


def save_idle_slots(cache: PromptCache, kv: KvCaches, slots: list[Slot], free_cells: bool) -> None:
    """``--cache-idle-slots``: a task started, so keep the idle slots' prompts in host memory;
    ``free_cells`` (a unified KV cache): their cells are worth more to the busy slots."""
    for slot in slots:
        if slot.busy:
            continue
        if _save(cache, kv, slot):
            log.debug("slot %d: __TEST_TAG_CACHE_IDLE_SLOT__ (saved to the prompt cache)", slot.id)
            cache.update()
        if free_cells:
            kv.clear_slot(slot)
