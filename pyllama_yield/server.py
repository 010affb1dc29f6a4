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
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from .llama import Batch, Context, DecodeError, Model, Sampler
from .queue import ResponseReader, Result, ServerQueue, ServerResponse, Task, TaskType
from .slots import CompletionRequest, Slot, SlotState, StopType, TextStream, common_prefix, now

__all__ = ["ServerContext"]

log = logging.getLogger("pyllama_yield.server")


class ServerContext:
    """A model served by ``n_parallel`` slots over one llama.cpp context."""

    def __init__(
        self,
        model_path: str | os.PathLike[str],
        *,
        n_ctx: int = 2048,
        n_parallel: int = 1,
        n_batch: int = 512,
        n_threads: int | None = None,
        n_gpu_layers: int = 0,
        progress: Callable[[float], object] | None = None,
        draft_model_path: str | os.PathLike[str] | None = None,
        n_draft: int = 4,
        yield_decode: bool = True,
        idle_sleep_ms: int = -1,
    ) -> None:
        if n_parallel < 1 or n_batch < 1 or n_ctx < 8 or n_draft < 0:
            raise ValueError("n_parallel and n_batch must be >= 1, n_ctx >= 8, n_draft >= 0")
        self.model = Model(model_path, n_gpu_layers=n_gpu_layers, progress=progress)
        # a slot never gets more context than the model was trained for
        self.n_ctx_slot = min(n_ctx, self.model.n_ctx_train)
        self.n_parallel = n_parallel
        self.yield_decode = yield_decode
        self.idle_sleep_ms = idle_sleep_ms
        ctx_args = dict(
            n_ctx=self.n_ctx_slot * n_parallel,
            n_batch=n_batch,
            n_ubatch=min(n_batch, 512),
            n_seq_max=n_parallel,
            n_threads=n_threads,
        )
        self.ctx = Context(self.model, **ctx_args)
        self.n_batch = self.ctx.n_batch
        self.batch = Batch(self.n_batch)
        self.vocab = self.model.vocab

        self.draft_model: Model | None = None
        self.draft_ctx: Context | None = None
        self.n_draft = 0
        if draft_model_path is not None:
            self.draft_model = Model(draft_model_path, n_gpu_layers=n_gpu_layers)
            if self.draft_model.n_vocab != self.model.n_vocab or self.draft_model.vocab.bos != self.vocab.bos:
                raise ValueError("the draft model's vocab differs from the target model's")
            self.draft_ctx = Context(self.draft_model, **ctx_args)
            self.draft_batch = Batch(self.n_batch)
            # every generating slot sends its last token plus its drafts in the shared batch
            self.n_draft = max(0, min(n_draft, self.n_batch // n_parallel - 1))

        self.info = {
            "model_path": str(model_path),
            "model": os.path.basename(str(model_path)),
            "description": self.model.description(),
            "n_vocab": self.model.n_vocab,
            "n_ctx_train": self.model.n_ctx_train,
            "n_embd": self.model.n_embd,
            "n_params": self.model.n_params,
            "n_ctx_slot": self.n_ctx_slot,
            "n_parallel": n_parallel,
            "chat_template": self.model.chat_template() or "chatml",
            "speculative": draft_model_path is not None,
        }
        self.slots = [Slot(i) for i in range(n_parallel)]
        self.queue = ServerQueue()
        self.responses = ServerResponse()
        self.queue.on_new_task(self._on_task)
        self.queue.on_update_slots(self._update_slots)

        self._loop_ident: int | None = None
        self._loop_thread: threading.Thread | None = None
        self._loop_error: BaseException | None = None
        self._running = threading.Event()
        self._stats_lock = threading.Lock()
        self._totals = dict(
            prompt_tokens=0,
            prompt_seconds=0.0,
            predicted_tokens=0,
            predicted_seconds=0.0,
            n_decode=0,
            draft_tokens=0,
            draft_accepted=0,
            requests_finished=0,
            requests_failed=0,
        )
        self._snapshot: dict[str, Any] = {}
        self._t_start = time.time()
        self._publish_stats()

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

    # --- client side (any thread) -----------------------------------------------------------
    def submit(self, request: CompletionRequest | dict[str, Any], poll_interval_s: float = 0.5) -> ResponseReader:
        """Post a completion; read partial and final results from the returned reader."""
        reader = ResponseReader(self.queue, self.responses, poll_interval_s)
        self.queue.wait_until_no_sleep()
        reader.post_task(Task(TaskType.COMPLETION, payload=request))
        return reader

    def complete(self, request: CompletionRequest | dict[str, Any], timeout_s: float = 300) -> dict[str, Any]:
        """Post a completion and wait for its final result (raises on an error result)."""
        with self.submit(request) as reader:
            deadline = time.monotonic() + timeout_s
            while True:
                res = reader.next(lambda: time.monotonic() > deadline)
                if res is None:
                    raise TimeoutError("completion timed out")
                if res.is_error:
                    raise ValueError(res.payload["error"])
                if res.is_final:
                    return res.payload

    def call(self, task_type: TaskType, payload: Any = None, timeout_s: float = 60) -> Result:
        """Post one task and wait for its single result."""
        with ResponseReader(self.queue, self.responses, poll_interval_s=timeout_s) as reader:
            reader.post_task(Task(task_type, payload=payload))
            res = reader.next(lambda: True)
            if res is None:
                raise TimeoutError(f"{task_type.name} task timed out")
            return res

    def metrics(self, timeout_s: float = 60) -> dict[str, Any]:
        return self.call(TaskType.METRICS, timeout_s=timeout_s).payload

    # --- tasks (loop thread, or the worker while yielding) -----------------------------------
    def _on_task(self, task: Task, is_yielding: bool) -> bool:
        if task.type is TaskType.METRICS:  # read-only: answered on the worker during a yield (S3)
            self.responses.send(Result(task.id, self.snapshot()))
            return True
        if task.type is TaskType.CANCEL:
            slot = next((s for s in self.slots if s.busy and s.id_task == task.id_target), None)
            if slot is None:
                # the queue already dropped it if it was waiting; tell any waiter it is over
                self.responses.send(Result(task.id_target, {"error": "cancelled", "code": 499}, is_error=True))
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
            self._send_error(task.id, f"{type(exc).__name__}: {exc}", 500)
        return True

    def _send_error(self, id_task: int, message: str, code: int) -> None:
        with self._stats_lock:
            self._totals["requests_failed"] += 1
        self.responses.send(Result(id_task, {"error": message, "code": code}, is_error=True))

    def _check_loop_thread(self) -> None:
        if self._loop_ident is None:
            self._loop_ident = threading.get_ident()
        elif threading.get_ident() != self._loop_ident:
            raise RuntimeError("llama.cpp touched off the server loop thread")

    def _handle_completion(self, task: Task) -> None:
        req = task.payload
        if not isinstance(req, CompletionRequest):
            if not isinstance(req, dict):
                raise ValueError("a completion needs a CompletionRequest or a dict")
            req = CompletionRequest.from_dict(req)
        else:
            req.validate()
        if req.messages is not None:
            req.prompt = self.model.apply_chat_template(req.messages)
        if not req.prompt:
            raise ValueError("the prompt is empty")
        if isinstance(req.prompt, str):
            tokens = self.vocab.tokenize(req.prompt, add_special=req.add_special, parse_special=req.parse_special)
        else:
            tokens = list(req.prompt)
            bad = [t for t in tokens if not 0 <= t < self.vocab.n_tokens]
            if bad:
                raise ValueError(f"token id {bad[0]} out of range [0, {self.vocab.n_tokens})")
        if len(tokens) >= self.n_ctx_slot:
            raise ValueError(
                f"the request exceeds the available context size: {len(tokens)} prompt tokens, "
                f"slot context {self.n_ctx_slot}"
            )
        if not -1 <= req.id_slot < self.n_parallel:
            raise ValueError(f"id_slot {req.id_slot} out of range [-1, {self.n_parallel})")
        slot = self._choose_slot(req, tokens)
        if slot is None:
            task.id_slot = req.id_slot
            self.queue.defer(task)  # resumed by pop_deferred_task when a slot frees
            self._publish_stats()
            return
        self._assign(slot, task.id, req, tokens)

    def _choose_slot(self, req: CompletionRequest, tokens: list[int]) -> Slot | None:
        if req.id_slot >= 0:
            slot = self.slots[req.id_slot]
            return None if slot.busy else slot
        idle = [s for s in self.slots if not s.busy]
        if not idle:
            return None
        # prompt cache: the idle slot that already holds the longest prefix of this prompt
        return max(idle, key=lambda s: (common_prefix(s.cache_tokens, tokens) if req.cache_prompt else 0, -s.id))

    def _assign(self, slot: Slot, id_task: int, req: CompletionRequest, tokens: list[int]) -> None:
        n_keep = common_prefix(slot.cache_tokens, tokens) if req.cache_prompt else 0
        n_keep = min(n_keep, len(tokens) - 1)  # evaluate at least the last prompt token, for its logits
        if not self.ctx.seq_rm(slot.id, n_keep, -1):
            self.ctx.seq_rm(slot.id)
            n_keep = 0
        if self.draft_ctx is not None:
            self.draft_ctx.seq_rm(slot.id)
            self.draft_ctx.seq_rm(slot.id, n_keep, -1)
        slot.id_task = id_task
        slot.request = req
        slot.prompt_tokens = tokens
        slot.cache_tokens = tokens[:n_keep]
        slot.n_prompt_done = slot.n_prompt_cached = n_keep
        slot.generated = []
        slot.text = TextStream(req.stop)
        slot.sampler = Sampler.from_params(
            self.vocab,
            temperature=req.temperature,
            top_k=req.top_k,
            top_p=req.top_p,
            min_p=req.min_p,
            seed=req.seed,
            repeat_last_n=req.repeat_last_n,
            repeat_penalty=req.repeat_penalty,
            frequency_penalty=req.frequency_penalty,
            presence_penalty=req.presence_penalty,
        )
        slot.n_draft_total = slot.n_draft_accepted = 0
        slot.t_start = now()
        slot.t_prompt_done = 0.0
        slot.state = SlotState.PROCESSING_PROMPT
        if self.draft_ctx is not None and n_keep:
            self._draft_prefill(slot, n_keep)
        self._publish_stats()

    def _draft_prefill(self, slot: Slot, n_keep: int) -> None:
        # the draft context lost this sequence when the slot was cleared: give it the cached prefix
        assert self.draft_ctx is not None
        for start in range(0, n_keep, self.n_batch):
            self.draft_batch.clear()
            self.draft_batch.add_sequence(slot.cache_tokens[start : start + self.n_batch], start, slot.id, False)
            self.draft_ctx.decode(self.draft_batch)

    def _handle_slot_save(self, task: Task) -> None:
        slot, path = self._slot_and_path(task)
        n_bytes = self.ctx.save_seq_state_file(path, slot.id, slot.cache_tokens)
        self.responses.send(
            Result(
                task.id,
                {"id_slot": slot.id, "filename": str(path), "n_saved": len(slot.cache_tokens), "n_written": n_bytes},
            )
        )

    def _handle_slot_restore(self, task: Task) -> None:
        slot, path = self._slot_and_path(task)
        self.ctx.seq_rm(slot.id)
        slot.cache_tokens = self.ctx.load_seq_state_file(path, slot.id, self.n_ctx_slot)
        if self.draft_ctx is not None:
            self.draft_ctx.seq_rm(slot.id)
            self._draft_prefill(slot, len(slot.cache_tokens))
        self.responses.send(
            Result(task.id, {"id_slot": slot.id, "filename": str(path), "n_restored": len(slot.cache_tokens)})
        )

    def _handle_slot_erase(self, task: Task) -> None:
        slot, _ = self._slot_and_path(task, need_path=False)
        n = len(slot.cache_tokens)
        self.ctx.seq_rm(slot.id)
        if self.draft_ctx is not None:
            self.draft_ctx.seq_rm(slot.id)
        slot.cache_tokens = []
        self.responses.send(Result(task.id, {"id_slot": slot.id, "n_erased": n}))

    def _slot_and_path(self, task: Task, need_path: bool = True) -> tuple[Slot, Any]:
        payload = task.payload or {}
        i = payload.get("id_slot", task.id_slot)
        if not isinstance(i, int) or not 0 <= i < self.n_parallel:
            raise ValueError(f"id_slot {i!r} out of range [0, {self.n_parallel})")
        slot = self.slots[i]
        if slot.busy:
            raise ValueError(f"slot {i} is busy")
        path = payload.get("filename")
        if need_path and not path:
            raise ValueError("a slot save/restore needs a 'filename'")
        return slot, path

    def _handle_tokenize(self, task: Task) -> None:
        p = task.payload or {}
        content = p.get("content")
        if not isinstance(content, str):
            raise ValueError("'content' must be a string")
        tokens = self.vocab.tokenize(
            content, add_special=bool(p.get("add_special", False)), parse_special=bool(p.get("parse_special", True))
        )
        out: dict[str, Any] = {"tokens": tokens}
        if p.get("with_pieces"):
            out["tokens"] = [
                {"id": t, "piece": self.vocab.token_to_piece(t).decode("utf-8", "replace")} for t in tokens
            ]
        self.responses.send(Result(task.id, out))

    def _handle_detokenize(self, task: Task) -> None:
        tokens = (task.payload or {}).get("tokens")
        if not isinstance(tokens, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in tokens):
            raise ValueError("'tokens' must be a list of token ids")
        self.responses.send(Result(task.id, {"content": self.vocab.detokenize(tokens)}))

    _HANDLERS: dict[TaskType, Callable[[ServerContext, Task], None]] = {
        TaskType.TOKENIZE: _handle_tokenize,
        TaskType.DETOKENIZE: _handle_detokenize,
        TaskType.COMPLETION: _handle_completion,
        TaskType.SLOT_SAVE: _handle_slot_save,
        TaskType.SLOT_RESTORE: _handle_slot_restore,
        TaskType.SLOT_ERASE: _handle_slot_erase,
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
        self._publish_stats()
        if any(s.busy for s in self.slots):
            # keep the loop turning while slots work; tasks posted meanwhile are handled first
            self.queue.post(Task(TaskType.NEXT_RESPONSE))

    def _step(self) -> None:
        generating = [s for s in self.slots if s.state is SlotState.GENERATING]
        spec = self.draft_ctx is not None
        if spec and generating:
            # S2: drafting is yielded only when a slot drafts
            self.queue.yield_to_queue(lambda: self._draft(generating))

        batch = self.batch
        batch.clear()
        if spec:
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
            chunk = s.prompt_tokens[start : start + room]
            last = start + len(chunk) == len(s.prompt_tokens)
            batch.add_sequence(chunk, start, s.id, logits_last=last)
            if spec:
                self.draft_batch.add_sequence(chunk, start, s.id, logits_last=False)
            s.i_batch = batch.n_tokens - 1
            chunks[s.id] = len(chunk)

        t0 = now()
        try:
            if self.yield_decode:
                self.queue.yield_to_queue(self._decode)  # S1: decode and sync inside the yield
            else:
                self._decode()
        except DecodeError as exc:
            for s in self.slots:
                if s.busy and (s.id in chunks or s in generating):
                    self._fail(s, str(exc))
            return
        dt = now() - t0
        with self._stats_lock:
            self._totals["n_decode"] += 1
            if chunks:
                self._totals["prompt_tokens"] += sum(chunks.values())
                self._totals["prompt_seconds"] += dt
            if generating:
                self._totals["predicted_seconds"] += dt

        for s in self.slots:
            if s.id in chunks:
                n = chunks[s.id]
                s.cache_tokens.extend(s.prompt_tokens[s.n_prompt_done : s.n_prompt_done + n])
                s.n_prompt_done += n
                if s.n_prompt_done == len(s.prompt_tokens):
                    s.state = SlotState.GENERATING
                    s.t_prompt_done = now()
                    self._accept(s, s.sampler.sample(self.ctx, s.i_batch))

        for s in generating:
            if not s.busy:
                continue
            drafts, s.drafts = s.drafts, []
            s.cache_tokens.append(s.last_token)
            accepted = []
            for j in range(len(drafts) + 1):  # verify the drafts: keep the longest matching prefix
                tok = s.sampler.sample(self.ctx, s.i_batch + j)
                accepted.append(tok)
                if j == len(drafts) or tok != drafts[j]:
                    break
            s.cache_tokens.extend(drafts[: len(accepted) - 1])
            # every draft accepted: the draft model never saw its own last draft
            s.draft_kv_short = bool(drafts) and len(accepted) - 1 == len(drafts)
            if drafts:
                s.n_draft_total += len(drafts)
                s.n_draft_accepted += len(accepted) - 1
                with self._stats_lock:
                    self._totals["draft_tokens"] += len(drafts)
                    self._totals["draft_accepted"] += len(accepted) - 1
            for tok in accepted:
                self._accept(s, tok)
                if not s.busy:
                    break

        if spec and generating:
            # S2: processing is yielded when speculation is on; a failure raises after the yield
            ok = self.queue.yield_to_queue(lambda: self._spec_process(generating))
            if not ok:
                raise RuntimeError("failed to process speculative batch")

    def _decode(self) -> None:
        self.ctx.decode(self.batch)
        self.ctx.synchronize()
        if self.draft_ctx is not None and self.draft_batch.n_tokens:
            self.draft_ctx.decode(self.draft_batch)

    def _draft(self, slots: list[Slot]) -> None:
        """Draft tokens for each generating slot with the draft model (greedy); runs in a yield."""
        assert self.draft_ctx is not None
        b = self.draft_batch
        for s in slots:
            pos = len(s.cache_tokens)
            req = s.request
            assert req is not None
            budget = self.n_draft
            if req.n_predict >= 0:
                budget = min(budget, req.n_predict - len(s.generated) - 1)
            budget = max(0, min(budget, self.n_ctx_slot - pos - 2))
            drafts: list[int] = []
            tok = s.last_token
            for i in range(max(budget, 1)):  # at least the last token, to keep the draft KV in step
                b.clear()
                b.add(tok, pos + i, s.id, logits=True)
                self.draft_ctx.decode(b)
                if i < budget:
                    tok = int(np.argmax(self.draft_ctx.logits()))
                    drafts.append(tok)
            s.drafts = drafts

    def _spec_process(self, slots: list[Slot]) -> bool:
        """Bring both KV caches in line with the accepted tokens; runs in a yield."""
        assert self.draft_ctx is not None
        try:
            for s in slots:
                keep = len(s.cache_tokens)
                if s.draft_kv_short:
                    b = self.draft_batch
                    b.clear()
                    b.add(s.cache_tokens[-1], keep - 1, s.id, logits=False)
                    self.draft_ctx.decode(b)
                self.ctx.seq_rm(s.id, keep, -1)
                self.draft_ctx.seq_rm(s.id, keep, -1)
            return True
        except DecodeError:
            log.exception("speculative processing failed")
            return False

    def _accept(self, s: Slot, tok: int) -> None:
        """A new token for slot ``s``: stream it, check the stop conditions, maybe finish."""
        req = s.request
        assert req is not None
        s.generated.append(tok)
        s.last_token = tok
        stop = StopType.NONE
        if not req.ignore_eos and self.vocab.is_eog(tok):
            stop = StopType.EOS
        else:
            s.text.push(self.vocab.token_to_piece(tok))
            if s.text.find_stop() >= 0:
                stop = StopType.WORD
        if stop is StopType.NONE and req.n_predict >= 0 and len(s.generated) >= req.n_predict:
            stop = StopType.LIMIT
        if stop is StopType.NONE and len(s.cache_tokens) + 1 >= self.n_ctx_slot:
            stop = StopType.LIMIT  # the slot's context is full
        if req.stream and stop is StopType.NONE:
            self.responses.send(
                Result(
                    s.id_task,
                    {"content": s.text.take_sendable(False), "tokens": [tok], "stop": False, "id_slot": s.id},
                    is_final=False,
                )
            )
        if stop is not StopType.NONE:
            self._finish(s, stop)

    def _finish(self, s: Slot, stop: StopType, cancelled: bool = False) -> None:
        if cancelled:
            self.responses.send(Result(s.id_task, {"error": "cancelled", "code": 499}, is_error=True))
        else:
            self.responses.send(Result(s.id_task, self._final_payload(s, stop)))
        with self._stats_lock:
            self._totals["predicted_tokens"] += len(s.generated)
            self._totals["requests_finished"] += 1
        self._release(s)

    def _final_payload(self, s: Slot, stop: StopType) -> dict[str, Any]:
        req = s.request
        assert req is not None
        t_end = now()
        n_pred = len(s.generated)
        prompt_ms = ((s.t_prompt_done or t_end) - s.t_start) * 1e3
        gen_ms = (t_end - s.t_prompt_done) * 1e3 if s.t_prompt_done else 0.0
        n_prompt = len(s.prompt_tokens) - s.n_prompt_cached
        return {
            "content": s.text.take_sendable(True),
            "tokens": [] if req.stream else list(s.generated),
            "id_slot": s.id,
            "stop": True,
            "stop_type": stop.value,
            "stopping_word": s.text.stopping_word,
            "tokens_predicted": n_pred,
            "tokens_evaluated": len(s.prompt_tokens),
            "tokens_cached": s.n_prompt_cached,
            "truncated": False,
            "timings": {
                "cache_n": s.n_prompt_cached,
                "prompt_n": n_prompt,
                "prompt_ms": prompt_ms,
                "prompt_per_second": n_prompt / prompt_ms * 1e3 if prompt_ms > 0 else 0.0,
                "predicted_n": n_pred,
                "predicted_ms": gen_ms,
                "predicted_per_second": n_pred / gen_ms * 1e3 if gen_ms > 0 else 0.0,
                "draft_n": s.n_draft_total,
                "draft_n_accepted": s.n_draft_accepted,
            },
        }

    def _fail(self, s: Slot, message: str) -> None:
        self._send_error(s.id_task, message, 500)
        self.ctx.seq_rm(s.id)
        if self.draft_ctx is not None:
            self.draft_ctx.seq_rm(s.id)
        s.cache_tokens = []
        self._release(s)

    def _release(self, s: Slot) -> None:
        s.reset()
        self.queue.pop_deferred_task(s.id)
        self._publish_stats()

    # --- metrics ----------------------------------------------------------------------------
    def _publish_stats(self) -> None:
        """Loop thread: a consistent snapshot that the worker can hand out during a decode."""
        slots = [
            {
                "id": s.id,
                "state": s.state.value,
                "id_task": s.id_task,
                "n_prompt_tokens": len(s.prompt_tokens),
                "n_decoded": len(s.generated),
                "n_cached": len(s.cache_tokens),
                "n_ctx": self.n_ctx_slot,
            }
            for s in self.slots
        ]
        with self._stats_lock:
            self._snapshot = {
                "slots": slots,
                "n_slots": self.n_parallel,
                "requests_processing": sum(s["state"] != "idle" for s in slots),
                "kv_cells_used": sum(s["n_cached"] for s in slots),
                "n_ctx": self.n_ctx_slot * self.n_parallel,
                **self._totals,
            }

    def snapshot(self) -> dict[str, Any]:
        """The latest published metrics plus what the queue knows now; safe from any thread."""
        with self._stats_lock:
            snap = dict(self._snapshot)
        snap["requests_deferred"] = self.queue.n_deferred
        snap["uptime_s"] = time.time() - self._t_start
        snap["is_sleeping"] = self.queue.is_sleeping
        return snap
