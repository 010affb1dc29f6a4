"""One step of continuous batching, on the loop thread: fill a batch from every busy slot, decode
it inside ``yield_to_queue`` (the worker answers meanwhile), then hand the outputs on. Media are
evaluated, and drafts made and processed, inside yields too. Context shift, and freeing idle
slots' caches when the KV cache is full, happen here.
"""

from __future__ import annotations

import functools
import logging

from ..common import decode_and_sample
from ..llama import Batch, DecodeError, LlamaError, NoKvSlotError
from ..mtmd import Projector
from ..queue import ServerQueue, Task, TaskType, ring
from .checkpoints import CheckpointPolicy
from .embedding import EmbeddingTask
from .emitter import SlotEmitter
from .kv_caches import KvCaches
from .lora import LoraSet
from .media import MediaMemory, is_media_cell
from .metrics import PhaseClock, Stats
from .outputs import DecodeOutputs
from .preemption import Preemption
from .slot import Slot, SlotState, StopType, now
from .task import CompletionTask

__all__ = ["BatchStep"]

log = logging.getLogger("pyllama_yield.server")

PUBLISH_S = 0.005  # while every busy slot generates, /slots and /metrics lag the loop by at most this


class BatchStep:
    """The step the queue's loop runs whenever slots are busy (``update_slots``)."""

    def __init__(
        self,
        slots: list[Slot],
        kv: KvCaches,
        outputs: DecodeOutputs,
        emitter: SlotEmitter,
        queue: ServerQueue,
        stats: Stats,
        clock: PhaseClock,
        *,
        preemption: Preemption,
        batch: Batch,
        loras: LoraSet,
        checkpoints: CheckpointPolicy,
        projector: Projector | None,
        media: MediaMemory,
        n_ctx_slot: int,
        context_shift: bool,
        yield_decode: bool,
        add_bos: bool,
    ) -> None:
        self._slots, self._kv, self._outputs, self._emitter = slots, kv, outputs, emitter
        self._queue, self._stats, self._clock = queue, stats, clock
        self._preemption = preemption
        self._batch, self._loras, self._checkpoints = batch, loras, checkpoints
        self._projector, self._media = projector, media
        self._n_ctx_slot, self._context_shift = n_ctx_slot, context_shift
        self._yield_decode, self._add_bos = yield_decode, add_bos
        self._decoding = False  # this step reached its decode (and so delivered what was held)
        self._to_sample: list[Slot] = []  # the slots the decode call samples: generating, no drafts
        self._sampled: dict[int, int | LlamaError] = {}  # what it sampled, by slot id

    def run(self) -> None:
        self._preemption.run()  # a more urgent task waiting takes a less urgent one's slot first
        if not any(s.busy for s in self._slots):
            self._emitter.flush()  # what the last step (or a task since) held goes out now
            return
        self._clock.start()
        # a step that may start a slot's generation publishes at its end; others at most so often
        publish_within_s = 0.0 if any(s.state is SlotState.PROCESSING_PROMPT for s in self._slots) else PUBLISH_S
        # This thread's results are held and go out together (one wake per reader) just before
        # the next decode, while this thread holds no GIL; or at the end of a step without one.
        self._emitter.hold()
        self._decoding = False
        try:
            self._step()
        except Exception as exc:
            log.exception("update_slots failed")
            for slot in self._slots:
                if slot.busy:
                    self._emitter.fail(slot, f"{type(exc).__name__}: {exc}")
        self._clock.lap("other")
        busy = any(s.busy for s in self._slots)
        if not busy or not self._decoding:
            self._emitter.flush()
            self._clock.lap("post")
        self._stats.publish(publish_within_s)
        self._clock.lap("publish")
        self._stats.add_loop(self._clock.take())
        if busy:
            # keep the loop turning while slots work; tasks posted meanwhile are handled first
            self._queue.post(Task(TaskType.NEXT_RESPONSE))

    def _deliver_before_decode(self, rung_by_decode: bool = False) -> None:
        """The results held since the last decode go out now: the GIL is about to be released for
        the whole decode, so the readers they wake never make this thread wait for it. Readers
        woken through a doorbell are rung by the decode call itself (``rung_by_decode``), so that
        their loop cannot take the GIL before the decode has let it go."""
        self._emitter.flush(keep_holding=True, defer_rings=rung_by_decode)
        self._decoding = True
        self._clock.lap("post")

    def _shift_context(self, s: Slot) -> None:
        """The slot's context is full: drop ``n_discard`` tokens after the first ``n_keep`` (half of
        the rest by default), as llama-server's context shift does."""
        p = s.completion.params
        n_keep = len(s.prompt.tokens) if p.n_keep < 0 else p.n_keep
        n_keep = min(self._n_ctx_slot - 4, n_keep + (1 if self._add_bos else 0))
        n_left = len(s.memory.tokens) - n_keep
        n_discard = max(0, min(p.n_discard or n_left // 2, n_left - 1))
        self._kv.shift(s, n_keep, n_discard)
        s.generated.truncated = True

    def _step(self) -> None:
        generating = [s for s in self._slots if s.state is SlotState.GENERATING]
        # one decode applies one set of LoRA scales: that of the first slot, others wait a step
        lora = next((s.memory.lora for s in [*generating, *self._slots] if s.busy), ())
        generating = [s for s in generating if s.memory.lora == lora]
        if self._context_shift:
            for s in generating:
                if len(s.memory.tokens) + 1 >= self._n_ctx_slot:
                    self._shift_context(s)
        drafter = self._kv.drafter
        spec = drafter.active and bool(generating)
        self._clock.lap("other")
        if self._projector is not None:
            self._eval_media(self._projector)
        if spec:  # S2: drafting is yielded only when a slot drafts
            self._deliver_before_decode()
            self._queue.yield_to_queue(lambda: drafter.draft(generating, self._n_ctx_slot))
            self._clock.lap("draft")
        chunks = self._fill_batch(generating, lora)
        self._loras.apply(self._kv.ctx, lora)
        self._to_sample = [s for s in generating if not s.draft.pending and s.sampler is not None]
        self._clock.lap("fill")
        if not self._decode_batch(chunks, generating):
            return
        for s in self._slots:
            if s.id in chunks:
                self._prompt_chunk_done(s, chunks[s.id])
        self._outputs.accept_generating(generating, self._sampled)
        if spec:
            self._clock.lap("other")
            # S2: processing is yielded when speculation is on; a failure raises after the yield
            if not self._queue.yield_to_queue(lambda: drafter.process(self._kv.ctx, generating)):
                raise RuntimeError("failed to process speculative batch")
            self._clock.lap("draft")

    def _decode_batch(self, chunks: dict[int, int], generating: list[Slot]) -> bool:
        """Decode the filled batch (inside a yield: S1); False when it did not go through and the
        step ends here."""
        self._deliver_before_decode(rung_by_decode=True)
        t0 = now()
        try:
            if self._yield_decode:
                self._queue.yield_to_queue(self._decode)  # S1: decode and sync inside the yield
            else:
                self._decode()
            self._clock.lap("decode")
        except NoKvSlotError:
            # the KV cache is full: first drop what idle slots keep cached and retry the step;
            # else every busy slot fails, as in llama-server (its words, so clients can tell)
            if not self._kv.clear_idle(self._slots):
                for s in self._slots:
                    if s.busy:
                        self._emitter.fail(s, "Context size has been exceeded.")
                return False
            for s in self._slots:  # whatever part of the batch got in goes out again before the retry
                if s.busy:
                    self._kv.ctx.seq_rm(s.id, len(s.memory.tokens), -1)
            return False
        except DecodeError as exc:
            for s in self._slots:
                if s.busy and (s.id in chunks or s in generating):
                    self._emitter.fail(s, str(exc))
            return False
        self._stats.add(n_busy_slots=sum(s.busy for s in self._slots), n_decode=1)
        if chunks:
            self._stats.add_prompt(sum(chunks.values()), now() - t0)
        return True

    def _fill_batch(self, generating: list[Slot], lora: tuple[float, ...]) -> dict[int, int]:
        """Generating slots first (one token plus drafts each), then prompt chunks in the room left."""
        batch = self._batch
        batch.clear()
        self._kv.drafter.start_batch()
        for s in generating:
            s.i_batch = batch.n_tokens
            pos = len(s.memory.tokens)
            batch.add(s.generated.last_token, pos, s.id, logits=True)
            for j, d in enumerate(s.draft.pending):
                batch.add(d, pos + 1 + j, s.id, logits=True)
        chunks: dict[int, int] = {}
        for s in self._slots:
            if s.state is not SlotState.PROCESSING_PROMPT or s.memory.lora != lora:
                continue
            room = batch.capacity - batch.n_tokens
            if room <= 0:
                break
            n = self._add_prompt_chunk(s, room)
            if n:
                chunks[s.id] = n
        return chunks

    def _add_prompt_chunk(self, s: Slot, room: int) -> int:
        """The next part of ``s``'s prompt that fits ``room`` and stops before its next medium
        (an embedding's part is taken whole or not at all); returns its length."""
        batch, start = self._batch, s.prompt.n_done
        media = s.task.media if isinstance(s.task, (CompletionTask, EmbeddingTask)) else {}
        if start in media:  # its medium failed or waits for the next step: no text before it
            return 0
        end = min((m for m in media if m > start), default=len(s.prompt.tokens))  # the next medium
        if isinstance(s.task, EmbeddingTask):  # every token an output
            if end - start > room:
                return 0
            for j in range(start, end):
                batch.add(s.prompt.tokens[j], j, s.id, logits=True)
            s.i_batch = batch.n_tokens - 1
            return end - start
        n_prompt = len(s.prompt.tokens)
        stop = self._checkpoints.chunk_end(start, start + min(room, end - start), n_prompt)
        chunk = s.prompt.tokens[start:stop]
        if not (start and is_media_cell(s.prompt.tokens[start - 1])):  # none right after a medium
            self._checkpoints.maybe_create(self._kv.ctx, s, start, stop, n_prompt)
        s.i_batch_first = batch.n_tokens
        every = s.completion.params.prompt_logprobs >= 0  # the logits of each prompt token
        batch.add_sequence(chunk, start, s.id, logits_last=stop == n_prompt, logits_all=every)
        self._kv.drafter.add_prompt_chunk(chunk, start, s.id)
        s.i_batch = batch.n_tokens - 1
        return len(chunk)

    def _eval_media(self, projector: Projector) -> None:
        """Slots whose prompt goes on with a medium get it into the KV cache now, before this
        step's batch (their text after it joins that batch): encoded and decoded by mtmd inside a
        yield, as llama-server processes media chunks, so the worker answers meanwhile."""
        for s in self._slots:
            task = s.task
            if s.state is not SlotState.PROCESSING_PROMPT or not isinstance(task, (CompletionTask, EmbeddingTask)):
                continue
            while (chunk := task.media.get(s.prompt.n_done)) is not None:
                pos = s.prompt.n_done
                self._deliver_before_decode()
                t0 = now()
                work = functools.partial(projector.eval_chunk, self._kv.ctx, chunk, pos, s.id)
                try:
                    self._queue.yield_to_queue(work)
                except LlamaError as exc:
                    self._emitter.fail(s, f"failed to process mtmd chunk: {exc}")
                    break
                self._clock.lap("decode")
                self._media.remember(chunk.placeholder())
                self._stats.add_prompt(chunk.n_tokens, now() - t0)
                s.memory.extend(s.prompt.advance(chunk.n_tokens))

    def _decode(self) -> None:
        """The step's one C call: the doorbells rung, the batch decoded (its outputs synchronized),
        the generating slots without drafts sampled; then the draft model's batch, if any."""
        ctx, slots = self._kv.ctx, self._to_sample
        self._sampled = {}
        samplers = [smp for s in slots if (smp := s.sampler) is not None]
        rings = self._emitter.take_rings()
        try:
            tokens = decode_and_sample(ctx, self._batch, samplers, [s.i_batch for s in slots], ctx.n_threads, rings)
        except BaseException:
            ring(rings)  # the call may have failed before ringing them; a second ring costs a wake-up
            raise
        self._sampled = {s.id: tok for s, tok in zip(slots, tokens, strict=True)}
        self._kv.drafter.decode_batch()

    def _prompt_chunk_done(self, s: Slot, n: int) -> None:
        if isinstance(s.task, EmbeddingTask):
            s.prompt.advance(n)
            if s.prompt.done:  # else a medium comes next (_eval_media)
                self._outputs.send_embedding(s, n)
            return
        if s.completion.params.prompt_logprobs >= 0:
            self._outputs.record_prompt_probs(s, n)
        s.memory.extend(s.prompt.advance(n))  # its time taken after the decode's sync
        if not s.prompt.done:
            self._emitter.progress(s)
            return
        s.begin_generation()
        self._emitter.progress(s)
        if s.completion.params.n_predict == 0:  # only evaluate the prompt into the cache
            self._emitter.finish(s, StopType.LIMIT)
            return
        self._outputs.sample_and_accept(s, s.i_batch)
        # A first token goes out at once, as llama-server sends each slot's as soon as it is
        # sampled: after a burst of prompts, the first slots' readers need not wait for the
        # others' sampling (whose first samples may fault in fresh pages: ~9 ms each)
        self._emitter.flush(keep_holding=True)
        self._clock.lap("post")
