"""The server context on real llama.cpp: batching, yields (S1-S3), cancel, speculative decoding."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from pyllama_yield.queue import Task, TaskType
from pyllama_yield.server import Engine
from pyllama_yield.testing import make_draft_model

TIMEOUT = 60
PROMPTS = [
    "The quick brown fox jumps over the lazy dog",
    "Once upon a time, in a land far away",
    "def fibonacci(n):",
    "Llamas are social animals that live in herds",
]


def greedy(prompt: str, n: int = 12, **kw) -> dict:
    return {"prompt": prompt, "n_predict": n, "temperature": 0.0, "ignore_eos": True, "return_tokens": True, **kw}


@pytest.fixture(scope="module")
def draft_model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_draft_model(tmp_path_factory.mktemp("draft") / "draft.gguf", seed=5)


@pytest.fixture(scope="module")
def alone(tiny_model_path: Path) -> dict[str, list[int]]:
    """What each prompt generates on a single-slot server, one request at a time."""
    with Engine.create(tiny_model_path, n_ctx=512, n_parallel=1, n_threads=1) as srv:
        return {p: srv.complete(greedy(p)).tokens for p in PROMPTS}


def run_concurrently(srv: Engine, requests: list[dict]) -> list[dict]:
    results: list[dict | None] = [None] * len(requests)
    barrier = threading.Barrier(len(requests))

    def client(i: int) -> None:
        barrier.wait(TIMEOUT)
        results[i] = srv.complete(requests[i], timeout_s=TIMEOUT)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(len(requests))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
        assert not t.is_alive()
    return results  # type: ignore[return-value]


@pytest.mark.parametrize("n", [2, 4])
def test_concurrent_completions_equal_each_alone(tiny_model_path, alone, n):
    with Engine.create(tiny_model_path, n_ctx=512 * n, n_parallel=n, n_threads=1) as srv:
        results = run_concurrently(srv, [greedy(p) for p in PROMPTS[:n]])
        m = srv.metrics()
    for p, r in zip(PROMPTS, results, strict=False):
        assert r.tokens == alone[p]
        assert r.tokens_predicted == 12 and r.stop_type == "limit"
    assert m["requests_finished"] == n and m["predicted_tokens"] == 12 * n


def test_more_requests_than_slots_are_deferred_and_served(tiny_model_path, alone):
    with Engine.create(tiny_model_path, n_ctx=2048, n_parallel=2, n_threads=1) as srv:
        results = run_concurrently(srv, [greedy(p) for p in PROMPTS])
    assert [r.tokens for r in results] == [alone[p] for p in PROMPTS]


class DecodeGate:
    """Wraps ServerContext._decode: signals when the yielded call starts, then waits for a go."""

    def __init__(self, srv: Engine, wait_s: float) -> None:
        self.started = threading.Event()
        self.go = threading.Event()
        self.released_by_go: list[bool] = []
        self.wait_s = wait_s
        self.loop_ident: list[int] = []
        inner = srv.core.step._decode

        def gated() -> None:
            self.loop_ident.append(threading.get_ident())
            if not self.started.is_set():
                self.started.set()
                self.released_by_go.append(self.go.wait(self.wait_s))
            inner()

        srv.core.step._decode = gated  # type: ignore[method-assign]


def test_s1_s3_metrics_answered_during_decode_and_completion_declined_then_served(tiny_model_path):
    with Engine.create(tiny_model_path, n_ctx=2048, n_parallel=2, n_threads=1) as srv:
        gate = DecodeGate(srv, wait_s=TIMEOUT)
        long_prompt = " ".join(PROMPTS * 20)
        first = srv.submit(greedy(long_prompt, 4))
        assert gate.started.wait(TIMEOUT)  # the loop thread is inside the yielded decode now
        second = srv.submit(greedy(PROMPTS[1], 4))  # needs the model: declined during the yield
        third = srv.submit(greedy(PROMPTS[2], 4))
        metrics = srv.metrics(timeout_s=TIMEOUT)  # answered by the worker while decode waits for `go`
        assert not gate.go.is_set()
        assert metrics["slots"][0]["state"] == "processing_prompt"
        gate.go.set()
        results = [r.wait_for_all() for r in (first, second, third)]
    assert gate.released_by_go == [True]  # the decode was released by us, after the metrics came
    assert all(r.error is None and len(r.results) == 1 for r in results)
    slots_used = [r.results[0].payload.id_slot for r in results]
    assert slots_used[1] == 1 and slots_used[2] in (0, 1)  # second got the free slot, in order


def test_yield_decode_false_makes_metrics_wait_for_the_decode(tiny_model_path):
    with Engine.create(tiny_model_path, n_ctx=1024, n_parallel=1, n_threads=1, yield_decode=False) as srv:
        gate = DecodeGate(srv, wait_s=1.0)
        reader = srv.submit(greedy(" ".join(PROMPTS * 20), 2))
        assert gate.started.wait(TIMEOUT)
        answered = []
        t = threading.Thread(target=lambda: answered.append(srv.metrics(timeout_s=TIMEOUT)))
        t.start()
        t.join(TIMEOUT)
        assert answered and gate.released_by_go == [False]  # the decode ran out its wait unanswered
        assert reader.wait_for_all().error is None


def test_llama_cpp_is_only_called_on_the_loop_thread(tiny_model_path, monkeypatch):
    """Everything that touches the context or a sampler runs on the loop thread; tokenizing (the
    vocab is read-only) runs on the caller's thread, so a long prompt never stalls the loop."""
    from pyllama_yield import common, llama

    threads: set[int] = set()
    tokenized_on: set[int] = set()
    orig_tokenize = llama.Vocab.tokenize
    monkeypatch.setattr(
        llama.Vocab, "tokenize", lambda *a, **k: tokenized_on.add(threading.get_ident()) or orig_tokenize(*a, **k)
    )
    for cls, name in [
        (llama.Context, "decode"),
        (common.CommonSampler, "sample"),
        (common.CommonSampler, "accept"),
        (common.CommonSampler, "__init__"),
        (llama.Context, "seq_rm"),
    ]:
        orig = getattr(cls, name)

        def wrapped(*a, _orig=orig, **k):
            threads.add(threading.get_ident())
            return _orig(*a, **k)

        monkeypatch.setattr(cls, name, wrapped)
    from pyllama_yield.server import outputs

    orig_many = outputs.sample_and_accept_many
    monkeypatch.setattr(
        outputs, "sample_and_accept_many", lambda *a, **k: threads.add(threading.get_ident()) or orig_many(*a, **k)
    )
    with Engine.create(tiny_model_path, n_ctx=2048, n_parallel=2, n_threads=1) as srv:
        readers = [srv.submit(greedy(p, 6)) for p in PROMPTS[:3]]
        metrics = [srv.metrics() for _ in range(5)]
        assert all(r.wait_for_all().error is None for r in readers)
        loop = srv.core._loop_thread.ident
    assert threads == {loop} and metrics
    assert tokenized_on == {threading.get_ident()}


