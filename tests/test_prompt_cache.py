"""Prompt cache reuse: the common prefix always, and with ``--cache-reuse`` (``n_cache_reuse``)
the later chunks a new prompt repeats, shifted in the KV cache instead of computed again."""

from __future__ import annotations

import pytest

from pyllama_yield.server import Engine

X = list(range(1000, 1010))  # a shared head
M = list(range(2000, 2012))  # a middle part the second prompt drops
Y = list(range(3000, 3030))  # a long shared tail: reused by a KV shift
Z = [4000, 4001, 4002]  # new tokens


def complete(srv: Engine, prompt: list[int], **kw) -> dict:
    body = {"prompt": prompt, "n_predict": 6, "temperature": 0.0, "ignore_eos": True, "return_tokens": True}
    return srv.complete({**body, "id_slot": 0, **kw})


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory):
    """One layer: a token's K and V then depend on nothing but the token and its position, so a
    chunk's KV moved to a new position equals the KV computed there, and reuse must not change the
    tokens (with more layers, reused KV still remembers the dropped middle part)."""
    from pyllama_yield.testing import make_tiny_model

    model = make_tiny_model(tmp_path_factory.mktemp("one") / "one-layer.gguf", n_layer=1, seed=3)
    with Engine.create(model, n_ctx=1024, n_parallel=1, n_threads=1) as s:
        yield s


def test_cache_reuse_shifts_repeated_chunks_and_generates_the_same(srv: Engine):
    fresh = complete(srv, X + Y + Z, cache_prompt=False)
    assert fresh.timings.cache_n == 0

    complete(srv, X + M + Y)
    plain = complete(srv, X + Y + Z)  # without reuse only the head is cached
    assert plain.timings.cache_n == len(X)

    complete(srv, X + M + Y)
    reused = complete(srv, X + Y + Z, n_cache_reuse=8)
    assert reused.timings.cache_n == len(X) + len(Y)
    assert reused.tokens == plain.tokens == fresh.tokens

    complete(srv, X + M + Y)
    short = complete(srv, X + Y[:5] + Z, n_cache_reuse=8)  # a repeat shorter than the minimum
    assert short.timings.cache_n == len(X)


def test_cache_reuse_is_a_flag_and_a_request_field():
    from pyllama_yield.settings import ServerSettings

    assert ServerSettings(cache_reuse=256).completion_defaults().n_cache_reuse == 256
    from pyllama_yield.server.params import CompletionParams

    with pytest.raises(ValueError, match="n_cache_reuse"):
        CompletionParams.model_validate({"n_cache_reuse": -1})


def test_prompt_cache_keeps_what_is_new_and_evicts_the_oldest():
    from pyllama_yield.server.prompt_cache import PromptCache

    def state(n: int):
        return lambda: (bytearray(n), bytearray())

    def size(n: int):
        return lambda: n

    def unmeasurable() -> int:
        raise AssertionError("a prompt the cache holds already is not measured")

    cache = PromptCache(limit_mib=0, limit_tokens=0)
    assert cache.save([1, 2, 3], size(10), state(10))
    assert not cache.save([1, 2], unmeasurable, state(10))  # contained in a cached prompt
    assert not cache.save([], size(0), state(0))
    assert cache.save([1, 2, 3, 4], size(10), state(10))  # contains [1, 2, 3]: that one goes
    assert [s.tokens for s in cache.states] == [[1, 2, 3, 4]]
    assert cache.save([7, 8], size(10), state(10))
    # the best fit keeps more of itself and covers more of the new prompt than the slot's own
    assert cache.take_best([9], [1, 2, 3, 4, 5]).tokens == [1, 2, 3, 4]
    assert cache.take_best([], [5, 6]) is None  # nothing shares a quarter of itself with it
    assert cache.take_best([7, 8, 1], [7, 8, 1, 2]) is None  # the slot's own prompt is better

    small = PromptCache(limit_mib=1, limit_tokens=4)
    assert not small.save([1], size(2 * 2**20), state(1))  # bigger than the whole cache
    for start in (10, 20, 30):
        assert small.save([start, start + 1, start + 2], size(2**19), state(2**19))
    assert [s.tokens[0] for s in small.states] == [20, 30]  # 1 MiB holds two: the oldest left
    small.update()  # the token limit grows as far as the size limit allows: both stay
    assert len(small.states) == 2


def test_idle_slots_go_to_host_memory_and_come_back(tiny_model_path):
    """llama-server's --cache-ram with --cache-idle-slots on a unified KV cache: starting a task
    saves the idle slots' prompts and frees their cells; a later request for a saved prompt loads
    it back instead of evaluating it again, and generates the same tokens."""
    long = list(range(500, 560))

    def ask(srv: Engine, prompt: list[int], **kw) -> dict:
        body = {"prompt": prompt, "n_predict": 4, "temperature": 0.0, "ignore_eos": True, "return_tokens": True}
        return srv.complete({**body, **kw})

    kw = dict(n_ctx=1024, n_parallel=2, kv_unified=True, n_threads=1, cache_ram_mib=100, cache_idle_slots=True)
    with Engine.create(tiny_model_path, **kw) as srv:
        first = ask(srv, long, id_slot=0)
        assert first.timings.prompt_n == len(long)
        ask(srv, [7, 8, 9], id_slot=1)  # slot 0 is idle: saved to host memory, its cells freed
        assert srv.core.slots[0].memory.tokens == [] and srv.core.prompt_cache.states[0].tokens[: len(long)] == long
        again = ask(srv, long)
        assert again.timings.cache_n == len(long) - 1 and again.timings.prompt_n == 1
        assert again.tokens == first.tokens
    with Engine.create(tiny_model_path, **{**kw, "cache_ram_mib": 0}) as off:
        ask(off, long, id_slot=0)
        ask(off, [7, 8, 9], id_slot=1)
        assert off.core.prompt_cache is None and off.core.slots[0].memory.tokens[: len(long)] == long


def test_slots_are_chosen_by_similarity_then_least_recently_used(tiny_model_path):
    with Engine.create(tiny_model_path, n_ctx=1024, n_parallel=3, n_threads=1) as srv:
        a, b = list(range(600, 620)), list(range(700, 720))
        body = {"n_predict": 2, "temperature": 0.0}
        srv.complete({**body, "prompt": a})
        srv.complete({**body, "prompt": b})
        used = {s.id: s.memory.tokens[:20] for s in srv.core.slots if s.memory.tokens}
        assert sorted(used.values()) == [a, b]  # the second went to another (least recently used) slot
        slot_a = next(i for i, t in used.items() if t == a)
        srv.complete({**body, "prompt": a + [1, 2]})
        assert srv.core.slots[slot_a].memory.tokens[:22] == a + [1, 2]  # similar enough: the slot holding a
