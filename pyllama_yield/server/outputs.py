"""What a decode's outputs become, on the loop thread: each generating slot's next token (sampled,
or checked against its drafts), streamed and checked for its stop conditions; an embedding task's
vectors or score. A slot that ends goes to the emitter, which sends its final result and frees it.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..common import sample_and_accept_many
from ..llama import LlamaError, Vocab
from ..queue import Result
from .embedding import EmbeddingTask, normalize
from .emitter import SlotEmitter
from .errors import ErrorKind
from .kv_caches import KvCaches
from .metrics import PhaseClock, Stats
from .probs import TokenProb, prompt_chunk_probs, token_probs
from .results import EmbeddingVectors, RerankScore, token_step
from .slot import Slot, StopType, now

__all__ = ["DecodeOutputs"]


class DecodeOutputs:
    """Reads the outputs of the last decode for each slot that has some."""

    def __init__(
        self,
        kv: KvCaches,
        vocab: Vocab,
        emitter: SlotEmitter,
        stats: Stats,
        clock: PhaseClock,
        *,
        n_ctx_slot: int,
        context_shift: bool,
        pooling: str,
        eog_tokens: Iterable[int],
    ) -> None:
        self._kv = kv
        self._vocab = vocab
        self._emitter = emitter
        self._stats = stats
        self._clock = clock
        self._n_ctx_slot = n_ctx_slot
        self._context_shift = context_shift
        self._pooling = pooling
        self._eog = frozenset(eog_tokens)  # a set lookup per token, not a C call

    def accept_generating(self, generating: list[Slot], sampled: dict[int, int | LlamaError]) -> None:
        """The next token of every generating slot after the decode, in slot order: ``sampled``
        (by slot id) holds those the decode call sampled (the slots without drafts); a slot with
        drafts samples its outputs one by one to verify them."""
        for s in generating:
            if s.busy:
                self._verify_and_accept(s, sampled.get(s.id))

    def _verify_and_accept(self, s: Slot, sampled: int | LlamaError | None = None) -> None:
        """The slot's next token (``sampled`` already, when given), and its drafts verified: keep
        the longest matching prefix."""
        drafts = s.draft.take()
        s.memory.append(s.generated.last_token)
        n_accepted = 0
        synth_probs = self._kv.drafter.synth_probs
        if drafts and synth_probs:
            n_accepted = self._accept_synthetic(s, drafts, synth_probs)
        else:
            for j in range(len(drafts) + 1):
                tok = self.sample_and_accept(s, s.i_batch + j, sampled if j == 0 else None)
                if not s.busy or j == len(drafts) or tok != drafts[j]:
                    break
                n_accepted += 1
                s.memory.append(tok)
        s.draft.settle(len(drafts), n_accepted)
        if drafts:
            self._stats.add(draft_tokens=len(drafts), draft_accepted=n_accepted, draft_steps=1)

    def _accept_synthetic(self, s: Slot, drafts: list[int], synth_probs: list[float]) -> int:
        """Benchmarking (``--spec-synth-rates``): accept each draft with its configured odds
        instead of by match with the target's token. The target still samples every position (its
        sampler state moves as usual); a drafted end-of-generation token is never accepted, and
        accepted drafts do not advance the grammar (llama-server's server_sample_and_accept_synth).
        Returns the drafts accepted."""
        assert s.sampler is not None and s.draft.synth_rng is not None
        for j, d in enumerate(drafts):
            try:
                tok = s.sampler.sample(self._kv.ctx, s.i_batch + j)
            except LlamaError as exc:
                self._emitter.fail(s, str(exc), ErrorKind.INVALID_REQUEST)
                return j
            if s.draft.synth_rng.random() < synth_probs[j] and d not in self._eog:
                s.sampler.accept(d, is_generated=False)
                self.accept(s, d, None)
                if not s.busy:
                    return j
                s.memory.append(d)
                continue
            s.sampler.accept(tok, is_generated=True)
            self.accept(s, tok, None)
            return j
        self.sample_and_accept(s, s.i_batch + len(drafts))
        return len(drafts)

    def sample_and_accept(self, s: Slot, idx: int, sampled: int | LlamaError | None = None) -> int:
        """Sample from output ``idx`` for slot ``s`` (unless ``sampled`` is that sample already),
        record its probabilities, then stream it and check the stop conditions (which may finish
        the slot). Returns the token, or -1 when the slot failed."""
        assert s.sampler is not None
        ctx = self._kv.ctx
        if sampled is None:  # the same C call as the batched path, for one sampler
            self._clock.lap("other")
            [sampled] = sample_and_accept_many([s.sampler], ctx, [idx], 1)
            self._clock.lap("sample")
        if isinstance(sampled, LlamaError):
            self._emitter.fail(s, str(sampled), ErrorKind.INVALID_REQUEST)
            return -1
        tok = sampled
        probs = token_probs(s.sampler, ctx, idx, tok, s.completion.params, self._vocab.token_to_piece)
        if probs is not None:
            s.generated.probs.append(probs)
            self._clock.lap("probs")
        self.accept(s, tok, probs)
        return tok

    def accept(self, s: Slot, tok: int, probs: TokenProb | None) -> None:
        """A new token for slot ``s``: stream it, check the stop conditions, maybe finish."""
        p = s.completion.params
        s.generated.t_last = now()
        piece = self._vocab.token_to_piece(tok)
        stop = s.add_token(tok, tok in self._eog, piece, self._n_ctx_slot, self._context_shift)
        if p.stream:  # every token gets a partial result, the last one too (as in llama-server)
            content = s.generated.text.take_sendable(stop is not StopType.NONE)
            self._clock.lap("stop")
            self._emitter.send(Result(s.id_task, token_step(s, tok, content, probs), is_final=False))
        self._clock.lap("post" if p.stream else "stop")
        if stop is not StopType.NONE:
            self._emitter.finish(s, stop)
            self._clock.lap("post")

    def record_prompt_probs(self, s: Slot, n: int) -> None:
        """The probabilities of the ``n`` prompt tokens just decoded (``prompt_logprobs``)."""
        n_top = s.completion.params.prompt_logprobs
        chunk = prompt_chunk_probs(
            self._kv.ctx, s.prompt.tokens, s.prompt.n_done, s.i_batch_first, n, n_top, self._vocab.token_to_piece
        )
        s.prompt.probs.extend(chunk)

    def send_embedding(self, s: Slot, n_last: int) -> None:
        """The answer of an embedding task whose last batch (``n_last`` tokens: the text after its
        last medium, if it has media) was just decoded; the slot is free afterwards."""
        et = s.task
        assert isinstance(et, EmbeddingTask)
        ctx = self._kv.ctx
        n = len(s.prompt.tokens)
        if et.rerank:
            score = float(ctx.embeddings_seq(s.id)[0])
            payload: RerankScore | EmbeddingVectors = RerankScore(et.index, score, n)
        else:
            if self._pooling == "none":  # one vector per token of the last batch, as they are
                vectors = [ctx.embeddings(s.i_batch - n_last + 1 + j).tolist() for j in range(n_last)]
            else:
                vectors = [normalize(ctx.embeddings_seq(s.id), et.normalize).tolist()]
            payload = EmbeddingVectors(et.index, vectors, n)
        self._emitter.send(Result(s.id_task, payload))
        self._stats.add(prompt_tokens=0, requests_finished=1)
        ctx.seq_rm(s.id)
        s.memory.forget()
        self._emitter.release(s)
