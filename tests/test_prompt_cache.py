"""Prompt cache reuse: the common prefix always, and with ``--cache-reuse`` (``n_cache_reuse``)
the later chunks a new prompt repeats, shifted in the KV cache instead of computed again."""

from __future__ import annotations

import pytest

from pyllama_yield.server import ServerContext

X = list(range(1000, 1010))  # a shared head
M = list(range(2000, 2012))  # a middle part the second prompt drops
Y = list(range(3000, 3030))  # a long shared tail: reused by a KV shift
Z = [4000, 4001, 4002]  # new tokens


def complete(srv: ServerContext, prompt: list[int], **kw) -> dict:
    body = {"prompt": prompt, "n_predict": 6, "temperature": 0.0, "ignore_eos": True, "return_tokens": True}
    return srv.complete({**body, "id_slot": 0, **kw})


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory):
    """One layer: a token's K and V then depend on nothing but the token and its position, so a
    chunk's KV moved to a new position equals the KV computed there, and reuse must not change the
    tokens (with more layers, reused KV still remembers the dropped middle part)."""
    from pyllama_yield.testing import make_tiny_model

    model = make_tiny_model(tmp_path_factory.mktemp("one") / "one-layer.gguf", n_layer=1, seed=3)
    with ServerContext(model, n_ctx=1024, n_parallel=1, n_threads=1) as s:
        yield s


def test_cache_reuse_shifts_repeated_chunks_and_generates_the_same(srv: ServerContext):
    fresh = complete(srv, X + Y + Z, cache_prompt=False)
    assert fresh["timings"]["cache_n"] == 0

    complete(srv, X + M + Y)
    plain = complete(srv, X + Y + Z)  # without reuse only the head is cached
    assert plain["timings"]["cache_n"] == len(X)

    complete(srv, X + M + Y)
    reused = complete(srv, X + Y + Z, n_cache_reuse=8)
    assert reused["timings"]["cache_n"] == len(X) + len(Y)
    assert reused["tokens"] == plain["tokens"] == fresh["tokens"]

    complete(srv, X + M + Y)
    short = complete(srv, X + Y[:5] + Z, n_cache_reuse=8)  # a repeat shorter than the minimum
    assert short["timings"]["cache_n"] == len(X)


def test_cache_reuse_is_a_flag_and_a_request_field():
    from pyllama_yield.settings import ServerSettings

    assert ServerSettings(cache_reuse=256).completion_defaults().n_cache_reuse == 256
    from pyllama_yield.server.params import CompletionParams

    with pytest.raises(ValueError, match="n_cache_reuse"):
        CompletionParams.model_validate({"n_cache_reuse": -1})
