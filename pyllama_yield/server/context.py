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
import threading
from collections.abc import Callable
from typing import Any

from ..common import CommonSampler
from ..llama import Batch, Context, DecodeError, LlamaError, Model, NoKvSlotError
from ..queue import Result, ServerQueue, ServerResponse, Task, TaskType
from . import slot_files, speculative
from .chat import Chat
from .client import ClientSide
from .embedding import EmbeddingTask, normalize
from .metrics import Stats
from .params import CompletionParams
from .probs import token_probs
from .results import error_payload, final_payload, partial_payload, progress_payload
from .slot import Slot, SlotState, StopType, TextStream, common_prefix, now
from .task import CompletionTask

__all__ = ["ServerContext"]

log = logging.getLogger("pyllama_yield.server")


class ServerContext(ClientSide):
    """A model served by ``n_parallel`` slots over one llama.cpp context."""

    def __init__(
        self,
        model_path: str | os.PathLike[str],
        *,
        n_ctx: int = 0,
        n_parallel: int = 1,
        kv_unified: bool = False,
        n_batch: int = 512,
        n_ubatch: int = 512,
        n_threads: int | None = None,
        n_threads_batch: int | None = None,
        n_gpu_layers: int = 0,
        flash_attn: str = "auto",
        cache_type_k: str | None = None,
        cache_type_v: str | None = None,
        use_mmap: bool = True,
        use_mlock: bool = False,
        swa_full: bool = False,
        progress: Callable[[float], object] | None = None,
        draft_model_path: str | os.PathLike[str] | None = None,
        n_draft: int = 4,
        n_draft_min: int = 0,
        yield_decode: bool = True,
        idle_sleep_ms: int = -1,
        defaults: CompletionParams | None = None,
        model_name: str | None = None,
        chat_template: str | None = None,
        n_predict_max: int = -1,
        n_probs_max: int = 100,
        embedding: bool = False,
        pooling: str | None = None,
        use_jinja: bool = True,
        reasoning_format: str = "deepseek",
        context_shift: bool = False,
    ) -> None:
        """``n_ctx`` is the total context (0: the model's), split over ``n_parallel`` slots
        unless ``kv_unified``, as llama-server does; a slot never gets more than the model's
        training context."""
        if n_parallel < 1 or n_batch < 1 or n_ctx < 0 or n_draft < 0:
            raise ValueError("n_parallel and n_batch must be >= 1, n_ctx >= 0, n_draft >= 0")
        self.model = Model(
            model_path, n_gpu_layers=n_gpu_layers, progress=progress, use_mmap=use_mmap, use_mlock=use_mlock
        )
        self.n_parallel = n_parallel
        self.yield_decode = yield_decode
        self.idle_sleep_ms = idle_sleep_ms
        self.model_name = model_name or os.path.basename(str(model_path))
        self.n_predict_max = n_predict_max  # caps on what one request may ask for
        self.n_probs_max = n_probs_max
        self.embedding = embedding  # an embeddings server: no completions (as llama-server)
        if embedding:
            n_batch = min(n_batch, n_ubatch)  # a pooled prompt must fit one ubatch: make batches that size
            # with one KV stream per sequence, llama.cpp splits a batch of several sequences into
            # equal-length ubatches, which cuts a prompt (and its pooling) in parts: share one stream
            kv_unified = True
        ctx_args: dict[str, Any] = dict(
            n_ctx=n_ctx,
            n_batch=n_batch,
            n_ubatch=min(n_batch, n_ubatch),
            n_seq_max=n_parallel,
            n_threads=n_threads,
            n_threads_batch=n_threads_batch,
            flash_attn=flash_attn,
            type_k=cache_type_k,
            type_v=cache_type_v,
            kv_unified=kv_unified,
            swa_full=swa_full,
        )
        self._ctx_args = {**ctx_args, "embeddings": embedding, "pooling": pooling}  # to recreate it after a sleep
        self.ctx = Context(self.model, **self._ctx_args)
        self.n_ctx_slot = min(self.ctx.n_ctx_seq, self.model.n_ctx_train)
        self.n_batch = self.ctx.n_batch
        self.n_ctx_total = self.ctx.n_ctx
        self.pooling = self.ctx.pooling  # kept: the context is freed while the server sleeps
        if context_shift and (not self.ctx.can_shift or draft_model_path is not None):
            raise ValueError("context shift is not supported by this model's cache, or with a draft model")
        self.context_shift = context_shift
        self.n_ubatch = min(n_ubatch, self.n_batch)
        self.batch = Batch(self.n_batch)
        self.vocab = self.model.vocab
        # a template or a built-in name; the model's own otherwise (ChatML when it has none)
        self.chat = Chat(self.model, chat_template, use_jinja, reasoning_format)
        self.defaults = defaults or CompletionParams()  # the server's sampling settings
        self._eog_tokens: list[int] | None = None

        self.draft_model: Model | None = None
        self.draft_ctx: Context | None = None
        self.n_draft = 0
        if draft_model_path is not None:
            speculative.load_draft(self, draft_model_path, n_gpu_layers, ctx_args, n_draft, n_draft_min)
        self.info = self.describe(model_path)
        self.slots = [Slot(i) for i in range(n_parallel)]
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
        self._t_start = self.stats.t_start
        self.stats.publish()

    # --- lifecycle --------------------------------------------------------------------------
    def run(self) -> None:
        """Serve on the calling thread until :meth:`stop`."""
        self._loop_ident = threading.get_ident()
        self.queue.start_loop(self.idle_sleep_ms)

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
        for owner in (
            self.chat,
            self.batch,
            self.ctx,
            getattr(self, "draft_batch", None),
            self.draft_ctx,
            self.draft_model,
            self.model,
        ):
            if owner is not None:
                owner.close()

    def __enter__(self) -> ServerContext:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _on_sleeping(self, sleeping: bool) -> None:
        """Idle for ``idle_sleep_ms``: free the context (KV cache, compute buffers) and get it back
        on the next request. The model stays loaded: callers tokenize with its vocab any time."""
        if sleeping:
            self.ctx.close()
            if self.draft_ctx is not None:
                self.draft_ctx.close()
            for slot in self.slots:
                slot.cache_tokens = []
        else:
            self.ctx = Context(self.model, **self._ctx_args)
            if self.draft_model is not None:
                self.draft_ctx = Context(self.draft_model, **{**self._ctx_args, "embeddings": False, "pooling": None})
        self.stats.publish()

    # --- tasks (loop thread, or the worker while yielding) -----------------------------------
    def _on_task(self, task: Task, is_yielding: bool) -> bool:
        if task.type is TaskType.METRICS:  # read-only: answered on the worker during a yield (S3)
            self.responses.send(Result(task.id, self.snapshot()))
            return True
        if task.type is TaskType.CANCEL:
            slot = next((s for s in self.slots if s.busy and s.id_task == task.id_target), None)
            if slot is None:
                # the queue already dropped it if it was waiting; tell any waiter it is over
                self.responses.send(Result(task.id_target, error_payload("cancelled", 499), is_error=True))
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
            self._send_error(task.id, str(exc), 400)
        except Exception as exc:  # a bug must not kill the loop: fail this request only
            log.exception("task %s failed", task.id)
            self._send_error(task.id, f"{type(exc).__name__}: {exc}", 500, "server_error")
        return True

    def _send_error(self, id_task: int, message: str, code: int, kind: str = "invalid_request_error") -> None:
        self.stats.add(requests_failed=1)
        self.responses.send(Result(id_task, error_payload(message, code, kind), is_error=True))

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
        slot = self._choose_slot(ct)
        if slot is None:
            task.id_slot = ct.params.id_slot
            self.queue.defer(task)  # resumed by pop_deferred_task when a slot frees
            self.stats.publish()
            return
        self._assign(slot, task.id, ct)

    def _choose_slot(self, ct: CompletionTask) -> Slot | None:
        if ct.params.id_slot >= 0:
            slot = self.slots[ct.params.id_slot]
            return None if slot.busy else slot
        idle = [s for s in self.slots if not s.busy]
        if not idle:
            return None
        # prompt cache: the idle slot that already holds the longest prefix of this prompt
        cache = ct.params.cache_prompt
        return max(idle, key=lambda s: (common_prefix(s.cache_tokens, ct.prompt_tokens) if cache else 0, -s.id))

    def _assign(self, slot: Slot, id_task: int, ct: CompletionTask) -> None:
        tokens = ct.prompt_tokens
        try:
            sampler = CommonSampler(self.model, ct.params.sampling)
        except ValueError as exc:  # e.g. a grammar llama.cpp cannot parse
            raise ValueError(str(exc)) from None
        n_keep = common_prefix(slot.cache_tokens, tokens) if ct.params.cache_prompt else 0
        n_keep = min(n_keep, len(tokens) - 1)  # evaluate at least the last prompt token, for its logits
        if not self.ctx.seq_rm(slot.id, n_keep, -1):
            self.ctx.seq_rm(slot.id)
            n_keep = 0
        if self.draft_ctx is not None:
            self.draft_ctx.seq_rm(slot.id)
            self.draft_ctx.seq_rm(slot.id, n_keep, -1)
        slot.id_task = id_task
        slot.task = ct
        slot.prompt_tokens = tokens
        slot.cache_tokens = tokens[:n_keep]
        slot.n_prompt_done = slot.n_prompt_cached = n_keep
        slot.generated = []
        slot.text = TextStream(ct.params.stop)
        slot.sampler = sampler
        for tok in tokens:  # penalties look back over the prompt too, as in llama-server
            sampler.accept(tok, is_generated=False)
        slot.n_draft_total = slot.n_draft_accepted = 0
        slot.t_start = now()
        slot.t_prompt_done = 0.0
        slot.state = SlotState.PROCESSING_PROMPT
        if self.draft_ctx is not None and n_keep:
            speculative.prefill(self, slot, n_keep)
        self.stats.publish()

    def _handle_embedding(self, task: Task) -> None:
        et = task.payload
        slot = next((s for s in self.slots if not s.busy), None)
        if slot is None:
            self.queue.defer(task)
            self.stats.publish()
            return
        self.ctx.seq_rm(slot.id)  # an embedding is computed from scratch, never from a cache
        slot.id_task = task.id
        slot.task = et
        slot.prompt_tokens = et.prompt_tokens
        slot.cache_tokens = []
        slot.n_prompt_done = slot.n_prompt_cached = 0
        slot.t_start = now()
        slot.state = SlotState.PROCESSING_PROMPT
        self.stats.publish()

    def _send_embedding(self, s: Slot) -> None:
        et = s.task
        assert isinstance(et, EmbeddingTask)
        n = len(s.prompt_tokens)
        if et.rerank:
            score = float(self.ctx.embeddings_seq(s.id)[0])
            payload = {"index": et.index, "score": score, "tokens_evaluated": n}
            self.responses.send(Result(s.id_task, payload))
        elif self.pooling == "none":  # one vector per token, as they are
            vectors = [self.ctx.embeddings(s.i_batch - n + 1 + j).tolist() for j in range(n)]
        else:
            vectors = [normalize(self.ctx.embeddings_seq(s.id), et.normalize).tolist()]
        if not et.rerank:
            self.responses.send(Result(s.id_task, {"index": et.index, "embedding": vectors, "tokens_evaluated": n}))
        self.stats.add(prompt_tokens=0, requests_finished=1)
        self.ctx.seq_rm(s.id)
        s.cache_tokens = []
        self._release(s)

    _HANDLERS: dict[TaskType, Callable[[ServerContext, Task], None]] = {
        TaskType.COMPLETION: _handle_completion,
        TaskType.EMBEDDING: _handle_embedding,
        TaskType.SLOT_SAVE: slot_files.save,
        TaskType.SLOT_RESTORE: slot_files.restore,
        TaskType.SLOT_ERASE: slot_files.erase,
    }

    # --- one step of continuous batching (loop thread) --------------------------------------
    def _update_slots(self) -> None:
        self._check_loop_thread()
        self._running.set()
        if not any(s.busy for s in self.slots):
            return
        try:
            self._step()
        except Exception as exc:
            log.exception("update_slots failed")
            for slot in self.slots:
                if slot.busy:
                    self._fail(slot, f"{type(exc).__name__}: {exc}")
        self.stats.publish()
        if any(s.busy for s in self.slots):
            # keep the loop turning while slots work; tasks posted meanwhile are handled first
            self.queue.post(Task(TaskType.NEXT_RESPONSE))

    def _shift_context(self, s: Slot) -> None:
        """The slot's context is full: drop ``n_discard`` tokens after the first ``n_keep`` (half of
        the rest by default) and move the later ones back, as llama-server's context shift does."""
        assert isinstance(s.task, CompletionTask)
        p = s.task.params
        n_past = len(s.cache_tokens)
        n_keep = len(s.prompt_tokens) if p.n_keep < 0 else p.n_keep
        n_keep = min(self.n_ctx_slot - 4, n_keep + (1 if self.vocab.add_bos else 0))
        n_left = n_past - n_keep
        n_discard = max(0, min(p.n_discard or n_left // 2, n_left - 1))
        self.ctx.seq_rm(s.id, n_keep, n_keep + n_discard)
        self.ctx.seq_add(s.id, n_keep + n_discard, n_past, -n_discard)
        del s.cache_tokens[n_keep : n_keep + n_discard]
        s.truncated = True

    def _step(self) -> None:
        generating = [s for s in self.slots if s.state is SlotState.GENERATING]
        if self.context_shift:
            for s in generating:
                if len(s.cache_tokens) + 1 >= self.n_ctx_slot:
                    self._shift_context(s)
        spec = self.draft_ctx is not None
        if spec and generating:
            # S2: drafting is yielded only when a slot drafts
            self.queue.yield_to_queue(lambda: speculative.draft(self, generating))
        chunks = self._fill_batch(generating)
        t0 = now()
        try:
            if self.yield_decode:
                self.queue.yield_to_queue(self._decode)  # S1: decode and sync inside the yield
            else:
                self._decode()
        except NoKvSlotError:
            # the KV cache is full: first drop what idle slots keep cached and retry the step;
            # else every busy slot fails, as in llama-server (its words, so clients can tell)
            if not self._clear_idle_caches():
                for s in self.slots:
                    if s.busy:
                        self._fail(s, "Context size has been exceeded.")
                return
            for s in self.slots:  # whatever part of the batch got in goes out again before the retry
                if s.busy:
                    self.ctx.seq_rm(s.id, len(s.cache_tokens), -1)
            return
        except DecodeError as exc:
            for s in self.slots:
                if s.busy and (s.id in chunks or s in generating):
                    self._fail(s, str(exc))
            return
        dt = now() - t0
        self.stats.add(
            n_decode=1,
            prompt_tokens=sum(chunks.values()),
            prompt_seconds=dt if chunks else 0.0,
            predicted_seconds=dt if generating else 0.0,
        )
        for s in self.slots:
            if s.id in chunks:
                self._prompt_chunk_done(s, chunks[s.id])
        for s in generating:
            if s.busy:
                self._verify_and_accept(s)
        if spec and generating:
            # S2: processing is yielded when speculation is on; a failure raises after the yield
            if not self.queue.yield_to_queue(lambda: speculative.process(self, generating)):
                raise RuntimeError("failed to process speculative batch")

    def _fill_batch(self, generating: list[Slot]) -> dict[int, int]:
        """Generating slots first (one token plus drafts each), then prompt chunks in the room left."""
        batch = self.batch
        batch.clear()
        if self.draft_ctx is not None:
            self.draft_batch.clear()
        for s in generating:
            s.i_batch = batch.n_tokens
            pos = len(s.cache_tokens)
            batch.add(s.last_token, pos, s.id, logits=True)
            for j, d in enumerate(s.drafts):
                batch.add(d, pos + 1 + j, s.id, logits=True)
        chunks: dict[int, int] = {}
        for s in self.slots:
            if s.state is not SlotState.PROCESSING_PROMPT:
                continue
            room = batch.capacity - batch.n_tokens
            if room <= 0:
                break
            start = s.n_prompt_done
            if isinstance(s.task, EmbeddingTask):  # whole, every token an output, or in a later batch
                if len(s.prompt_tokens) > room:
                    continue
                for j, tok in enumerate(s.prompt_tokens):
                    batch.add(tok, j, s.id, logits=True)
                s.i_batch = batch.n_tokens - 1
                chunks[s.id] = len(s.prompt_tokens)
                continue
            chunk = s.prompt_tokens[start : start + room]
            last = start + len(chunk) == len(s.prompt_tokens)
            batch.add_sequence(chunk, start, s.id, logits_last=last)
            if self.draft_ctx is not None:
                self.draft_batch.add_sequence(chunk, start, s.id, logits_last=False)
            s.i_batch = batch.n_tokens - 1
            chunks[s.id] = len(chunk)
        return chunks

    def _clear_idle_caches(self) -> bool:
        """Free the KV cells idle slots keep for prompt reuse; False when there were none."""
        idle = [s for s in self.slots if not s.busy and s.cache_tokens]
        for s in idle:
            self.ctx.seq_rm(s.id)
            if self.draft_ctx is not None:
                self.draft_ctx.seq_rm(s.id)
            s.cache_tokens = []
        return bool(idle)

    def _decode(self) -> None:
        self.ctx.decode(self.batch)
        self.ctx.synchronize()
        if self.draft_ctx is not None and self.draft_batch.n_tokens:
            self.draft_ctx.decode(self.draft_batch)

    def _prompt_chunk_done(self, s: Slot, n: int) -> None:
        if isinstance(s.task, EmbeddingTask):
            self._send_embedding(s)
            return
        s.cache_tokens.extend(s.prompt_tokens[s.n_prompt_done : s.n_prompt_done + n])
        s.n_prompt_done += n
        task = s.task
        assert task is not None
        if s.n_prompt_done < len(s.prompt_tokens):
            if task.params.return_progress and task.params.stream:
                self.responses.send(Result(s.id_task, progress_payload(s), is_final=False))
            return
        s.state = SlotState.GENERATING
        s.t_prompt_done = now()
        if task.params.return_progress and task.params.stream:
            self.responses.send(Result(s.id_task, progress_payload(s), is_final=False))
        if task.params.n_predict == 0:  # only evaluate the prompt into the cache
            self._finish(s, StopType.LIMIT)
            return
        self._sample_and_accept(s, s.i_batch)

    def _verify_and_accept(self, s: Slot) -> None:
        """Sample the slot's next token, and verify its drafts: keep the longest matching prefix."""
        drafts, s.drafts = s.drafts, []
        s.cache_tokens.append(s.last_token)
        n_accepted = 0
        for j in range(len(drafts) + 1):
            tok = self._sample_and_accept(s, s.i_batch + j)
            if not s.busy or j == len(drafts) or tok != drafts[j]:
                break
            n_accepted += 1
            s.cache_tokens.append(tok)
        # every draft accepted: the draft model never saw its own last draft
        s.draft_kv_short = bool(drafts) and n_accepted == len(drafts)
        if drafts:
            s.n_draft_total += len(drafts)
            s.n_draft_accepted += n_accepted
            self.stats.add(draft_tokens=len(drafts), draft_accepted=n_accepted)

    def _sample_and_accept(self, s: Slot, idx: int) -> int:
        """Sample from output ``idx`` for slot ``s``, record its probabilities, then stream it and
        check the stop conditions (which may finish the slot)."""
        task = s.task
        assert task is not None and s.sampler is not None
        try:
            tok = s.sampler.sample(self.ctx, idx)
            s.sampler.accept(tok, is_generated=True)
        except LlamaError as exc:
            self._fail(s, str(exc), 400)
            return -1
        probs = token_probs(s.sampler, self.ctx, idx, tok, task.params, self.piece)
        if probs is not None:
            s.probs.append(probs)
        self._accept(s, tok, probs)
        return tok

    def _accept(self, s: Slot, tok: int, probs: dict[str, Any] | None) -> None:
        """A new token for slot ``s``: stream it, check the stop conditions, maybe finish."""
        assert s.task is not None
        p = s.task.params
        stop = s.add_token(tok, self.vocab.is_eog(tok), self.piece(tok), self.n_ctx_slot, self.context_shift)
        if p.stream:  # every token gets a partial result, the last one too (as in llama-server)
            content = s.text.take_sendable(stop is not StopType.NONE)
            self.responses.send(Result(s.id_task, partial_payload(s, tok, content, probs), is_final=False))
        if stop is not StopType.NONE:
            self._finish(s, stop)

    def _finish(self, s: Slot, stop: StopType, cancelled: bool = False) -> None:
        if cancelled:
            self.responses.send(Result(s.id_task, error_payload("cancelled", 499), is_error=True))
        else:
            self.responses.send(Result(s.id_task, final_payload(s, stop, s.text.take_sendable(True))))
        self.stats.add(predicted_tokens=len(s.generated), requests_finished=1)
        self._release(s)

    def _fail(self, s: Slot, message: str, code: int = 500) -> None:
        self._send_error(s.id_task, message, code, "server_error" if code >= 500 else "invalid_request_error")
        self.ctx.seq_rm(s.id)
        if self.draft_ctx is not None:
            self.draft_ctx.seq_rm(s.id)
        s.cache_tokens = []
        self._release(s)

    def _release(self, s: Slot) -> None:
        s.reset()
        self.queue.pop_deferred_task(s.id)
        self.stats.publish()
