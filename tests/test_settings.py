"""``serve``'s command line: llama-server's flags, LLAMA_ARG_* variables, errors that name the flag."""

from __future__ import annotations

import argparse

import pytest

from pyllama_yield.cli import add_settings_arguments, settings_from_args
from pyllama_yield.server.params import CompletionParams
from pyllama_yield.settings import ServerSettings


def parse(*argv: str):
    parser = argparse.ArgumentParser()
    add_settings_arguments(parser)
    return settings_from_args(parser.parse_args(list(argv)))


def test_llama_server_defaults():
    s = parse()
    assert (s.ctx_size, s.parallel, s.n_parallel, s.unified_kv) == (0, -1, 4, True)
    assert (s.batch_size, s.ubatch_size, s.port, s.host) == (2048, 512, 8080, "127.0.0.1")
    assert s.slots and not s.metrics and s.mmap
    d = s.completion_defaults()
    assert (d.temperature, d.top_k, d.n_predict, d.seed) == (0.8, 40, -1, 0xFFFFFFFF)
    # no flag changes a request default: the flags start from the request fields' own defaults
    assert d == CompletionParams()


def test_flags_short_and_long_and_negatives():
    s = parse(
        "-m",
        "x.gguf",
        "-c",
        "8192",
        "-np",
        "2",
        "--temp",
        "0",
        "-n",
        "9",
        "--no-slots",
        "--metrics",
        "-fa",
        "on",
        "-ctk",
        "q8_0",
        "--no-mmap",
        "-a",
        "my-model",
        "--offline",
        "--no-jinja",
        "--no-ui",
        "--samplers",
        "top_k;temperature",
        "--top-k",
        "5",
    )
    assert (s.model, s.ctx_size, s.n_parallel, s.unified_kv) == ("x.gguf", 8192, 2, False)
    assert not s.slots and s.metrics and s.flash_attn == "on" and s.cache_type_k == "q8_0" and not s.mmap
    assert s.alias == "my-model"
    d = s.completion_defaults()
    assert d.temperature == 0 and d.n_predict == 9 and d.top_k == 5 and d.samplers == ["top_k", "temperature"]


def test_environment_variables_fill_in_what_flags_leave(monkeypatch):
    monkeypatch.setenv("LLAMA_ARG_CTX_SIZE", "1024")
    monkeypatch.setenv("LLAMA_ARG_N_PARALLEL", "3")
    monkeypatch.setenv("LLAMA_ARG_ENDPOINT_METRICS", "1")
    monkeypatch.setenv("LLAMA_API_KEY", "k")
    monkeypatch.setenv("PORT", "1")  # not llama-server's name: ignored
    s = parse("-np", "2")
    assert (s.ctx_size, s.n_parallel, s.metrics, s.api_key, s.port) == (1024, 2, True, "k", 8080)


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["--spec-synth-len", "2"], "--spec-synth-len"),
        (["--model-url", "http://x/m.gguf"], "--model-url"),
        (["-nocb"], "cont-batching"),
    ],
)
def test_flags_we_cannot_honour_are_errors_that_name_them(argv, flag):
    with pytest.raises(SystemExit, match=flag):
        parse(*argv)


def test_bad_values_name_the_flag():
    with pytest.raises(SystemExit, match="--flash-attn"):
        parse("-fa", "sometimes")
    with pytest.raises(SystemExit, match="--path"):
        parse("--path", "/no/such/folder")
    assert parse().ui and not parse("--no-ui").ui and not parse("--no-webui").ui  # the page is on by default
    assert parse("--cache-ram", "0").cache_ram == 0 and parse().cache_ram == 8192  # llama-server's default


def test_every_setting_has_a_flag():
    for name, info in ServerSettings.model_fields.items():
        assert info.json_schema_extra["flags"], name


def test_reasoning_is_not_an_abbreviation_of_other_flags():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "pyllama_yield", "serve", "--reasoning", "sideways"],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert out.returncode != 0 and "--reasoning" in out.stderr and "ambiguous" not in out.stderr
    assert parse("-rea", "off").reasoning == "off"


def test_unknown_llama_arg_variables_are_refused_by_name(monkeypatch):
    monkeypatch.setenv("LLAMA_ARG_NOT_A_SETTING", "1")
    with pytest.raises(SystemExit, match="LLAMA_ARG_NOT_A_SETTING"):
        parse()
    monkeypatch.delenv("LLAMA_ARG_NOT_A_SETTING")
    monkeypatch.setenv("LLAMA_ARG_HF_REPO", "a/b")  # declared: read as its flag is
    assert parse().hf_repo == "a/b"


def test_flags_build_the_engine_config_through_its_one_constructor():
    from pyllama_yield.cli import engine_config_from_settings

    s = parse("-a", "x", "-md", "/d.gguf", "--lora-scaled", "/a.gguf:0.5", "-ngl", "5", "--reasoning", "off")
    cfg = engine_config_from_settings(s, "/m.gguf")
    assert (cfg.model.path, cfg.model.name, cfg.model.n_gpu_layers) == ("/m.gguf", "x", 5)
    assert (cfg.draft.path, cfg.draft.n_max, cfg.chat.enable_thinking) == ("/d.gguf", 16, False)
    assert cfg.lora == (("/a.gguf", 0.5),) and cfg.defaults == s.completion_defaults()
