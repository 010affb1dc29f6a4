"""What a decode's outputs become, on the loop thread: each generating slot's next token (sampled,
or checked against its drafts), streamed, checked for its stop conditions; a slot that ends sends
its final result and is released.

Mixed into ``BatchLoop`` (``batching.py``), whose state it uses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..common import sample_and_accept_many
from ..llama import LlamaError
from ..queue import Result
from . import speculative
from .errors import ErrorKind, error_result
from .probs import token_probs
from .results import final_payload, partial_payload
from .slot import Slot, StopType, now

if TYPE_CHECKING:
    from ..llama import Context, Vocab
    from ..queue import ServerQueue, ServerResponse
    from .metrics import PhaseClock, Stats
    from .speculative import NoDraft

__all__ = ["SlotOutputs"]


class SlotOutputs:
    """Mixed into ``BatchLoop``; these names come from it."""

    ctx: Context
    drafter: NoDraft
    vocab: Vocab
    queue: ServerQueue
    responses: ServerResponse
    stats: Stats
    clock: PhaseClock
    n_ctx_slot: int
    context_shift: bool
    _send_error: Callable[..., None]
    clear_slot_cache: Callable[[Slot], None]

    def _sample_generating(self, generating: list[Slot]) -> None:
        """The next token of every generating slot after the decode, in slot order. The slots
        without drafts are sampled in one call, on the CPU backend's threads (which only wait
        between decodes); a slot with drafts samples its outputs one by one to verify them."""
        plain = [s for s in generating if s.busy and not s.drafts]
        sampled: dict[int, int | LlamaError] = {}
        if plain:
            self.clock.lap("other")
            samplers = [s.sampler for s in plain]
            idxs = [s.i_batch for s in plain]
            tokens = sample_and_accept_many(samplers, self.ctx, idxs, self.ctx.n_threads)
            sampled = {s.id: tok for s, tok in zip(plain, tokens, strict=True)}
            self.clock.lap("sample")
        for s in generating:
            if s.busy:
                self._verify_and_accept(s, sampled.get(s.id))

    def _verify_and_accept(self, s: Slot, sampled: int | LlamaError | None = None) -> None:
        """The slot's next token (``sampled`` already, when given), and its drafts verified: keep
        the longest matching prefix."""
        drafts, s.drafts = s.drafts, []
        s.cache_tokens.append(s.last_token)
        n_accepted = 0
        if drafts and self.drafter.synth_probs:
            n_accepted = speculative.accept_synthetic(self, s, drafts, self.drafter.synth_probs)
        else:
            for j in range(len(drafts) + 1):
                tok = self._sample_and_accept(s, s.i_batch + j, sampled if j == 0 else None)
                if not s.busy or j == len(drafts) or tok != drafts[j]:
                    break
                n_accepted += 1
                s.cache_tokens.append(tok)
        # every draft accepted: the draft model never saw its own last draft
        s.draft_kv_short = bool(drafts) and n_accepted == len(drafts)
        if drafts:
            s.n_draft_total += len(drafts)
            s.n_draft_accepted += n_accepted
            self.stats.add(draft_tokens=len(drafts), draft_accepted=n_accepted, draft_steps=1)

    def _sample_and_accept(self, s: Slot, idx: int, sampled: int | LlamaError | None = None) -> int:
        """Sample from output ``idx`` for slot ``s`` (unless ``sampled`` is that sample already),
        record its probabilities, then stream it and check the stop conditions (which may finish
        the slot)."""
        assert s.sampler is not None
        if sampled is None:  # the same C call as the batched path, for one sampler
            self.clock.lap("other")
            [sampled] = sample_and_accept_many([s.sampler], self.ctx, [idx], 1)
            self.clock.lap("sample")
        if isinstance(sampled, LlamaError):
            self._fail(s, str(sampled), ErrorKind.INVALID_REQUEST)
            return -1
        tok = sampled
        probs = token_probs(s.sampler, self.ctx, idx, tok, s.completion.params, self.vocab.token_to_piece)
        if probs is not None:
            s.probs.append(probs)
            self.clock.lap("probs")
        self._accept(s, tok, probs)
        return tok

    def _accept(self, s: Slot, tok: int, probs: dict[str, Any] | None) -> None:
        """A new token for slot ``s``: stream it, check the stop conditions, maybe finish."""
        p = s.completion.params
        s.t_gen_last = now()
        piece = self.vocab.token_to_piece(tok)
        stop = s.add_token(tok, self.vocab.is_eog(tok), piece, self.n_ctx_slot, self.context_shift)
        if p.stream:  # every token gets a partial result, the last one too (as in llama-server)
            content = s.text.take_sendable(stop is not StopType.NONE)
            self.clock.lap("stop")
            self.responses.send(Result(s.id_task, partial_payload(s, tok, content, probs), is_final=False))
        self.clock.lap("post" if p.stream else "stop")
        if stop is not StopType.NONE:
            self._finish(s, stop)
            self.clock.lap("post")

    def _finish(self, s: Slot, stop: StopType, cancelled: bool = False) -> None:
        if cancelled:
            self.responses.send(error_result(s.id_task, "cancelled", ErrorKind.CANCELLED))
        else:
            self.responses.send(Result(s.id_task, final_payload(s, stop, s.text.take_sendable(True))))
        self.stats.add_prediction(len(s.generated), s.gen_seconds())
        self.stats.add(requests_finished=1)
        self._release(s)

    def _fail(self, s: Slot, message: str, kind: ErrorKind = ErrorKind.SERVER) -> None:
        self._send_error(s.id_task, message, kind)
        self.clear_slot_cache(s)
        self._release(s)

    def _release(self, s: Slot) -> None:
        s.reset()
        self.queue.pop_deferred_task(s.id)
        self.stats.publish()