def test_cancel_mid_generation_frees_the_slot(tiny_model_path):
    with Engine.create(tiny_model_path, n_ctx=2048, n_parallel=1, n_threads=1) as srv:
        reader = srv.submit(greedy(PROMPTS[0], 1500, stream=True))
        first = reader.next(lambda: False)
        assert first is not None and not first.is_final  # it is generating
        reader.stop()  # posts the cancel
        assert srv.complete(greedy(PROMPTS[1], 3)).tokens_predicted == 3  # the slot is free again
        m = srv.metrics()
    assert m["requests_processing"] == 0 and m["slots"][0]["state"] == "idle"


def test_cancel_of_a_deferred_request_removes_it_and_no_waiter_hangs(tiny_model_path):
    with Engine.create(tiny_model_path, n_ctx=2048, n_parallel=1, n_threads=1) as srv:
        parked = threading.Event()
        defer = srv.queue.defer

        def defer_and_tell(task):
            defer(task)
            parked.set()

        srv.queue.defer = defer_and_tell  # type: ignore[method-assign]
        busy = srv.submit(greedy(PROMPTS[0], 400))
        deferred = srv.submit(greedy(PROMPTS[1], 5))
        waiter = srv.submit(greedy(PROMPTS[2], 5))
        assert parked.wait(TIMEOUT)  # `deferred` is parked behind the busy slot
        assert srv.metrics()["requests_deferred"] >= 1
        srv.queue.post(Task(TaskType.CANCEL, id_target=deferred.ids[0]))  # a cancel from elsewhere
        res = deferred.next(lambda: False)
        assert res is not None and res.is_error and res.payload.message == "cancelled"
        assert waiter.wait_for_all().error is None and busy.wait_for_all().error is None


