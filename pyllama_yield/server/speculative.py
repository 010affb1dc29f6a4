"""Speculative decoding: the draft model beside the target, as one collaborator of the server
context. ``NoDraft`` stands in when there is none, so the batching loop never asks which.

Drafting and the KV clean-up after verification both run inside ``yield_to_queue`` on the loop
thread (rule S2), so the worker keeps answering while the draft model computes. The target model
verifies the drafts in the shared batch (``outputs.DecodeOutputs``): greedy drafting keeps greedy
output identical.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..llama import Batch, Context, DecodeError, Model
from .params import DEFAULT_SEED
from .slot import Slot

if TYPE_CHECKING:
    from .config import DraftConfig

__all__ = ["DraftModel", "NoDraft", "conditional_odds"]

log = logging.getLogger("pyllama_yield.server")


class NoDraft:
    """No draft model: every step is a plain decode."""

    active = False
    n_draft = 0
    synth_probs: list[float] = []
    contexts: tuple[Context, ...] = ()

    def draft(self, slots: list[Slot], n_ctx_slot: int) -> None:
        pass

    def process(self, target: Context, slots: list[Slot]) -> bool:
        return True

    def start_batch(self) -> None:
        pass

    def add_prompt_chunk(self, chunk: Sequence[int], start: int, seq: int) -> None:
        pass

    def decode_batch(self) -> None:
        pass

    def prefill(self, slot: Slot, n_keep: int) -> None:
        pass

    def synth_rng(self, seed: int) -> random.Random | None:
        return None

    def sleep(self) -> None:
        pass

    def wake(self) -> None:
        pass

    def close(self) -> None:
        pass


class DraftModel(NoDraft):
    """A draft model with a context shaped like the target's and a batch of its own."""

    active = True

    def __init__(
        self, config: DraftConfig, target: Model, ctx_args: dict[str, Any], n_gpu_layers: int, n_parallel: int
    ) -> None:
        assert config.path is not None
        self.model = Model(config.path, n_gpu_layers=n_gpu_layers)
        try:
            if self.model.n_vocab != target.n_vocab or self.model.vocab.bos != target.vocab.bos:
                raise ValueError("the draft model's vocab differs from the target model's")
            self._ctx_args = ctx_args
            self.ctx: Context | None = Context(self.model, **ctx_args)
            self.n_batch = self.ctx.n_batch
            self.batch = Batch(self.n_batch)
        except BaseException:
            self.model.close()
            raise
        # every generating slot sends its last token plus its drafts in the shared batch
        self.n_draft = max(0, min(config.n_max, self.n_batch // n_parallel - 1))
        self.n_draft_min = config.n_min
        # --spec-synth-rates: per-position odds of accepting a draft
        self.synth_probs = conditional_odds(config.synth_rates)[: self.n_draft]

    @property
    def contexts(self) -> tuple[Context, ...]:  # type: ignore[override]
        return (self.ctx,) if self.ctx is not None else ()

    def _context(self) -> Context:
        assert self.ctx is not None, "the draft context is freed while the server sleeps"
        return self.ctx

    def draft(self, slots: list[Slot], n_ctx_slot: int) -> None:
        """Draft tokens for each generating slot (greedy)."""
        ctx, b = self._context(), self.batch
        for s in slots:
            pos = len(s.memory.tokens)
            n_predict = s.completion.params.n_predict
            budget = self.n_draft
            if n_predict >= 0:
                budget = min(budget, n_predict - len(s.generated.tokens) - 1)
            budget = max(0, min(budget, n_ctx_slot - pos - 2))
            if budget < self.n_draft_min:
                budget = 0  # too few drafts to be worth verifying (--spec-draft-n-min)
            drafts: list[int] = []
            tok = s.generated.last_token
            for i in range(max(budget, 1)):  # at least the last token, to keep the draft KV in step
                b.clear()
                b.add(tok, pos + i, s.id, logits=True)
                ctx.decode(b)
                if i < budget:
                    tok = int(np.argmax(ctx.logits()))
                    drafts.append(tok)
            s.draft.pending = drafts

    def process(self, target: Context, slots: list[Slot]) -> bool:
        """Trim both KV caches to the accepted tokens; False when the draft model failed."""
        ctx = self._context()
        try:
            for s in slots:
                keep = len(s.memory.tokens)
                if s.draft.kv_short:
                    self.batch.clear()
                    self.batch.add(s.memory.tokens[-1], keep - 1, s.id, logits=False)
                    ctx.decode(self.batch)
                target.seq_rm(s.id, keep, -1)
                ctx.seq_rm(s.id, keep, -1)
            return True
        except DecodeError:
            log.exception("speculative processing failed")
            return False

    def start_batch(self) -> None:
        self.batch.clear()

    def add_prompt_chunk(self, chunk: Sequence[int], start: int, seq: int) -> None:
        """The draft model sees every prompt chunk the target decodes, in its own batch."""
        self.batch.add_sequence(chunk, start, seq, logits_last=False)

    def decode_batch(self) -> None:
        if self.batch.n_tokens:
            self._context().decode(self.batch)

    def prefill(self, slot: Slot, n_keep: int) -> None:
        """The draft context lost this sequence when the slot was cleared: give it the cached prefix."""
        ctx = self._context()
        for start in range(0, n_keep, self.n_batch):
            self.batch.clear()
            self.batch.add_sequence(slot.memory.tokens[start : start + self.n_batch], start, slot.id, False)
            ctx.decode(self.batch)

    def synth_rng(self, seed: int) -> random.Random | None:
        """The dice for ``--spec-synth-rates`` (the same seed gives the same accept decisions)."""
        if not self.synth_probs:
            return None
        return random.Random(None if seed == DEFAULT_SEED else seed)

    def sleep(self) -> None:
        if self.ctx is not None:
            self.ctx.close()
            self.ctx = None

    def wake(self) -> None:
        self.ctx = Context(self.model, **self._ctx_args)

    def close(self) -> None:
        self.batch.close()
        self.sleep()
        self.model.close()


def conditional_odds(rates: Sequence[float]) -> list[float]:
    """Overall acceptance rates per draft position (``--spec-synth-rates``) as the odds of
    accepting draft i once drafts 0..i-1 were (llama-server's synth_probs)."""
    odds, previous = [], 1.0
    for rate in rates:
        odds.append(rate / previous if previous > 0 else 0.0)
        previous = rate
    return odds
