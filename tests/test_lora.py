"""LoRA adapters: the binding, the server's per-slot scales and batching, and the HTTP routes.

The adapters are random and strong (``testing.make_lora_adapter``), so applying one changes the
greedy tokens of the tiny model, and scale 0 gives back the base model's tokens exactly.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pyllama_yield.llama import Context, Model, ModelLoadError
from pyllama_yield.lora import LoraAdapter, set_loras
from pyllama_yield.server import Engine
from pyllama_yield.testing import make_draft_model, make_lora_adapter

PROMPT = "Once upon a time"
GREEDY = {"prompt": PROMPT, "n_predict": 8, "temperature": 0.0, "ignore_eos": True, "return_tokens": True}


@pytest.fixture(scope="module")
def adapter_path(tiny_model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_lora_adapter(tmp_path_factory.mktemp("lora") / "a.gguf", tiny_model_path, task_name="demo")


def greedy_tokens(ctx: Context, adapters: list[tuple[LoraAdapter, float]]) -> list[int]:
    from test_llama import greedy

    set_loras(ctx, adapters)
    return greedy(ctx, ctx.model.vocab.tokenize(PROMPT), 8)[0]


def test_adapter_changes_tokens_and_scale_zero_is_the_base(tiny_model: Model, adapter_path: Path):
    adapter = LoraAdapter(tiny_model, adapter_path)
    assert adapter.task_name == "demo" and adapter.meta("adapter.type") == "lora"
    assert adapter.invocation_tokens == [] and adapter.meta("no.such.key") is None
    with Context(tiny_model, n_ctx=256, n_threads=1) as ctx:
        base = greedy_tokens(ctx, [])
    with Context(tiny_model, n_ctx=256, n_threads=1) as ctx:
        applied = greedy_tokens(ctx, [(adapter, 1.0)])
        ctx.memory_clear()
        assert greedy_tokens(ctx, [(adapter, 0.0)]) == base  # the same context, adapter taken off
    assert applied != base


def test_bad_adapters_are_clear_errors(tiny_model: Model, tmp_path: Path):
    other = make_draft_model(tmp_path / "other.gguf")  # another shape: n_embd 32, not 64
    wrong = make_lora_adapter(tmp_path / "wrong.gguf", other)
    with pytest.raises(ModelLoadError, match="could not load the LoRA adapter .*wrong.gguf.*incorrect shape"):
        LoraAdapter(tiny_model, wrong)
    with pytest.raises(FileNotFoundError):
        LoraAdapter(tiny_model, tmp_path / "missing.gguf")
    with Model(other) as other_model, Context(tiny_model, n_ctx=64, n_threads=1) as ctx:
        foreign = LoraAdapter(other_model, make_lora_adapter(tmp_path / "ok.gguf", other))
        with pytest.raises(ValueError, match="another model"):
            set_loras(ctx, [(foreign, 1.0)])


@pytest.fixture(scope="module")
def lora_server(tiny_model_path: Path, adapter_path: Path):
    with Engine.create(tiny_model_path, n_ctx=2048, n_parallel=2, n_threads=1, lora=[(adapter_path, 1.0)]) as srv:
        yield srv


def test_requests_choose_their_scales_and_mixed_slots_stay_apart(lora_server: Engine):
    srv = lora_server
    applied = srv.complete(GREEDY).tokens
    base = srv.complete({**GREEDY, "lora": [{"id": 0, "scale": 0.0}]}).tokens
    assert applied != base
    assert srv.complete({**GREEDY, "lora": [{"id": 7, "scale": 1.0}]}).tokens == base  # unknown ids: ignored
    assert srv.complete({**GREEDY, "lora": []}).tokens == applied  # empty: the server's scales
    # both at once, on two slots: each decodes with its own scales (never in one batch)
    readers = [srv.submit(GREEDY), srv.submit({**GREEDY, "lora": [{"id": 0, "scale": 0.0}]})]
    got = []
    for reader in readers:
        with reader:
            got.append(reader.wait_for_all(lambda: False).results[0].payload.tokens)
    assert got == [applied, base]
    # a slot's prompt cache is not reused across scales: same prompt, other adapter, base tokens
    res = srv.complete({**GREEDY, "id_slot": 0, "lora": [{"id": 0, "scale": 0.0}]})
    assert res.tokens == base
    res = srv.complete({**GREEDY, "id_slot": 0})
    assert res.tokens == applied and res.timings.cache_n == 0
    assert srv.complete({**GREEDY, "id_slot": 0}).timings.cache_n > 0  # same scales: reused
    settings = srv.complete({**GREEDY, "lora": [{"id": 0, "scale": 0.5}]}).generation_settings
    assert settings["lora"] == [{"id": 0, "scale": 0.5}]


def test_http_lora_adapters_routes(tiny_model_path: Path, adapter_path: Path):
    httpx = pytest.importorskip("httpx")
    from http_server import start_server, stop_server

    proc, base_url = start_server(
        tiny_model_path, "-np", "2", "-c", "2048", "-t", "1", "--lora-scaled", f"{adapter_path}:0.75"
    )
    try:
        with httpx.Client(base_url=base_url, timeout=120) as c:
            (entry,) = c.get("/lora-adapters").json()
            assert entry == {
                "id": 0,
                "path": str(adapter_path),
                "scale": 0.75,
                "task_name": "demo",
                "prompt_prefix": "",
            }
            scaled = c.post("/completion", json=GREEDY).json()["tokens"]
            assert c.post("/lora-adapters", json=[{"id": 0, "scale": 0}]).json() == {"success": True}
            assert c.get("/lora-adapters").json()[0]["scale"] == 0.0
            base = c.post("/completion", json=GREEDY).json()["tokens"]
            per_request = c.post("/completion", json={**GREEDY, "lora": [{"id": 0, "scale": 0.75}]}).json()
            assert per_request["tokens"] == scaled != base
            chat = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "lora": [{"id": 0, "scale": 1}]}
            assert c.post("/v1/chat/completions", json=chat).status_code == 200
            for bad in ({"id": 0, "scale": 1}, [{"id": "zero"}], "[", [{"scale": "big"}]):
                kw = {"content": bad} if isinstance(bad, str) else {"json": bad}
                r = c.post("/lora-adapters", **kw)
                assert r.status_code == 400, bad
            r = c.post("/completion", json={**GREEDY, "lora": {"id": 0}})
            assert r.status_code == 400 and "lora" in r.json()["error"]["message"]
    finally:
        out = stop_server(proc)
    assert proc.returncode == 0, out[-2000:]


def test_lora_flags(tmp_path: Path):
    from pyllama_yield.cli import settings_from_args
    from pyllama_yield.settings import ServerSettings

    s = ServerSettings(lora=["a.gguf,b.gguf"], lora_scaled=["c:/x.gguf:0.5"])
    assert s.lora_adapters == [("a.gguf", 1.0), ("b.gguf", 1.0), ("c:/x.gguf", 0.5)]
    assert ServerSettings(lora=["a.gguf"], lora_init_without_apply=True).lora_adapters == [("a.gguf", 0.0)]
    import argparse

    from pyllama_yield.cli import add_settings_arguments

    parser = argparse.ArgumentParser()
    add_settings_arguments(parser)
    with pytest.raises(SystemExit, match="--lora-scaled.*FNAME:SCALE"):
        settings_from_args(parser.parse_args(["--lora-scaled", "x.gguf"]))
