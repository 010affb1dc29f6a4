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
from collections.abc import Callable
from typing import Any

from .. import rpc
from ..llama import Batch, Context, Model
from ..mtmd import Projector
from ..queue import Result, ServerQueue, ServerResponse, Task, TaskType
from .batching import BatchStep
from .chat import Chat
from .checkpoints import CheckpointPolicy
from .config import ContextConfig, EngineConfig
from .emitter import SlotEmitter
from .errors import ErrorKind, error_result
from .kv_caches import KvCaches
from .lora import LoraSet
from .media import MediaMemory
from .metrics import PhaseClock, Stats
from .outputs import DecodeOutputs
from .preemption import Preemption
from .prompt_cache import PromptCache
from .results import MetricsSnapshot
from .side_embedder import SideEmbedder
from .slot import Slot, StopType
from .slot_files import SlotFiles
from .slot_start import SlotStarter
from .speculative import DraftModel, NoDraft
from .usage import TenantUsage

__all__ = ["ServerContext"]

log = logging.getLogger("pyllama_yield.server")


class ServerContext:
    """A model served by ``n_parallel`` slots over one llama.cpp context: the loop side. Callers
    on other threads go through the ``Engine`` handle (``engine.py``), never through this.

    It loads the model and assembles the slot loop from its parts (``kv``: the KV caches;
    ``emitter``: results out, slots released; ``outputs``: what a decode's outputs become;
    ``step``: one batch step; ``files``: slot files), then starts tasks on slots."""

    def __init__(self, config: EngineConfig, progress: Callable[[float], object] | None = None) -> None:
        """A slot never gets more context than the model's training context. ``progress``
        reports the model load (returning False aborts it)."""
        self.config = config
        m = config.model
        if m.rpc_servers:  # checked before llama.cpp sees them: it aborts on one it cannot reach
            rpc.connect(m.rpc_servers)
        if m.mmproj is not None and config.draft.path is not None:
            raise ValueError("speculative decoding (-md) with a multimodal projector (--mmproj) is not supported")
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
        self.drafter: NoDraft = NoDraft()
        if config.draft.path is not None:
            self.drafter = DraftModel(config.draft, self.model, self._ctx_args, config.model.n_gpu_layers, c.n_parallel)
        self.kv = KvCaches(self._new_context, self.drafter)
        ctx = self.kv.ctx
        self.n_ctx_slot = min(ctx.n_ctx_seq, self.model.n_ctx_train)
        self.n_batch = ctx.n_batch
        self.n_ctx_total = ctx.n_ctx
        self.pooling = ctx.pooling  # kept: the context is freed while the server sleeps
        if cache.context_shift and not ctx.can_shift:
            raise ValueError("context shift is not supported by this model's cache")
        self.n_ubatch = min(self._ctx_args["n_ubatch"], self.n_batch)
        self.batch = Batch(self.n_batch)
        self.vocab = self.model.vocab
        self.eog_tokens = self.vocab.eog_tokens()  # at load, as llama-server: never per request
        self.loras = LoraSet(self.model, config.lora)
        self.prompt_cache = PromptCache(cache.cache_ram_mib, self.n_ctx_total) if cache.cache_ram_mib != 0 else None
        if cache.cache_idle_slots and self.prompt_cache is not None:
            log.debug("__TEST_TAG_CACHE_IDLE_SLOTS_ENABLED__: idle slots go to the prompt cache when a task starts")
        ch = config.chat  # a template or a built-in name; the model's own otherwise (ChatML when it has none)
        self.chat = Chat(self.model, ch.template, ch.use_jinja, ch.reasoning_format, ch.enable_thinking)
        self.projector = self._load_projector(config)
        context_shift = cache.context_shift
        if context_shift and self.projector is not None:  # a shift would cut through media
            log.warning("context shift is not supported with a multimodal projector: it is disabled")
            context_shift = False
        self.slots = [Slot(i) for i in range(c.n_parallel)]
        self.queue = ServerQueue()
        self.responses = ServerResponse()
        self.stats = Stats(self.slots, self.queue, n_ctx_slot=self.n_ctx_slot, n_ctx=self.n_ctx_total)
        self._assemble(config, context_shift)
        self.queue.on_new_task(self._on_task)
        self.queue.on_update_slots(self._update_slots)
        self.queue.on_sleeping_state(self._on_sleeping)

        self._loop_ident: int | None = None
        self._loop_thread: threading.Thread | None = None
        self._loop_error: BaseException | None = None
        self._running = threading.Event()
        self.stats.publish()

    def _assemble(self, config: EngineConfig, context_shift: bool) -> None:
        """The slot loop's parts, each given what it works with."""
        clock = PhaseClock()  # where the loop thread's time goes
        self.usage = TenantUsage()  # tokens per tenant per minute (an API key's limit)
        self.emitter = SlotEmitter(self.responses, self.queue, self.stats, self.kv, self.usage)
        self.checkpoints = CheckpointPolicy(
            n_max=config.cache.ctx_checkpoints,
            min_step=config.cache.checkpoint_min_step,
            n_swa=0 if config.context.swa_full else self.model.n_swa,  # --swa-full: the cache keeps all
            recurrent=self.model.has_recurrent_state,
            n_batch=self.n_batch,
            n_ubatch=self.n_ubatch,
        )
        self.media = MediaMemory()
        self.preemption = Preemption(self.slots, self.kv, self.queue, self.emitter)
        self.outputs = DecodeOutputs(
            self.kv,
            self.vocab,
            self.emitter,
            self.stats,
            clock,
            n_ctx_slot=self.n_ctx_slot,
            context_shift=context_shift,
            pooling=self.pooling,
            eog_tokens=self.eog_tokens,
        )
        self.step = BatchStep(
            self.slots,
            self.kv,
            self.outputs,
            self.emitter,
            self.queue,
            self.stats,
            clock,
            preemption=self.preemption,
            batch=self.batch,
            loras=self.loras,
            checkpoints=self.checkpoints,
            projector=self.projector,
            media=self.media,
            n_ctx_slot=self.n_ctx_slot,
            context_shift=context_shift,
            yield_decode=config.limits.yield_decode,
            add_bos=self.vocab.add_bos,
        )
        # a generation engine embeds beside its slots (Ollama's /api/embed); an embeddings one in them
        self.side = None if self.embedding else SideEmbedder(self.model, self._ctx_args, self.emitter, self.stats)
        self._handlers = self._task_handlers(config)

    def _task_handlers(self, config: EngineConfig) -> dict[TaskType, Callable[[Task], Result | None]]:
        """What the loop does with each task that needs the slots."""
        files = SlotFiles(
            self.slots, self.kv, self.media, n_ctx_slot=self.n_ctx_slot, has_projector=self.projector is not None
        )
        starter = SlotStarter(
            self.model,
            self.slots,
            self.kv,
            self.emitter,
            self.queue,
            self.stats,
            self.preemption,
            loras=self.loras,
            checkpoints=self.checkpoints,
            prompt_cache=self.prompt_cache,
            similarity=config.cache.slot_prompt_similarity,
            cache_idle_slots=config.cache.cache_idle_slots,
            unified_kv=self._ctx_args["kv_unified"],
            chunk_reuse=not self.drafter.active and self.projector is None,
        )
        return {
            TaskType.COMPLETION: starter.completion,
            TaskType.EMBEDDING: starter.embedding if self.side is None else self._embed_beside,
            TaskType.SLOT_SAVE: files.save,
            TaskType.SLOT_RESTORE: files.restore,
            TaskType.SLOT_ERASE: files.erase,
        }

    # --- lifecycle --------------------------------------------------------------------------
    def run(self) -> None:
        """Serve on the calling thread until :meth:`stop`."""
        self._loop_ident = threading.get_ident()
        if self.config.limits.warmup:  # on the loop thread: all ggml compute stays on one thread
            self.kv.ctx.warmup()
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
        for name in ("chat", "batch", "side", "kv", "drafter", "projector", "model"):
            owner = getattr(self, name, None)
            if owner is not None:
                owner.close()

    def _load_projector(self, config: EngineConfig) -> Projector | None:
        """The ``--mmproj`` projector, with what it rules out (as llama-server decides)."""
        m = config.model
        if m.mmproj is None:
            return None
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
            self.kv.sleep(self.slots)
            if self.side is not None:
                self.side.close()
        else:
            self.kv.wake()
            self.loras.forget_applied()
            self.stats.on_sleeping(False)
        self.stats.publish()

    def _update_slots(self) -> None:
        self._check_loop_thread()
        self._running.set()
        if self.side is not None and self.side.busy:
            self.side.run(self.queue)  # between steps, never inside one
        self.step.run()

    def _embed_beside(self, task: Task) -> None:
        assert self.side is not None
        self.side.add(task.id, task.payload)

    # --- tasks (loop thread, or the worker while yielding) -----------------------------------
    def _on_task(self, task: Task, is_yielding: bool) -> bool:
        if task.type is TaskType.METRICS:  # read-only: answered on the worker during a yield (S3)
            snapshot = self.stats.snapshot(reset_buckets=bool(task.payload))
            self.emitter.send(Result(task.id, MetricsSnapshot(snapshot)))
            return True
        if task.type is TaskType.CANCEL:
            slot = next((s for s in self.slots if s.busy and s.id_task == task.id_target), None)
            if slot is None:
                # the queue already dropped it if it was waiting; tell any waiter it is over
                self.emitter.send(error_result(task.id_target, "cancelled", ErrorKind.CANCELLED))
                return True
            if is_yielding:
                return False  # freeing a slot touches the KV cache: after the decode
            self.emitter.finish(slot, StopType.NONE, cancelled=True)
            return True
        if is_yielding:
            return False  # needs the model or the slots (S3); NEXT_RESPONSE too, so it wakes the loop after
        if task.type is TaskType.NEXT_RESPONSE:
            return True
        self._check_loop_thread()
        try:
            handler = self._handlers.get(task.type)
            if handler is None:
                raise ValueError(f"task type {task.type.name} is not supported")
            result = handler(task)
        except ValueError as exc:
            self.emitter.error(task.id, str(exc), ErrorKind.INVALID_REQUEST)
        except Exception as exc:  # a bug must not kill the loop: fail this request only
            log.exception("task %s failed", task.id)
            self.emitter.error(task.id, f"{type(exc).__name__}: {exc}", ErrorKind.SERVER)
        else:
            self.stats.publish()  # /slots and metrics see the slots as the result leaves them
            if result is not None:
                self.emitter.send(result)
        return True

    def _check_loop_thread(self) -> None:
        if self._loop_ident is None:
            self._loop_ident = threading.get_ident()
        elif threading.get_ident() != self._loop_ident:
            raise RuntimeError("llama.cpp touched off the server loop thread")


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
