"""Prompt cache reuse: the common prefix always, and with ``--cache-reuse`` (``n_cache_reuse``)
the later chunks a new prompt repeats, shifted in the KV cache instead of computed again."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


class _NaivePromptCache:
    """llama-server's server_prompt_cache as written there: every question a look through all
    entries. The reference the indexed PromptCache must agree with."""

    def __init__(self) -> None:
        self.states: list[list[int]] = []

    @staticmethod
    def _lcp(a: list[int], b: list[int]) -> int:
        n = 0
        while n < min(len(a), len(b)) and a[n] == b[n]:
            n += 1
        return n

    def save(self, tokens: list[int]) -> bool:
        if not tokens or any(len(s) >= len(tokens) and self._lcp(s, tokens) == len(tokens) for s in self.states):
            return False
        self.states = [s for s in self.states if self._lcp(s, tokens) < len(s)]
        self.states.append(list(tokens))
        return True

    def take_best(self, current: list[int], new: list[int]) -> list[int] | None:
        lcp = self._lcp(current, new)
        f_keep = lcp / len(current) if current else -1.0
        f_sim = lcp / len(new) if new else 0.0
        best = None
        for s in self.states:
            n = self._lcp(s, new)
            keep, sim = n / len(s), n / len(new) if new else 0.0
            if keep >= 0.25 and keep > f_keep and sim > f_sim:
                best, f_keep, f_sim = s, keep, sim
        if best is not None:
            self.states = [s for s in self.states if s is not best]
        return best


_small_prompts = st.lists(st.integers(0, 3), max_size=7)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.booleans(), _small_prompts, _small_prompts), max_size=40))
def test_prompt_cache_index_answers_as_a_look_through_every_entry(ops):
    """Saves and takes in any order (prompts over a 4-token alphabet, so that they share
    prefixes, contain each other and repeat): the sorted index answers what llama-server's loop
    over every entry answers, entry for entry, and keeps the totals of what it holds."""
    from pyllama_yield.server.prompt_cache import PromptCache

    cache, naive = PromptCache(limit_mib=0, limit_tokens=0), _NaivePromptCache()
    for is_save, a, b in ops:
        if is_save:
            assert cache.save(a, lambda: 1, lambda: (bytearray(1), bytearray())) == naive.save(a)
        else:
            got = cache.take_best(a, b)
            assert (got.tokens if got is not None else None) == naive.take_best(a, b)
        assert [s.tokens for s in cache.states] == naive.states
        assert cache.holds(a) == any(s[: len(a)] == a for s in naive.states)
        assert cache.size() == len(naive.states)
        assert cache.n_tokens() == sum(map(len, naive.states))


@settings(max_examples=500, deadline=None)
@given(st.lists(st.integers(0, 2), max_size=80), st.lists(st.integers(0, 2), max_size=80), st.integers(0, 80))
def test_common_prefix_counts_as_a_loop_does(a, b, shared):
    """The windowed comparison counts what a token-by-token loop counts, at any length and any
    place of the first difference (``shared`` tokens forced equal first)."""
    from pyllama_yield.server.slot import common_prefix

    b = a[:shared] + b
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    assert common_prefix(a, b) == n == common_prefix(b, a)
