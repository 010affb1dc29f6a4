"""Starting a task on a slot, on the loop thread: which slot takes it (``slot_choice.py``), how much
of the slot's cached prompt it keeps, its sampler; or, with no slot free, deferring it until one
frees (the emitter resumes it)."""

from __future__ import annotations

from ..common import CommonSampler
from ..llama import Model
from ..queue import ServerQueue, Task
from .checkpoints import CheckpointPolicy
from .embedding import EmbeddingTask
from .emitter import SlotEmitter
from .kv_caches import KvCaches
from .lora import LoraSet
from .media import media_boundary
from .metrics import Stats
from .params import DEFAULT_SEED
from .preemption import Preemption, Resumed
from .prompt_cache import PromptCache, reuse_chunks
from .slot import Drafting, Generation, Slot, SlotPrompt, common_prefix
from .slot_choice import choose_slot, save_idle_slots, swap_cached_prompt
from .task import CompletionTask
from .text_stream import TextStream

__all__ = ["SlotStarter"]


class SlotStarter:
    def __init__(
        self,
        model: Model,
        slots: list[Slot],
        kv: KvCaches,
        emitter: SlotEmitter,
        queue: ServerQueue,
        stats: Stats,
        preemption: Preemption,
        *,
        loras: LoraSet,
        checkpoints: CheckpointPolicy,
        prompt_cache: PromptCache | None,
        similarity: float,
        cache_idle_slots: bool,
        unified_kv: bool,
        chunk_reuse: bool,
    ) -> None:
        """``similarity``: ``--slot-prompt-similarity``; ``chunk_reuse``: whether ``n_cache_reuse``
        may move cached chunks (not with a draft model or media)."""
        self._model, self._slots, self._kv, self._emitter = model, slots, kv, emitter
        self._queue, self._stats, self._preemption = queue, stats, preemption
        self._loras, self._checkpoints, self._prompt_cache = loras, checkpoints, prompt_cache
        self._similarity, self._cache_idle_slots = similarity, cache_idle_slots
        self._unified_kv, self._chunk_reuse = unified_kv, chunk_reuse

    def completion(self, task: Task) -> None:
        """Start the completion on a slot, or defer it until one frees."""
        if isinstance(task.payload, Resumed):
            self._resume(task, task.payload)
            return
        ct = task.payload
        if not isinstance(ct, CompletionTask):
            raise ValueError("a completion task needs a CompletionTask (see Engine.tasks.make_tasks)")
        if not -1 <= ct.params.id_slot < len(self._slots):
            raise ValueError(f"id_slot {ct.params.id_slot} out of range [-1, {len(self._slots)})")
        slot, update_cache = choose_slot(self._slots, ct, self._similarity)
        if slot is None:
            task.id_slot = ct.params.id_slot
            self._queue.defer(task)  # resumed by pop_deferred_task when a slot frees
            self._emitter.queue_changed()
            return
        cache = self._prompt_cache
        if update_cache and cache is not None:
            swap_cached_prompt(cache, self._kv, slot, ct.prompt_tokens)
        self._assign(slot, task, ct)
        if self._cache_idle_slots and cache is not None:
            save_idle_slots(cache, self._kv, self._slots, free_cells=self._unified_kv)

    def _resume(self, task: Task, resumed: Resumed) -> None:
        """A preempted completion onto a free slot (the one whose cache is worth least), or back
        to waiting."""
        idle = [s for s in self._slots if not s.busy]
        if not idle:
            self._queue.defer(task)
            self._emitter.queue_changed()
            return
        slot = min(idle, key=lambda s: (bool(s.memory.tokens), s.memory.t_last_used, s.id))
        self._preemption.resume(slot, resumed)

    def embedding(self, task: Task) -> None:
        """Start an embedding on a free slot (from scratch: never from a cache), or defer it."""
        et = task.payload
        assert isinstance(et, EmbeddingTask)
        slot = next((s for s in self._slots if not s.busy), None)
        if slot is None:
            self._queue.defer(task)
            return
        self._kv.ctx.seq_rm(slot.id)
        slot.memory.forget()
        slot.memory.lora = self._loras.scales
        slot.start(task, SlotPrompt(et.prompt_tokens), Generation())

    def _assign(self, slot: Slot, task: Task, ct: CompletionTask) -> None:
        tokens = ct.prompt_tokens
        sampler = slot.reuse_sampler(ct.params.sampling)
        if sampler is None:
            try:
                sampler = CommonSampler(self._model, ct.params.sampling)
            except ValueError as exc:  # e.g. a grammar llama.cpp cannot parse
                raise ValueError(str(exc)) from None
        lora = self._loras.scales_for(ct.params.lora)
        memory = slot.memory
        if lora != memory.lora:  # the cache was computed with other adapters: not reusable
            memory.forget()
            memory.lora = lora
        n_keep = self._kept_prefix(slot, ct)
        memory.tokens = tokens[:n_keep]  # what its cells hold now (reused chunks may have moved)
        self._stats.add(prompt_tokens_cached=n_keep)
        slot.take_sampler(sampler)
        sampler.accept_prompt(tokens)  # penalties look back over the prompt too, as in llama-server
        slot.draft = Drafting(synth_rng=self._kv.drafter.synth_rng(ct.params.sampling.get("seed", DEFAULT_SEED)))
        slot.start(task, SlotPrompt.keeping(tokens, n_keep), Generation(TextStream(ct.params.stop)))
        self._emitter.progress(slot)  # 0 %: the request has started
        self._kv.reset_draft(slot, n_keep)

    def _kept_prefix(self, slot: Slot, ct: CompletionTask) -> int:
        """How many of the slot's cached tokens the new prompt keeps; the cache is cut to them."""
        tokens, ctx = ct.prompt_tokens, self._kv.ctx
        n_keep = common_prefix(slot.memory.tokens, tokens) if ct.params.cache_prompt else 0
        if ct.params.n_cache_reuse > 0 and ctx.can_shift and self._chunk_reuse:
            n_keep = reuse_chunks(ctx, slot.id, slot.memory.tokens, tokens, n_keep, ct.params.n_cache_reuse)
        n_keep = min(n_keep, len(tokens) - 1)  # evaluate at least the last prompt token, for its logits
        n_keep = media_boundary(ct.media, n_keep)  # whole media only
        if ct.params.prompt_logprobs >= 0:
            n_keep = 0  # every prompt token's logits are needed: none may come from the cache
        n_keep = self._checkpoints.usable_prefix(ctx, slot, n_keep)  # SWA / recurrent memory
        if not ctx.seq_rm(slot.id, n_keep, -1):
            ctx.seq_rm(slot.id)
            n_keep = 0
        return n_keep
