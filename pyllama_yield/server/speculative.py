"""Speculative decoding with a draft model: draft, then bring both KV caches in line.

Both steps run inside ``yield_to_queue`` on the loop thread (rule S2), so the worker keeps
answering while the draft model computes. The target model verifies the drafts in the shared
batch (``ServerContext._verify_and_accept``): greedy drafting keeps greedy output identical.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..llama import Batch, Context, DecodeError, LlamaError, Model
from .slot import Slot

if TYPE_CHECKING:
    from .context import ServerContext

log = logging.getLogger("pyllama_yield.server")


def load_draft(
    srv: ServerContext,
    path: str | os.PathLike[str],
    n_gpu_layers: int,
    ctx_args: dict[str, Any],
    n_draft: int,
    n_draft_min: int = 0,
) -> None:
    """Load the draft model with a context shaped like the target's."""
    srv.draft_model = Model(path, n_gpu_layers=n_gpu_layers)
    if srv.draft_model.n_vocab != srv.model.n_vocab or srv.draft_model.vocab.bos != srv.vocab.bos:
        raise ValueError("the draft model's vocab differs from the target model's")
    srv.draft_ctx = Context(srv.draft_model, **ctx_args)
    srv.draft_batch = Batch(srv.n_batch)
    # every generating slot sends its last token plus its drafts in the shared batch
    srv.n_draft = max(0, min(n_draft, srv.n_batch // srv.n_parallel - 1))
    srv.n_draft_min = n_draft_min


def draft(srv: ServerContext, slots: list[Slot]) -> None:
    """Draft tokens for each generating slot with the draft model (greedy)."""
    assert srv.draft_ctx is not None
    b = srv.draft_batch
    for s in slots:
        pos = len(s.cache_tokens)
        assert s.task is not None
        n_predict = s.task.params.n_predict
        budget = srv.n_draft
        if n_predict >= 0:
            budget = min(budget, n_predict - len(s.generated) - 1)
        budget = max(0, min(budget, srv.n_ctx_slot - pos - 2))
        if budget < srv.n_draft_min:
            budget = 0  # too few drafts to be worth verifying (--spec-draft-n-min)
        drafts: list[int] = []
        tok = s.last_token
        for i in range(max(budget, 1)):  # at least the last token, to keep the draft KV in step
            b.clear()
            b.add(tok, pos + i, s.id, logits=True)
            srv.draft_ctx.decode(b)
            if i < budget:
                tok = int(np.argmax(srv.draft_ctx.logits()))
                drafts.append(tok)
        s.drafts = drafts


def process(srv: ServerContext, slots: list[Slot]) -> bool:
    """Trim both KV caches to the accepted tokens; False when the draft model failed."""
    assert srv.draft_ctx is not None
    try:
        for s in slots:
            keep = len(s.cache_tokens)
            if s.draft_kv_short:
                b = srv.draft_batch
                b.clear()
                b.add(s.cache_tokens[-1], keep - 1, s.id, logits=False)
                srv.draft_ctx.decode(b)
            srv.ctx.seq_rm(s.id, keep, -1)
            srv.draft_ctx.seq_rm(s.id, keep, -1)
        return True
    except DecodeError:
        log.exception("speculative processing failed")
        return False


def conditional_odds(rates: Sequence[float]) -> list[float]:
    """Overall acceptance rates per draft position (``--spec-synth-rates``) as the odds of
    accepting draft i once drafts 0..i-1 were (llama-server's synth_probs)."""
    odds, previous = [], 1.0
    for rate in rates:
        odds.append(rate / previous if previous > 0 else 0.0)
        previous = rate
    return odds


def accept_synthetic(srv: ServerContext, s: Slot, drafts: list[int]) -> int:
    """Benchmarking: accept each draft with its configured odds instead of by match with the
    target's token. The target still samples every position (its sampler state moves as usual);
    a drafted end-of-generation token is never accepted, and accepted drafts do not advance the
    grammar (llama-server's server_sample_and_accept_synth). Returns the drafts accepted."""
    assert s.sampler is not None and s.synth_rng is not None
    for j, d in enumerate(drafts):
        try:
            tok = s.sampler.sample(srv.ctx, s.i_batch + j)
        except LlamaError as exc:
            srv._fail(s, str(exc), 400)
            return j
        if s.synth_rng.random() < srv.synth_probs[j] and not srv.vocab.is_eog(d):
            s.sampler.accept(d, is_generated=False)
            srv._accept(s, d, None)
            if not s.busy:
                return j
            s.cache_tokens.append(d)
            continue
        s.sampler.accept(tok, is_generated=True)
        srv._accept(s, tok, None)
        return j
    srv._sample_and_accept(s, s.i_batch + len(drafts))
    return len(drafts)


def prefill(srv: ServerContext, slot: Slot, n_keep: int) -> None:
    """The draft context lost this sequence when the slot was cleared: give it the cached prefix."""
    assert srv.draft_ctx is not None
    for start in range(0, n_keep, srv.n_batch):
        srv.draft_batch.clear()
        srv.draft_batch.add_sequence(slot.cache_tokens[start : start + srv.n_batch], start, slot.id, False)
        srv.draft_ctx.decode(srv.draft_batch)