def test_bad_requests_fail_alone_and_the_server_keeps_serving(tiny_model_path):
    with Engine.create(tiny_model_path, n_ctx=256, n_parallel=1, n_threads=1) as srv:
        for bad, match in [  # refused before they are posted, on the caller's thread
            ({"prompt": "x " * 400, "n_predict": 2}, "exceeds the available context"),
            ({"prompt": "hi", "n_predict": -5}, "n_predict"),
            ({"prompt": [10**7]}, "out of range"),
            ({"prompt": []}, "empty"),
            ({"prompt": "hi", "temperature": "hot"}, "temperature"),
            ({"prompt": "hi", "json_schema": {"$ref": "#/nowhere"}}, "json_schema"),
        ]:
            with pytest.raises(ValueError, match=match):
                srv.complete(bad)
        # a grammar that llama.cpp cannot parse fails in the loop, alone
        with pytest.raises(ValueError, match="grammar"):
            srv.complete({"prompt": "hi", "grammar": "root ::= undefined-rule"})
        assert srv.complete(greedy("still here", 3, bogus=1)).tokens_predicted == 3  # unknown fields: ignored
        assert srv.metrics()["requests_failed"] == 1


def test_stop_strings_streaming_and_prompt_cache(tiny_model_path, alone):
    with Engine.create(tiny_model_path, n_ctx=512, n_parallel=1, n_threads=1) as srv:
        full = srv.complete(greedy(PROMPTS[0], 12))
        text = full.content
        assert len(text) > 4
        word = text[2:4]
        stopped = srv.complete(greedy(PROMPTS[0], 12, stop=[word]))
        assert stopped.stop_type == "word" and stopped.content == text[: text.index(word)]
        assert stopped.tokens_cached > 0  # same prompt again: the prefix came from the cache
        reader = srv.submit(greedy(PROMPTS[0], 12, stream=True))
        parts, final = [], None
        while reader.has_next():
            r = reader.next(lambda: False)
            if r.is_final:
                final = r.payload
            else:
                parts.append(r.payload.content)
        assert "".join(parts) + final.content == text


def test_slot_save_restore_erase(tiny_model_path, tmp_path):
    with Engine.create(tiny_model_path, n_ctx=512, n_parallel=1, n_threads=1) as srv:
        srv.complete(greedy(PROMPTS[0], 4))
        saved = srv.call(TaskType.SLOT_SAVE, {"id_slot": 0, "filename": str(tmp_path / "slot0.bin")}).payload
        assert saved.native()["n_saved"] == saved.n_tokens > 0
        assert srv.call(TaskType.SLOT_ERASE, {"id_slot": 0}).payload.n_erased == saved.n_tokens
        restored = srv.call(TaskType.SLOT_RESTORE, {"id_slot": 0, "filename": str(tmp_path / "slot0.bin")}).payload
        assert restored.native()["n_restored"] == restored.n_tokens == saved.n_tokens
        again = srv.complete(greedy(PROMPTS[0], 4))
        assert again.tokens_cached > 0
        bad = srv.call(TaskType.SLOT_RESTORE, {"id_slot": 0, "filename": str(tmp_path / "missing.bin")})
        assert bad.is_error


@pytest.mark.parametrize("n_parallel", [1, 2])
def test_speculative_greedy_equals_plain_greedy(tiny_model_path, draft_model_path, alone, n_parallel):
    with Engine.create(
        tiny_model_path,
        n_ctx=512 * n_parallel,
        n_parallel=n_parallel,
        n_threads=1,
        draft_model_path=draft_model_path,
        n_draft=4,
    ) as srv:
        results = run_concurrently(srv, [greedy(p) for p in PROMPTS[:n_parallel]])
        again = srv.complete(greedy(PROMPTS[0]))  # with a cached prefix in both KV caches
        m = srv.metrics()
    for p, r in zip(PROMPTS, results, strict=False):
        assert r.tokens == alone[p]
    assert again.tokens == alone[PROMPTS[0]]
    assert m["draft_tokens"] > 0 and 0 <= m["draft_accepted"] <= m["draft_tokens"]
    assert results[0].timings.draft_n > 0


