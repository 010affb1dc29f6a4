"""One step of continuous batching, on the loop thread: fill a batch from every busy slot, decode
it inside ``yield_to_queue`` (the worker answers meanwhile), then sample, stream and finish.

Mixed into ``ServerContext`` (``context.py``), whose state it uses: the slots, the context, the
queue and the result queue. The KV-cache upkeep lives here too: context shift, evicting idle
slots' caches when the cache is full.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..llama import DecodeError, LlamaError, NoKvSlotError
from ..queue import Result, Task, TaskType
from .embedding import EmbeddingTask, normalize
from .media import is_media_cell
from .metrics import PhaseClock
from .outputs import SlotOutputs
from .probs import prompt_chunk_probs
from .results import progress_payload
from .slot import Slot, SlotState, StopType, now
from .task import CompletionTask

if TYPE_CHECKING:
    from ..llama import Batch, Context, Vocab
    from ..mtmd import Chunk, Projector
    from ..queue import ServerQueue, ServerResponse
    from .checkpoints import CheckpointPolicy
    from .lora import LoraSet
    from .metrics import Stats
    from .speculative import NoDraft

__all__ = ["BatchLoop"]

log = logging.getLogger("pyllama_yield.server")


class BatchLoop(SlotOutputs):
    """Mixed into ``ServerContext``; these names come from it."""

    slots: list[Slot]
    ctx: Context
    drafter: NoDraft
    batch: Batch
    vocab: Vocab
    queue: ServerQueue
    responses: ServerResponse
    stats: Stats
    loras: LoraSet
    projector: Projector | None  # --mmproj: media in prompts
    n_ctx_slot: int
    pooling: str
    context_shift: bool
    checkpoints: CheckpointPolicy
    yield_decode: bool
    _running: threading.Event
    clock: PhaseClock  # where the loop thread's time goes
    _decoding = False  # this step reached its decode (and so delivered what was held)
    _check_loop_thread: Callable[[], None]
    remember_media: Callable[[Chunk], None]
    _send_error: Callable[..., None]

    def _update_slots(self) -> None:
        self._check_loop_thread()
        self._running.set()
        if not any(s.busy for s in self.slots):
            self.responses.flush()  # what the last step (or a task since) held goes out now
            return
        self.clock.start()
        # This thread's results are held and go out together (one wake per reader) just before
        # the next decode, while this thread holds no GIL; or at the end of a step without one.
        self.responses.hold()
        self._decoding = False
        try:
            self._step()
        except Exception as exc:
            log.exception("update_slots failed")
            for slot in self.slots:
                if slot.busy:
                    self._fail(slot, f"{type(exc).__name__}: {exc}")
        self.clock.lap("other")
        busy = any(s.busy for s in self.slots)
        if not busy or not self._decoding:
            self.responses.flush()
            self.clock.lap("post")
        self.stats.publish()
        self.clock.lap("publish")
        self.stats.add_loop(self.clock.take())
        if busy:
            # keep the loop turning while slots work; tasks posted meanwhile are handled first
            self.queue.post(Task(TaskType.NEXT_RESPONSE))

    def _deliver_before_decode(self) -> None:
        """The results held since the last decode go out now: the GIL is about to be released for
        the whole decode, so the readers they wake never make this thread wait for it."""
        self.responses.flush(keep_holding=True)
        self._decoding = True
        self.clock.lap("post")

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
        for ctx in self.kv_contexts():  # the draft's cache holds the same positions
            ctx.seq_rm(s.id, n_keep, n_keep + n_discard)
            ctx.seq_add(s.id, n_keep + n_discard, n_past, -n_discard)
        del s.cache_tokens[n_keep : n_keep + n_discard]
        s.checkpoints = []  # their positions moved
        s.truncated = True

    def _step(self) -> None:
        generating = [s for s in self.slots if s.state is SlotState.GENERATING]
        # one decode applies one set of LoRA scales: that of the first slot, others wait a step
        lora = next((s.lora for s in [*generating, *self.slots] if s.busy), ())
        generating = [s for s in generating if s.lora == lora]
        if self.context_shift:
            for s in generating:
                if len(s.cache_tokens) + 1 >= self.n_ctx_slot:
                    self._shift_context(s)
        spec = self.drafter.active and bool(generating)
        self.clock.lap("other")
        if self.projector is not None:
            self._eval_media()
        if spec:  # S2: drafting is yielded only when a slot drafts
            self._deliver_before_decode()
            self.queue.yield_to_queue(lambda: self.drafter.draft(generating, self.n_ctx_slot))
            self.clock.lap("draft")
        chunks = self._fill_batch(generating, lora)
        self.loras.apply(self.ctx, lora)
        self.clock.lap("fill")
        self._deliver_before_decode()
        t0 = now()
        try:
            if self.yield_decode:
                self.queue.yield_to_queue(self._decode)  # S1: decode and sync inside the yield
            else:
                self._decode()
            self.clock.lap("decode")
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
        self.stats.add(n_busy_slots=sum(s.busy for s in self.slots), n_decode=1)
        if chunks:
            self.stats.add_prompt(sum(chunks.values()), now() - t0)
        for s in self.slots:
            if s.id in chunks:
                self._prompt_chunk_done(s, chunks[s.id])
        self._sample_generating(generating)
        if spec:
            self.clock.lap("other")
            # S2: processing is yielded when speculation is on; a failure raises after the yield
            if not self.queue.yield_to_queue(lambda: self.drafter.process(self.ctx, generating)):
                raise RuntimeError("failed to process speculative batch")
            self.clock.lap("draft")

    def _fill_batch(self, generating: list[Slot], lora: tuple[float, ...]) -> dict[int, int]:
        """Generating slots first (one token plus drafts each), then prompt chunks in the room left."""
        batch = self.batch
        batch.clear()
        self.drafter.start_batch()
        for s in generating:
            s.i_batch = batch.n_tokens
            pos = len(s.cache_tokens)
            batch.add(s.last_token, pos, s.id, logits=True)
            for j, d in enumerate(s.drafts):
                batch.add(d, pos + 1 + j, s.id, logits=True)
        chunks: dict[int, int] = {}
        for s in self.slots:
            if s.state is not SlotState.PROCESSING_PROMPT or s.lora != lora:
                continue
            room = batch.capacity - batch.n_tokens
            if room <= 0:
                break
            start = s.n_prompt_done
            media = s.task.media if isinstance(s.task, (CompletionTask, EmbeddingTask)) else {}
            if start in media:  # its medium failed or waits for the next step: no text before it
                continue
            end = min((m for m in media if m > start), default=len(s.prompt_tokens))  # the next medium
            if isinstance(s.task, EmbeddingTask):  # up to the next medium, whole, every token an output
                if end - start > room:
                    continue
                for j in range(start, end):
                    batch.add(s.prompt_tokens[j], j, s.id, logits=True)
                s.i_batch = batch.n_tokens - 1
                chunks[s.id] = end - start
                continue
            n_prompt = len(s.prompt_tokens)
            stop = self.checkpoints.chunk_end(start, start + min(room, end - start), n_prompt)
            chunk = s.prompt_tokens[start:stop]
            last = stop == n_prompt
            if not (start and is_media_cell(s.prompt_tokens[start - 1])):  # none right after a medium
                self.checkpoints.maybe_create(self.ctx, s, start, stop, n_prompt)
            s.i_batch_first = batch.n_tokens
            every = s.completion.params.prompt_logprobs >= 0  # the logits of each prompt token
            batch.add_sequence(chunk, start, s.id, logits_last=last, logits_all=every)
            self.drafter.add_prompt_chunk(chunk, start, s.id)
            s.i_batch = batch.n_tokens - 1
            chunks[s.id] = len(chunk)
        return chunks

    def _eval_media(self) -> None:
        """Slots whose prompt goes on with a medium get it into the KV cache now, before this
        step's batch (their text after it joins that batch): encoded and decoded by mtmd inside a
        yield, as llama-server processes media chunks, so the worker answers meanwhile."""
        projector = self.projector
        assert projector is not None
        for s in self.slots:
            task = s.task
            if s.state is not SlotState.PROCESSING_PROMPT or not isinstance(task, (CompletionTask, EmbeddingTask)):
                continue
            while (chunk := task.media.get(s.n_prompt_done)) is not None:
                pos = s.n_prompt_done
                self._deliver_before_decode()
                t0 = now()
                work = functools.partial(projector.eval_chunk, self.ctx, chunk, pos, s.id)
                try:
                    self.queue.yield_to_queue(work)
                except LlamaError as exc:
                    self._fail(s, f"failed to process mtmd chunk: {exc}")
                    break
                self.clock.lap("decode")
                self.remember_media(chunk.placeholder())
                self.stats.add_prompt(chunk.n_tokens, now() - t0)
                s.cache_tokens.extend(s.prompt_tokens[pos : pos + chunk.n_tokens])
                s.n_prompt_done += chunk.n_tokens
                s.n_prompt_processed += chunk.n_tokens

    def clear_slot_cache(self, s: Slot) -> None:
        """Drop what slot ``s`` holds in the KV cache (the draft model's too)."""
        for ctx in self.kv_contexts():
            ctx.seq_rm(s.id)
        s.forget_cache()

    def kv_contexts(self) -> tuple[Context, ...]:
        """The contexts whose KV caches hold the slots' sequences: the target's, and the draft's."""
        return (self.ctx, *self.drafter.contexts)

    def _clear_idle_caches(self) -> bool:
        """Free the KV cells idle slots keep for prompt reuse; False when there were none."""
        idle = [s for s in self.slots if not s.busy and s.cache_tokens]
        for s in idle:
            self.clear_slot_cache(s)
        return bool(idle)

    def _decode(self) -> None:
        self.ctx.decode(self.batch)
        self.ctx.synchronize()
        self.drafter.decode_batch()

    def _prompt_chunk_done(self, s: Slot, n: int) -> None:
        if isinstance(s.task, EmbeddingTask):
            s.n_prompt_done += n
            if s.n_prompt_done == len(s.prompt_tokens):  # else a medium comes next (_eval_media)
                self._send_embedding(s, n)
            return
        if s.completion.params.prompt_logprobs >= 0:
            s.prompt_probs.extend(prompt_chunk_probs(self.ctx, s, n, self.vocab.token_to_piece))
        s.cache_tokens.extend(s.prompt_tokens[s.n_prompt_done : s.n_prompt_done + n])
        s.n_prompt_done += n
        s.n_prompt_processed += n
        s.t_prompt_last = now()  # after the decode's sync
        task = s.task
        assert task is not None
        if s.n_prompt_done < len(s.prompt_tokens):
            if task.params.return_progress and task.params.stream:
                self.responses.send(Result(s.id_task, progress_payload(s), is_final=False))
            return
        s.state = SlotState.GENERATING
        if task.params.return_progress and task.params.stream:
            self.responses.send(Result(s.id_task, progress_payload(s), is_final=False))
        if task.params.n_predict == 0:  # only evaluate the prompt into the cache
            self._finish(s, StopType.LIMIT)
            return
        self._sample_and_accept(s, s.i_batch)
        # A first token goes out at once, as llama-server sends each slot's as soon as it is
        # sampled: after a burst of prompts, the first slots' readers need not wait for the
        # others' sampling (whose first samples may fault in fresh pages: ~9 ms each)
        self.responses.flush(keep_holding=True)
        self.clock.lap("post")

    def _send_embedding(self, s: Slot, n_last: int) -> None:
        """The answer of an embedding task whose last batch (``n_last`` tokens: the text after its
        last medium, if it has media) was just decoded."""
        et = s.task
        assert isinstance(et, EmbeddingTask)
        n = len(s.prompt_tokens)
        if et.rerank:
            score = float(self.ctx.embeddings_seq(s.id)[0])
            payload = {"index": et.index, "score": score, "tokens_evaluated": n}
            self.responses.send(Result(s.id_task, payload))
        elif self.pooling == "none":  # one vector per token of the last batch, as they are
            vectors = [self.ctx.embeddings(s.i_batch - n_last + 1 + j).tolist() for j in range(n_last)]
        else:
            vectors = [normalize(self.ctx.embeddings_seq(s.id), et.normalize).tolist()]
        if not et.rerank:
            self.responses.send(Result(s.id_task, {"index": et.index, "embedding": vectors, "tokens_evaluated": n}))
        self.stats.add(prompt_tokens=0, requests_finished=1)
        self.ctx.seq_rm(s.id)
        s.cache_tokens = []
        self._release(s)
