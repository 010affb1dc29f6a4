"""Context checkpoints for a sliding-window (SWA) model: a new prompt that shares only an old
prefix with a slot's cache must not reuse it once the window has moved on (removing positions
from an SWA cache "works" but leaves the next tokens without the cells they attend to), and a
checkpoint made near the end of a prompt lets a prompt that shares almost all of it go on from
there. The reference is always the same prompt with no cache."""

from __future__ import annotations

import pytest

from pyllama_yield.server import Engine
from pyllama_yield.server.checkpoints import CheckpointPolicy

A = [100 + (7 * i) % 900 for i in range(400)]  # a long prompt, well past the window
Z = [2000, 2001, 2002, 2003, 2004]  # where the new prompts go their own way


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory):
    """Gemma 3 layout with an 8-token window and 32-token ubatches: the SWA cache holds 256 cells
    per sequence, so after a 400-token prompt it no longer holds the first ~150 positions."""
    from pyllama_yield.testing import make_tiny_model

    path = make_tiny_model(tmp_path_factory.mktemp("swa") / "swa.gguf", arch="gemma3", n_layer=6, sliding_window=8)
    with Engine.create(path, n_ctx=1024, n_parallel=1, n_batch=32, n_ubatch=32, n_threads=1) as s:
        assert s.core.kv.ctx.model.n_swa == 8
        yield s


def complete(srv: Engine, prompt: list[int], **kw) -> dict:
    body = {"prompt": prompt, "n_predict": 8, "temperature": 0.0, "ignore_eos": True, "return_tokens": True}
    return srv.complete({**body, "id_slot": 0, **kw})


def reference(srv: Engine, prompt: list[int]) -> list[int]:
    """What ``prompt`` generates with no cache; then an unrelated prompt, so that nothing of it
    (its checkpoints included) is left in the slot."""
    tokens = complete(srv, prompt, cache_prompt=False).tokens
    complete(srv, [3000 + i for i in range(20)])
    return tokens


def test_a_prefix_older_than_the_window_is_evaluated_again(srv: Engine):
    fresh = reference(srv, A[:100] + Z)
    complete(srv, A)
    again = complete(srv, A[:100] + Z)
    assert again.timings.cache_n == 0  # its window is gone and no checkpoint is that old
    assert again.tokens == fresh


def test_a_checkpoint_near_the_prompt_end_is_restored(srv: Engine):
    prompt = A[:398] + Z
    fresh = reference(srv, prompt)
    complete(srv, A, n_predict=300)  # the window moves ~300 positions past the prompt
    again = complete(srv, prompt)
    # the checkpoint before the prompt's last 4 tokens (396) is the newest one at or before 398
    assert again.timings.cache_n == 395
    assert again.tokens == fresh


def test_a_prefix_inside_the_window_is_reused_without_a_checkpoint(srv: Engine):
    prompt = A[:390] + Z
    fresh = reference(srv, prompt)
    complete(srv, A)
    again = complete(srv, prompt)
    assert again.timings.cache_n == 390
    assert again.tokens == fresh


def test_a_repeated_short_prompt_goes_back_to_its_checkpoint_as_in_llama_server(srv: Engine):
    """llama-server asks for a checkpoint once the memory's oldest position reaches n_keep - n_swa:
    for a prompt shorter than the window that is at once (both are 0). Its repeat then evaluates
    from the checkpoint before its last 4 tokens, in the same steps as the prompt's first time,
    which is why a request with the same prompt twice gets the same answer twice (upstream
    test_completion.py::test_completion_with_tokens_input)."""
    prompt = A[:6]
    reference(srv, prompt)
    first = complete(srv, prompt)
    again = complete(srv, prompt)
    assert first.timings.cache_n == 0
    # the checkpoint holds positions 0..1 (the 2 tokens before the last 4); llama-server goes on
    # from its last position, 1, and evaluates the 5 tokens after it
    assert again.timings.cache_n == 1
    assert again.timings.prompt_n == 5


def test_no_checkpoints_means_no_reuse_past_the_window(tmp_path):
    from pyllama_yield.testing import make_tiny_model

    path = make_tiny_model(tmp_path / "swa.gguf", arch="gemma3", n_layer=6, sliding_window=8)
    with Engine.create(path, n_ctx=1024, n_parallel=1, n_batch=32, n_ubatch=32, n_threads=1, ctx_checkpoints=0) as s:
        prompt = A[:398] + Z
        fresh = reference(s, prompt)
        complete(s, A, n_predict=300)
        again = complete(s, prompt)
        assert again.timings.cache_n == 0
        assert again.tokens == fresh


def test_the_last_tokens_of_a_prompt_get_a_step_of_their_own():
    policy = CheckpointPolicy(n_max=32, min_step=8192, n_swa=512, recurrent=False, n_batch=2048, n_ubatch=512)
    assert policy.chunk_end(0, 10, 10) == 6  # a short prompt: its last 4 apart
    assert policy.chunk_end(6, 10, 10) == 10
    assert policy.chunk_end(0, 1000, 1000) == 1000 - 516  # a long one: an ubatch before those too
    assert policy.chunk_end(484, 1000, 1000) == 996
    assert policy.chunk_end(0, 3, 3) == 3  # nothing to cut
    plain = CheckpointPolicy(n_max=32, min_step=8192, n_swa=0, recurrent=False, n_batch=2048, n_ubatch=512)
    assert plain.chunk_end(0, 10, 10) == 10  # a model whose cache can be cut back: one chunk


def test_checkpoint_flags_are_llama_servers():
    import argparse

    from pyllama_yield.cli import add_settings_arguments, settings_from_args

    def parse(*argv: str):
        parser = argparse.ArgumentParser()
        add_settings_arguments(parser)
        return settings_from_args(parser.parse_args(list(argv)))

    assert (parse().ctx_checkpoints, parse().checkpoint_min_step) == (32, 8192)
    s = parse("--swa-checkpoints", "4", "--checkpoint-min-step", "64")
    assert (s.ctx_checkpoints, s.checkpoint_min_step) == (4, 64)
    with pytest.raises(SystemExit, match="--checkpoint-min-step: .*non-negative"):
        parse("-cms", "-1")
