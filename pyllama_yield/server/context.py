"""The server context: slots, continuous batching and speculative decoding on the yielding queue.

The shape of llama.cpp's ``server_context``: the queue's loop thread owns every llama.cpp call.
``llama_decode`` (with its sync), the speculative draft and the speculative processing run inside
``ServerQueue.yield_to_queue`` (rules S1-S3), so the worker thread answers metrics, and drops
cancelled queued tasks, while the model computes. Tasks that need the model or the slots
(completions, slot save/restore) are declined during a yield and served right after it, in order.
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from .. import rpc
from ..common import CommonSampler
from ..llama import Batch, Context, Model
from ..mtmd import Chunk, Projector
from ..queue import Result, ServerQueue, ServerResponse, Task, TaskType
from . import slot_files
from .batching import BatchLoop
from .chat import Chat
from .checkpoints import CheckpointPolicy
from .config import ContextConfig, EngineConfig
from .errors import ErrorKind, error_result
from .lora import LoraSet
from .media import media_boundary, media_cell
from .metrics import PhaseClock, Stats
from .params import DEFAULT_SEED
from .prompt_cache import PromptCache, reuse_chunks
from .results import progress_payload
from .slot import Slot, SlotState, StopType, TextStream, common_prefix
from .slot_choice import choose_slot, save_idle_slots, swap_cached_prompt
from .speculative import DraftModel, NoDraft
from .task import CompletionTask

__all__ = ["ServerContext"]

MEDIA_KEPT = 256  # media placeholders kept for slot files (metadata only: a few hundred bytes each)

log = logging.getLogger("pyllama_yield.server")


class ServerContext(BatchLoop):
    """A model served by ``n_parallel`` slots over one llama.cpp context: the loop side. Callers
    on other threads go through the ``Engine`` handle (``engine.py``), never through this."""

    def __init__(self, config: EngineConfig, progress: Callable[[float], object] | None = None) -> None:
        """A slot never gets more context than the model's training context. ``progress``
        reports the model load (returning False aborts it)."""
        self.config = config
        m = config.model
        if m.rpc_servers:  # checked before llama.cpp sees them: it aborts on one it cannot reach
            rpc.connect(m.rpc_servers)
        self.model = Model(
            m.path,
            n_gpu_layers=m.n_gpu_layers,
            progress=progress,
            use_mmap=m.use_mmap,
            use_mlock=m.use_mlock,
            tensor_split=m.tensor_split,
        )
        try:
            self._load(config)
        except BaseException:
            self._free()
            raise

    def _load(self, config: EngineConfig) -> None:
        c, cache = config.context, config.cache
        self.n_parallel = c.n_parallel
        self.embedding = config.embedding  # an embeddings server: no completions (as llama-server)
        self._ctx_args = _context_args(c, config.embedding)
        self.ctx = self._new_context()
        self.n_ctx_slot = min(self.ctx.n_ctx_seq, self.model.n_ctx_train)
        self.n_batch = self.ctx.n_batch
        self.n_ctx_total = self.ctx.n_ctx
        self.pooling = self.ctx.pooling  # kept: the context is freed while the server sleeps
        if cache.context_shift and not self.ctx.can_shift:
            raise ValueError("context shift is not supported by this model's cache")
        self.context_shift = cache.context_shift
        self.yield_decode = config.limits.yield_decode
        self.n_ubatch = min(self._ctx_args["n_ubatch"], self.n_batch)
        self.checkpoints = CheckpointPolicy(
            n_max=cache.ctx_checkpoints,
            min_step=cache.checkpoint_min_step,
            n_swa=0 if config.context.swa_full else self.model.n_swa,  # --swa-full: the cache keeps all
            recurrent=self.model.has_recurrent_state,
            n_batch=self.n_batch,
            n_ubatch=self.n_ubatch,
        )
        self.batch = Batch(self.n_batch)
        self.vocab = self.model.vocab
        self.eog_tokens = self.vocab.eog_tokens()  # at load, as llama-server: never per request
        self.loras = LoraSet(self.model, config.lora)
        self.unified_kv = self._ctx_args["kv_unified"]
        self.slot_prompt_similarity = cache.slot_prompt_similarity
        self.prompt_cache = PromptCache(cache.cache_ram_mib, self.n_ctx_total) if cache.cache_ram_mib != 0 else None
        self.cache_idle_slots = cache.cache_idle_slots and self.prompt_cache is not None
        if self.cache_idle_slots:
            log.debug("__TEST_TAG_CACHE_IDLE_SLOTS_ENABLED__: idle slots go to the prompt cache when a task starts")
        ch = config.chat  # a template or a built-in name; the model's own otherwise (ChatML when it has none)
        self.chat = Chat(self.model, ch.template, ch.use_jinja, ch.reasoning_format, ch.enable_thinking)
        self.projector = self._load_projector(config)
        self.media_seen: OrderedDict[int, Chunk] = OrderedDict()  # see remember_media
        self.drafter: NoDraft = NoDraft()
        if config.draft.path is not None:
            self.drafter = DraftModel(config.draft, self.model, self._ctx_args, config.model.n_gpu_layers, c.n_parallel)
        self.slots = [Slot(i) for i in range(c.n_parallel)]
        self.queue = ServerQueue()
        self.responses = ServerResponse()
        self.queue.on_new_task(self._on_task)
        self.queue.on_update_slots(self._update_slots)
        self.queue.on_sleeping_state(self._on_sleeping)

        self._loop_ident: int | None = None
        self._loop_thread: threading.Thread | None = None
        self._loop_error: BaseException | None = None
        self._running = threading.Event()
        self.stats = Stats(self)
        self.clock = PhaseClock()
        self.stats.publish()

    # --- lifecycle --------------------------------------------------------------------------
    def run(self) -> None:
        """Serve on the calling thread until :meth:`stop`."""
        self._loop_ident = threading.get_ident()
        if self.config.limits.warmup:  # on the loop thread: all ggml compute stays on one thread
            self.ctx.warmup()
        try:
            self.queue.start_loop(self.config.limits.idle_sleep_ms)
        finally:
            self.responses.flush()  # what the last step held, before the readers are terminated

    def start(self) -> ServerContext:
        """Serve on a dedicated loop thread; returns once the loop runs."""
        if self._loop_thread is not None:
            raise RuntimeError("server context already started")

        def loop() -> None:
            try:
                self.run()
            except BaseException as exc:  # reported by stop()
                self._loop_error = exc
                log.exception("server loop died")
            finally:
                self._running.set()  # never leave start() waiting

        self._loop_thread = threading.Thread(target=loop, name="pyllama-server-loop", daemon=True)
        self._loop_thread.start()
        if not self._running.wait(60):
            raise RuntimeError("server loop did not start")
        if self._loop_error is not None:
            raise RuntimeError("server loop failed to start") from self._loop_error
        return self

    def stop(self, timeout: float = 60) -> None:
        """Terminate the loop, wake every waiter, free llama.cpp objects."""
        self.queue.terminate()
        if self._loop_thread is not None:
            self._loop_thread.join(timeout)
            if self._loop_thread.is_alive():
                raise RuntimeError("server loop did not stop")
            self._loop_thread = None
        self.responses.terminate()
        for slot in self.slots:
            slot.reset()
            slot.close_samplers()
        self._free()

    def abandon(self) -> None:
        """Stop without joining the loop thread or freeing anything: after llama.cpp aborted, a
        thread is parked inside it and the objects it uses must outlive the process."""
        self.queue.terminate()
        self.responses.terminate()

    def _free(self) -> None:
        """Close the llama.cpp objects that exist, dependents before the model (also after a
        failed load)."""
        for name in ("chat", "batch", "ctx", "drafter", "projector", "model"):
            owner = getattr(self, name, None)
            if owner is not None:
                owner.close()

    def remember_media(self, chunk: Chunk) -> None:
        """Keep a medium's placeholder (no pixels) by its cells' value: slot files save it. The
        most recent ``MEDIA_KEPT`` media are kept."""
        cell = media_cell(chunk.id or "")
        self.media_seen[cell] = chunk
        self.media_seen.move_to_end(cell)
        while len(self.media_seen) > MEDIA_KEPT:
            self.media_seen.popitem(last=False)

    def _load_projector(self, config: EngineConfig) -> Projector | None:
        """The ``--mmproj`` projector, with what it rules out (as llama-server decides)."""
        m = config.model
        if m.mmproj is None:
            return None
        if config.draft.path is not None:
            raise ValueError("speculative decoding (-md) with a multimodal projector (--mmproj) is not supported")
        if self.context_shift:  # a shift would cut through media
            log.warning("context shift is not supported with a multimodal projector: it is disabled")
            self.context_shift = False
        # the text that stands for a medium in prompts: random per process, as llama-server's, so
        # that no user text can pose as one (LLAMA_MEDIA_MARKER fixes it, as there)
        marker = os.environ.get("LLAMA_MEDIA_MARKER") or f"<__media_{secrets.token_hex(16)}__>"
        return Projector(
            m.mmproj,
            self.model,
            media_marker=marker,
            use_gpu=m.mmproj_offload,
            n_threads=config.context.n_threads,
            image_min_tokens=m.image_min_tokens,
            image_max_tokens=m.image_max_tokens,
            warmup=config.limits.warmup,
            flash_attn=config.context.flash_attn,
        )

    def __enter__(self) -> ServerContext:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _new_context(self) -> Context:
        return Context(self.model, **self._ctx_args, embeddings=self.embedding, pooling=self.config.pooling)

    def _on_sleeping(self, sleeping: bool) -> None:
        """Idle for ``idle_sleep_ms``: free the context (KV cache, compute buffers) and get it back
        on the next request. The model stays loaded: callers tokenize with its vocab any time."""
        if sleeping:
            self.stats.on_sleeping(True)  # what scrapes see while asleep: before the caches go
            self.ctx.close()
            self.drafter.sleep()
            for slot in self.slots:
                slot.forget_cache()
        else:
            self.ctx = self._new_context()
            self.loras.forget_applied()
            self.stats.on_sleeping(False)
            self.drafter.wake()
        self.stats.publish()

    # --- tasks (loop thread, or the worker while yielding) -----------------------------------
    def _on_task(self, task: Task, is_yielding: bool) -> bool:
        if task.type is TaskType.METRICS:  # read-only: answered on the worker during a yield (S3)
            self.responses.send(Result(task.id, self.stats.snapshot(reset_buckets=bool(task.payload))))
            return True
        if task.type is TaskType.CANCEL:
            slot = next((s for s in self.slots if s.busy and s.id_task == task.id_target), None)
            if slot is None:
                # the queue already dropped it if it was waiting; tell any waiter it is over
                self.responses.send(error_result(task.id_target, "cancelled", ErrorKind.CANCELLED))
                return True
            if is_yielding:
                return False  # freeing a slot touches the KV cache: after the decode
            self._finish(slot, StopType.NONE, cancelled=True)
            return True
        if is_yielding:
            return False  # needs the model or the slots (S3); NEXT_RESPONSE too, so it wakes the loop after
        if task.type is TaskType.NEXT_RESPONSE:
            return True
        self._check_loop_thread()
        try:
            handler = self._HANDLERS.get(task.type)
            if handler is None:
                raise ValueError(f"task type {task.type.name} is not supported")
            handler(self, task)
        except ValueError as exc:
            self._send_error(task.id, str(exc), ErrorKind.INVALID_REQUEST)
        except Exception as exc:  # a bug must not kill the loop: fail this request only
            log.exception("task %s failed", task.id)
            self._send_error(task.id, f"{type(exc).__name__}: {exc}", ErrorKind.SERVER)
        return True

    def _send_error(self, id_task: int, message: str, kind: ErrorKind) -> None:
        self.stats.add(requests_failed=1)
        self.responses.send(error_result(id_task, message, kind))

    def _check_loop_thread(self) -> None:
        if self._loop_ident is None:
            self._loop_ident = threading.get_ident()
        elif threading.get_ident() != self._loop_ident:
            raise RuntimeError("llama.cpp touched off the server loop thread")

    def _handle_completion(self, task: Task) -> None:
        ct = task.payload
        if not isinstance(ct, CompletionTask):
            raise ValueError("a completion task needs a CompletionTask (see ServerContext.make_tasks)")
        if not -1 <= ct.params.id_slot < self.n_parallel:
            raise ValueError(f"id_slot {ct.params.id_slot} out of range [-1, {self.n_parallel})")
        slot, update_cache = choose_slot(self.slots, ct, self.slot_prompt_similarity)
        if slot is None:
            task.id_slot = ct.params.id_slot
            self.queue.defer(task)  # resumed by pop_deferred_task when a slot frees
            self.stats.publish()
            return
        if update_cache and self.prompt_cache is not None:
            swap_cached_prompt(self, slot, ct.prompt_tokens)
        self._assign(slot, task.id, ct)
        if self.cache_idle_slots:
            save_idle_slots(self)

    def _assign(self, slot: Slot, id_task: int, ct: CompletionTask) -> None:
        tokens = ct.prompt_tokens
        try:
            sampler = CommonSampler(self.model, ct.params.sampling)
        except ValueError as exc:  # e.g. a grammar llama.cpp cannot parse
            raise ValueError(str(exc)) from None
        lora = self.loras.scales_for(ct.params.lora)
        if lora != slot.lora:  # the cache was computed with other adapters: not reusable
            slot.forget_cache()
            slot.lora = lora
        n_keep = common_prefix(slot.cache_tokens, tokens) if ct.params.cache_prompt else 0
        if ct.params.n_cache_reuse > 0 and self.ctx.can_shift and not self.drafter.active and self.projector is None:
            n_keep = reuse_chunks(self.ctx, slot.id, slot.cache_tokens, tokens, n_keep, ct.params.n_cache_reuse)
        n_keep = min(n_keep, len(tokens) - 1)  # evaluate at least the last prompt token, for its logits
        n_keep = media_boundary(ct.media, n_keep)  # whole media only
        if ct.params.prompt_logprobs >= 0:
            n_keep = 0  # every prompt token's logits are needed: none may come from the cache
        n_keep = self.checkpoints.usable_prefix(self.ctx, slot, n_keep)  # SWA / recurrent memory
        if not self.ctx.seq_rm(slot.id, n_keep, -1):
            self.ctx.seq_rm(slot.id)
            n_keep = 0
        for draft_ctx in self.drafter.contexts:  # refilled with the kept prefix below (prefill)
            draft_ctx.seq_rm(slot.id)
        slot.id_task = id_task
        slot.task = ct
        slot.prompt_tokens = tokens
        slot.cache_tokens = tokens[:n_keep]
        slot.n_prompt_done = slot.n_prompt_cached = n_keep
        self.stats.add(prompt_tokens_cached=n_keep)
        slot.generated = []
        slot.text = TextStream(ct.params.stop)
        slot.take_sampler(sampler)
        for tok in tokens:  # penalties look back over the prompt too, as in llama-server
            if tok >= 0:  # not a media cell
                sampler.accept(tok, is_generated=False)
        slot.n_draft_total = slot.n_draft_accepted = 0
        slot.synth_rng = self.drafter.synth_rng(ct.params.sampling.get("seed", DEFAULT_SEED))
        slot.start_timing()
        slot.state = SlotState.PROCESSING_PROMPT
        if ct.params.stream and ct.params.return_progress:  # 0 %: the request has started
            self.responses.send(Result(id_task, progress_payload(slot), is_final=False))
        if n_keep:
            self.drafter.prefill(slot, n_keep)
        self.stats.publish()

    def _handle_embedding(self, task: Task) -> None:
        et = task.payload
        slot = next((s for s in self.slots if not s.busy), None)
        if slot is None:
            self.queue.defer(task)
            self.stats.publish()
            return
        self.ctx.seq_rm(slot.id)  # an embedding is computed from scratch, never from a cache
        slot.checkpoints = []
        slot.id_task = task.id
        slot.task = et
        slot.lora = self.loras.scales
        slot.prompt_tokens = et.prompt_tokens
        slot.cache_tokens = []
        slot.n_prompt_done = slot.n_prompt_cached = 0
        slot.start_timing()
        slot.state = SlotState.PROCESSING_PROMPT
        self.stats.publish()

    _HANDLERS: dict[TaskType, Callable[[ServerContext, Task], None]] = {
        TaskType.COMPLETION: _handle_completion,
        TaskType.EMBEDDING: _handle_embedding,
        TaskType.SLOT_SAVE: slot_files.save,
        TaskType.SLOT_RESTORE: slot_files.restore,
        TaskType.SLOT_ERASE: slot_files.erase,
    }


def _context_args(c: ContextConfig, embedding: bool) -> dict[str, Any]:
    """The llama.cpp context parameters shared by the target and the draft model."""
    n_batch, kv_unified = c.n_batch, c.kv_unified
    if embedding:
        n_batch = min(n_batch, c.n_ubatch)  # a pooled prompt must fit one ubatch: make batches that size
        # with one KV stream per sequence, llama.cpp splits a batch of several sequences into
        # equal-length ubatches, which cuts a prompt (and its pooling) in parts: share one stream
        kv_unified = True
    return dict(
        n_ctx=c.n_ctx,
        n_batch=n_batch,
        n_ubatch=min(n_batch, c.n_ubatch),
        n_seq_max=c.n_parallel,
        kv_unified=kv_unified,
        n_threads=c.n_threads,
        n_threads_batch=c.n_threads_batch,
        flash_attn=c.flash_attn,
        type_k=c.cache_type_k,
        type_v=c.cache_type_v,
        swa_full=c.swa_full,
    )
