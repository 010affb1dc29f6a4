"""Sampling many slots in one call (common.sample_and_accept_many), on the CPU backend's threads."""

from __future__ import annotations

import pytest

from pyllama_yield.common import CommonSampler, sample_and_accept_many
from pyllama_yield.llama import Batch, Context, LlamaError

N_SLOTS = 4
N_STEPS = 6
# different chains, seeds and temperatures; one slot under a grammar (rejection sampling)
PARAMS = [
    {"temp": 1.0, "seed": 11},
    {"temp": 0.7, "seed": 12, "top_k": 5},
    {"temp": 0.0},
    {"temp": 1.0, "seed": 13, "grammar": 'root ::= [a-z ]+ "."'},
]


def generate(model, sample_step) -> list[list[int]]:  # noqa: ANN001
    """N_STEPS tokens for each of N_SLOTS sequences, sampled by ``sample_step(samplers, ctx, idxs)``."""
    with Context(model, n_ctx=256 * N_SLOTS, n_seq_max=N_SLOTS, n_threads=2) as ctx, Batch(64, N_SLOTS) as batch:
        samplers = [CommonSampler(model, p) for p in PARAMS]
        last = [model.vocab.bos] * N_SLOTS
        out: list[list[int]] = [[] for _ in range(N_SLOTS)]
        for pos in range(N_STEPS):
            batch.clear()
            for seq in range(N_SLOTS):
                batch.add(last[seq], pos, seq, logits=True)
            ctx.decode(batch)
            last = sample_step(samplers, ctx, list(range(N_SLOTS)))
            for seq, tok in enumerate(last):
                out[seq].append(tok)
        for s in samplers:
            s.close()
        return out


def one_by_one(samplers, ctx, idxs) -> list[int]:  # noqa: ANN001
    tokens = []
    for s, i in zip(samplers, idxs, strict=True):
        tok = s.sample(ctx, i)
        s.accept(tok)
        tokens.append(tok)
    return tokens


def all_at_once(samplers, ctx, idxs) -> list[int]:  # noqa: ANN001
    tokens = sample_and_accept_many(samplers, ctx, idxs, n_threads=2)
    assert all(isinstance(t, int) for t in tokens), tokens
    return tokens  # type: ignore[return-value]


def test_each_slot_samples_what_it_samples_alone(tiny_model):
    """Two threads share the slots; each sampler's chain, state (penalties, grammar) and random
    stream stay its own, so every slot gets the tokens it gets sampled one by one."""
    assert generate(tiny_model, all_at_once) == generate(tiny_model, one_by_one)


def test_a_sampler_given_twice_is_refused(tiny_model):
    with CommonSampler(tiny_model, {}) as s, Context(tiny_model, n_ctx=64) as ctx:
        with pytest.raises(ValueError, match="once"):
            sample_and_accept_many([s, s], ctx, [0, 0], n_threads=2)


def test_a_failed_sample_is_that_slots_error_only(tiny_model):
    """An output the last decode did not compute fails its own slot; the others are sampled."""
    with Context(tiny_model, n_ctx=128, n_seq_max=2, n_threads=2) as ctx, Batch(8, 2) as batch:
        batch.add(tiny_model.vocab.bos, 0, 0, logits=True)
        batch.add(tiny_model.vocab.bos, 0, 1, logits=False)
        ctx.decode(batch)
        samplers = [CommonSampler(tiny_model, {"temp": 0.0}) for _ in range(2)]
        got = sample_and_accept_many(samplers, ctx, [0, 1], n_threads=2)
        assert isinstance(got[0], int)
        assert isinstance(got[1], LlamaError) and "sampling failed" in str(got[1])
        for s in samplers:
            s.close()


def test_a_prompt_accepted_in_one_call_counts_as_each_of_its_tokens(tiny_model):
    """``accept_prompt`` (one C call for a whole prompt) feeds the penalties what accepting each
    token would, and skips media cells (negative): a repeat penalty then steers greedy sampling
    away from a token the prompt holds."""
    penalised = {"temp": 0.0, "penalty_repeat": 1000.0, "penalty_last_n": 64}

    def first_token(params: dict, accept) -> int:  # noqa: ANN001
        with Context(tiny_model, n_ctx=256, n_threads=2) as ctx, Batch(8, 1) as batch:
            batch.add(tiny_model.vocab.bos, 0, 0, logits=True)
            ctx.decode(batch)
            with CommonSampler(tiny_model, params) as sampler:
                accept(sampler)
                return sampler.sample(ctx, 0)

    greedy = first_token({"temp": 0.0}, lambda s: None)
    one_call = first_token(penalised, lambda s: s.accept_prompt([greedy, -3, 7]))
    by_token = first_token(penalised, lambda s: [s.accept(t, is_generated=False) for t in (greedy, 7)])
    assert one_call == by_token != greedy


def test_a_reset_sampler_samples_as_it_did_when_new(tiny_model):
    """``reset`` brings a used sampler back to how it was made: the same seeded draws and no
    penalty history, so a slot may keep it for a task with the same parameters; a grammar's state
    is not reset by llama.cpp's reset, so such a sampler says no."""
    params = {"temp": 1.5, "seed": 5, "top_k": 0, "top_p": 1.0, "min_p": 0.0, "penalty_repeat": 1.5}

    def draws(sampler: CommonSampler) -> list[int]:
        with Context(tiny_model, n_ctx=256, n_threads=2) as ctx, Batch(8, 1) as batch:
            out, tok = [], tiny_model.vocab.bos
            for pos in range(12):
                batch.clear()
                batch.add(tok, pos, 0, logits=True)
                ctx.decode(batch)
                [tok] = sample_and_accept_many([sampler], ctx, [0], n_threads=1)  # type: ignore[list-item]
                out.append(tok)
            return out

    with CommonSampler(tiny_model, params) as sampler:
        first = draws(sampler)
        assert draws(sampler) != first  # a used sampler goes on from where it was
        assert sampler.reset()
        assert draws(sampler) == first
    with CommonSampler(tiny_model, {"grammar": "root ::= [a-z]+"}) as constrained:
        assert not constrained.reset()