def test_speculative_with_the_target_as_draft_accepts_everything(tiny_model_path, alone):
    # the same model as draft predicts the target exactly: every draft is accepted
    with Engine.create(
        tiny_model_path, n_ctx=512, n_parallel=1, n_threads=1, draft_model_path=tiny_model_path, n_draft=3
    ) as srv:
        r = srv.complete(greedy(PROMPTS[3], 12))
    assert r.tokens == alone[PROMPTS[3]]
    assert r.timings.draft_n_accepted == r.timings.draft_n > 0


def test_synthetic_acceptance_follows_its_rates_and_seed(tiny_model_path, draft_model_path):
    """--spec-synth-rates (benchmarking): drafts are accepted by chance, not by match. Rate 1
    accepts every draft (a random draft model never matches the target otherwise), the same seed
    gives the same decisions, and accepted drafts do not advance a grammar."""
    from pyllama_yield.server.speculative import conditional_odds

    assert conditional_odds([0.75, 0.5625, 0.0]) == [0.75, 0.75, 0.0]

    def serve(rates):
        return Engine.create(
            tiny_model_path, n_ctx=512, n_threads=1, draft_model_path=draft_model_path, n_draft=4, synth_rates=rates
        )

    body = {"prompt": PROMPTS[0], "n_predict": 32, "ignore_eos": True, "temperature": 0.2, "seed": 4242}
    with serve([1.0] * 4) as srv:
        every = srv.complete(body)
        grammar = srv.complete({**body, "n_predict": 6, "grammar": 'root ::= "a"{5,5}'})
    assert every.timings.draft_n_accepted == every.timings.draft_n > 0
    assert every.tokens_predicted == 32 and every.stop_type == "limit"
    assert grammar.stop_type in ("eos", "limit")
    with serve([0.75 ** (i + 1) for i in range(4)]) as srv:
        a, b = srv.complete(body), srv.complete(body)
    assert (a.timings.draft_n, a.timings.draft_n_accepted) == (
        b.timings.draft_n,
        b.timings.draft_n_accepted,
    )
    assert 0 < a.timings.draft_n_accepted < a.timings.draft_n
    with pytest.raises(ValueError, match="draft model"):
        Engine.create(tiny_model_path, n_ctx=256, synth_rates=[1.0])


def test_synth_rate_flags_are_checked():
    from pyllama_yield.settings import ServerSettings

    assert ServerSettings(spec_draft_n_max=3, spec_synth_rates="1,0.5,0.5").synth_rates == [1.0, 0.5, 0.5]
    for bad, why in (("1,1", "3 values"), ("1,0.5,0.7", "non-increasing"), ("1,2,0", "within"), ("a,b,c", "numbers")):
        with pytest.raises(ValueError, match=why):
            ServerSettings(spec_draft_n_max=3, spec_synth_rates=bad)


def test_a_slot_frees_its_last_sampler_when_its_next_task_launches(tiny_model_path):
    """As llama-server does (slot.smpl.reset at launch): the finished task's sampler lives until
    the slot's next task, so the new sampler's first sample reuses its candidate buffer (one
    entry per vocabulary token) instead of faulting in fresh pages. Stopping frees both. (A next
    task with the same sampling parameters gets it back instead: test_completion_features.py.)"""
    srv = Engine.create(tiny_model_path, n_ctx=512, n_parallel=1, n_threads=1)
    slot = srv.core.slots[0]
    with srv:
        srv.complete(greedy(PROMPTS[0], n=2), timeout_s=TIMEOUT)
        first = slot.spent_sampler
        assert slot.sampler is None and first is not None and not first.closed
        srv.complete(greedy(PROMPTS[1], n=2, top_k=5), timeout_s=TIMEOUT)
        second = slot.spent_sampler
        assert first.closed and second is not first and not second.closed
    assert second.closed and slot.spent_sampler is None
