"""The engine handle and its config: built once, from flags or keywords; load-time work stays at load."""

from __future__ import annotations

import threading

import pytest

from pyllama_yield.cli import engine_config_from_settings
from pyllama_yield.llama import Context, Vocab
from pyllama_yield.server import Engine, EngineConfig
from pyllama_yield.server.config import ContextConfig, DraftConfig
from pyllama_yield.settings import ServerSettings

TIMEOUT = 60


def test_flat_options_land_in_their_groups():
    cfg = EngineConfig.create(
        "m.gguf", n_ctx=1024, n_parallel=3, draft_model_path="d.gguf", n_draft=5, chat_template="chatml",
        cache_ram_mib=16, n_predict_max=64, embedding=False, lora=[("a.gguf", 0.5)], model_name="alias",
    )  # fmt: skip
    assert (cfg.context.n_ctx, cfg.context.n_parallel) == (1024, 3)
    assert (cfg.draft.path, cfg.draft.n_max) == ("d.gguf", 5)
    assert cfg.chat.template == "chatml" and cfg.cache.cache_ram_mib == 16 and cfg.limits.n_predict_max == 64
    assert cfg.lora == (("a.gguf", 0.5),) and cfg.model.name == "alias"
    with pytest.raises(TypeError, match="n_ctxx"):
        EngineConfig.create("m.gguf", n_ctxx=1)
    with pytest.raises(ValueError, match="n_parallel"):
        ContextConfig(n_parallel=0)
    with pytest.raises(ValueError, match="draft model"):
        DraftConfig(synth_rates=(1.0,))
    with pytest.raises(AttributeError):
        cfg.context.n_ctx = 5  # type: ignore[misc]  # frozen


def test_settings_build_the_same_config_as_the_flags_say():
    s = ServerSettings(
        model="m.gguf", ctx_size=2048, parallel=-1, threads=2, alias="b,a", reranking=True, warmup=False,
        spec_draft_n_max=3, sleep_idle_seconds=2, lora_scaled=["x.gguf:0.25"],
    )  # fmt: skip
    cfg = engine_config_from_settings(s)
    assert (cfg.context.n_ctx, cfg.context.n_parallel, cfg.context.kv_unified) == (2048, 4, True)
    assert cfg.context.n_threads == 2 and cfg.context.n_threads_batch is None
    assert cfg.model.name == "a" and cfg.embedding and cfg.pooling == "rank"
    assert cfg.limits.warmup is False and cfg.limits.idle_sleep_ms == 2000 and cfg.draft.n_max == 3
    assert cfg.lora == (("x.gguf", 0.25),)
    assert engine_config_from_settings(s, "other.gguf").model.path == "other.gguf"


def test_end_of_generation_tokens_are_read_once_at_load(tiny_model_path, monkeypatch):
    """A burst of ignore_eos requests must not walk the vocabulary per request (it stalled a
    fresh server for seconds on Gemma's 262k tokens)."""
    calls = []
    original = Vocab.eog_tokens

    def counted(self):
        calls.append(threading.get_ident())
        return original(self)

    monkeypatch.setattr(Vocab, "eog_tokens", counted)
    with Engine.create(tiny_model_path, n_ctx=1024, n_parallel=4, n_threads=1) as engine:
        assert len(calls) == 1
        vocab = engine.vocab
        assert list(engine.eog_tokens) == [t for t in range(vocab.n_tokens) if vocab.is_eog(t)]
        assert vocab.eos in engine.eog_tokens
        body = {"prompt": "Once upon a time", "n_predict": 4, "ignore_eos": True}
        barrier = threading.Barrier(8, timeout=TIMEOUT)
        errors: list[BaseException] = []

        def one() -> None:
            try:
                barrier.wait()
                assert engine.complete(body, timeout_s=TIMEOUT).tokens_predicted == 4
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=one) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(TIMEOUT)
        assert not errors and not any(t.is_alive() for t in threads)
    assert len(calls) == 1


@pytest.mark.parametrize("warmup", [True, False])
def test_warmup_decodes_once_on_the_loop_thread_and_leaves_no_trace(tiny_model_path, monkeypatch, warmup):
    seen: list[tuple[int, int]] = []  # (thread, KV cells used after the warm-up)
    original = Context.warmup

    def recorded(self):
        original(self)
        seen.append((threading.get_ident(), self.seq_pos_max(0)))

    monkeypatch.setattr(Context, "warmup", recorded)
    with Engine.create(tiny_model_path, n_ctx=512, n_threads=1, warmup=warmup) as engine:
        r = engine.complete({"prompt": "Hello", "n_predict": 2, "temperature": 0.0})
        loop = engine.core._loop_thread
        assert loop is not None
        assert seen == ([(loop.ident, -1)] if warmup else [])
    assert r.timings.cache_n == 0  # nothing of the warm-up was reused as a prompt


def test_the_loop_reports_where_its_time_goes(tiny_model_path):
    from pyllama_yield.api.prometheus import prometheus_text
    from pyllama_yield.server.metrics import LOOP_PHASES

    with Engine.create(tiny_model_path, n_ctx=512, n_threads=1) as engine:
        engine.complete({"prompt": "Hello", "n_predict": 6, "stream": True, "n_probs": 2})
        m = engine.metrics()
    phases = m["loop_seconds"]
    assert set(phases) == set(LOOP_PHASES) and all(s >= 0 for s in phases.values())
    for phase in ("fill", "decode", "sample", "probs", "stop", "post", "publish"):
        assert phases[phase] > 0, phase
    assert phases["draft"] == 0  # no draft model
    text = prometheus_text(m)
    assert 'pyllama_yield:loop_seconds_total{phase="decode"}' in text


def test_a_failed_load_frees_what_it_made_and_says_why(tiny_model_path, monkeypatch):
    closed: list[str] = []
    original = Context.close

    def tracked(self):
        closed.append("ctx")
        original(self)

    monkeypatch.setattr(Context, "close", tracked)
    # the tiny model's cache can shift, so make the check fail after the context exists
    monkeypatch.setattr(Context, "can_shift", property(lambda self: False))
    with pytest.raises(ValueError, match="context shift"):
        Engine.create(tiny_model_path, n_ctx=256, n_threads=1, context_shift=True)
    assert closed == ["ctx"]
