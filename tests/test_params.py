"""Request fields → task parameters, by llama-server's rules (server-schema.cpp at our pin)."""

from __future__ import annotations

import math

import pytest

from pyllama_yield.common import json_schema_to_grammar
from pyllama_yield.server.params import CompletionParams
from pyllama_yield.server.task_params import resolve


class FakeTokenizer:
    n_vocab = 100
    eog_tokens = [2, 99]

    def tokenize(self, text: str, add_special: bool = False, parse_special: bool = False) -> list[int]:
        return [10 + (ord(c) % 50) for c in text]


def params(data: dict, **kw):
    p = CompletionParams.model_validate(data).over(CompletionParams())
    return resolve(p, FakeTokenizer(), json_schema_to_grammar, n_parallel=kw.get("n_parallel", 4))


def test_defaults_are_llama_servers():
    t = params({})
    s = t.sampling
    assert (s["temp"], s["top_k"], s["top_p"], s["min_p"]) == (0.8, 40, 0.95, 0.05)
    assert (s["penalty_last_n"], s["penalty_repeat"], s["seed"]) == (64, 1.0, 0xFFFFFFFF)
    assert t.n_predict == -1 and t.cache_prompt and not t.stream and t.n_probs == 0
    assert t.settings["samplers"][0] == "penalties" and t.settings["samplers"][-1] == "temperature"


def test_soft_ranges_clamp_and_hard_ranges_refuse():
    t = params({"top_p": 7, "min_p": -1, "temperature": -3, "top_k": -5, "mirostat": 9, "xtc_threshold": 2})
    s = t.sampling
    assert (s["top_p"], s["min_p"], s["temp"], s["top_k"], s["mirostat"], s["xtc_threshold"]) == (1, 0, 0, 0, 2, 1)
    for bad in (
        {"n_predict": -2},
        {"repeat_last_n": -1},
        {"dry_allowed_length": -1},
        {"min_keep": -1},
        {"adaptive_decay": 1.0},
        {"n_keep": -2},
    ):
        with pytest.raises(ValueError, match=next(iter(bad))):
            params(bad)


def test_types_null_aliases_and_unknown_fields():
    with pytest.raises(ValueError):
        params({"temperature": "hot"})
    with pytest.raises(ValueError):
        params({"stream": 1})
    t = params({"temperature": None, "max_tokens": 7, "bogus": [1], "n": 2, "logprobs": 3, "seed": -1})
    assert t.sampling["temp"] == 0.8 and t.n_predict == 7 and t.n_probs == 3 and t.sampling["seed"] == 0xFFFFFFFF
    assert params({"n_predict": 3, "max_tokens": 9}).n_predict == 3  # n_predict wins over its aliases
    assert params({"max_completion_tokens": 5, "max_tokens": 9}).n_predict == 5
    with pytest.raises(ValueError, match="n_cmpl"):
        params({"n": 5}, n_parallel=4)


def test_defaults_from_the_server_are_overridden_field_by_field():
    server = CompletionParams(temperature=0.0, top_k=5)
    p = CompletionParams.model_validate({"top_k": 9}).over(server)
    assert p.temperature == 0.0 and p.top_k == 9


def test_logit_bias_both_forms_ban_and_ignore_eos():
    t = params({"logit_bias": [[5, 1.5], [7, False], ["a", -2], [1000, 1], "junk", [3, "x"]]})
    assert t.sampling["logit_bias"] == [[5, 1.5], [7, None], [10 + ord("a") % 50, -2.0]]
    t = params({"logit_bias": {"5": 2, "-1": 1, "ab": False}, "ignore_eos": True})
    assert t.sampling["logit_bias"][0] == [5, 2.0]
    assert [5, 2.0] in t.sampling["logit_bias"] and [2, None] in t.sampling["logit_bias"]
    assert [99, None] in t.sampling["logit_bias"]
    assert {"bias": None, "token": 2} in t.settings["logit_bias"]


def test_samplers_stop_and_dry():
    assert params({"samplers": "kt"}).sampling["samplers"] == ["top_k", "temperature"]
    assert params({"samplers": ["min_p", "temperature"]}).sampling["samplers"] == ["min_p", "temperature"]
    assert params({"stop": "END"}).stop == ["END"]
    assert params({"stop": ["a", "", "b"]}).stop == ["a", "b"]
    assert params({"dry_base": 0.5}).sampling["dry_base"] == 1.75  # below 1: the default, as llama-server
    with pytest.raises(ValueError):
        params({"dry_sequence_breakers": []})


def test_json_schema_becomes_a_grammar_and_grammar_wins_when_both():
    t = params({"json_schema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}})
    assert t.sampling["grammar"].startswith("n-kv ::=") or "root ::=" in t.sampling["grammar"]
    assert t.sampling["grammar_type"] == 2
    assert "root" in params({"json_schema": {}}).sampling["grammar"]  # empty schema: any object
    both = params({"json_schema": {"type": "string"}, "grammar": 'root ::= "x"'})
    assert both.sampling["grammar"] == 'root ::= "x"' and both.sampling["grammar_type"] == 1
    with pytest.raises(ValueError, match="json_schema"):
        params({"json_schema": {"$ref": "#/missing"}})


def test_generation_settings_echo_the_request():
    t = params({"temperature": 0.5, "n_predict": 9, "stop": ["x"], "post_sampling_probs": True})
    g = t.settings
    assert g["temperature"] == 0.5 and g["n_predict"] == 9 and g["max_tokens"] == 9 and g["stop"] == ["x"]
    assert g["post_sampling_probs"] is True and math.isclose(g["top_p"], 0.95)


def test_lora_entries_are_read_with_llama_servers_defaults():
    assert params({"lora": []}).lora is None  # empty: the server's scales
    assert params({"lora": [{"id": 0, "scale": 0.5}, {"id": 2}]}).lora == {0: 0.5, 2: 0.0}
    with pytest.raises(ValueError, match="lora"):
        params({"lora": {"id": 0}})
    with pytest.raises(ValueError, match="lora"):
        params({"lora": [{"id": "zero", "scale": 1}]})


# --- the task builder keeps what a request's fields resolved to ------------------------------------


@pytest.fixture
def builder(tiny_model):
    from pyllama_yield.server.task_builder import TaskBuilder, TaskLimits

    limits = TaskLimits(
        n_parallel=4, n_ctx_slot=512, n_batch=512, n_ubatch=512, n_predict_max=-1, n_probs_max=100,
        embedding=False, pooling="none",
    )  # fmt: skip
    return TaskBuilder(tiny_model, None, CompletionParams(), limits, tiny_model.vocab.eog_tokens())


FIELDS = [
    {},
    {"n_predict": 4, "temperature": 0.0, "stream": True},
    {"n_predict": 4, "temperature": 0.5, "stream": True},  # differs in one value only
    {"stop": ["\n", "x"], "logit_bias": [[5, -1.5]], "ignore_eos": True, "n_probs": 2, "n": 2},
    {"grammar": 'root ::= "a"+', "samplers": "kt", "lora": [], "response_fields": ["content"]},
]


def test_the_same_fields_resolve_once_and_each_request_gets_its_own_copy(builder, monkeypatch):
    from pyllama_yield.server import task_builder

    calls = []
    real = task_builder.resolve
    monkeypatch.setattr(task_builder, "resolve", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    for fields in FIELDS:
        validated = CompletionParams.model_validate(fields).over(CompletionParams())
        fresh = real(validated, builder, json_schema_to_grammar, n_parallel=4)
        n_before = len(calls)
        first = builder.make_tasks({"prompt": "one", **fields})
        again = builder.make_tasks({**fields, "prompt": "two other words"})  # other prompt, key order
        assert len(calls) == n_before + 1
        assert first[0].params == again[0].params == fresh
        assert first[0].params is not again[0].params
        assert len(first) == fresh.n_cmpl and all(t.params is first[0].params for t in first)
        first[0].params.report_position = not first[0].params.report_position  # the bridge's own
        assert builder.make_tasks({"prompt": "three", **fields})[0].params.report_position is False


def test_a_refused_request_is_refused_every_time(builder):
    for _ in range(2):
        with pytest.raises(ValueError, match="top_k"):
            builder.make_tasks({"prompt": "a", "top_k": "many"})
        with pytest.raises(ValueError, match="n_cmpl"):
            builder.make_tasks({"prompt": "a", "n": 9})  # over n_parallel: refused by resolve
    builder.make_tasks({"prompt": "a", "n_predict": 3})
    with pytest.raises(ValueError, match='"prompt" is required'):
        builder.make_tasks({"n_predict": 3})  # the same fields, kept, but no prompt


def test_fields_that_change_every_time_or_are_not_json_still_resolve(builder):
    from pyllama_yield.server.task_builder import RESOLVED_KEPT

    for i in range(RESOLVED_KEPT * 2 + 3):
        assert builder.make_tasks({"prompt": "a", "n_predict": i})[0].params.n_predict == i
    odd = {"prompt": "a", "n_predict": 7, "user": object()}  # from Python, not JSON: resolved each time
    with pytest.raises(ValueError, match="user"):
        builder.make_tasks(odd)
    assert builder.make_tasks({"prompt": "a", "n_predict": 7, 1: "x"})[0].params.n_predict == 7


def test_fields_that_carry_content_are_not_kept(builder, monkeypatch):
    from pyllama_yield.server import task_builder

    calls = []
    real = task_builder.resolve
    monkeypatch.setattr(task_builder, "resolve", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    large = {"prompt": "a", "input_extra": [{"text": "x" * task_builder.RESOLVED_KEY_MAX}]}
    small = {"prompt": "a", "input_extra": [{"text": "x"}]}
    for _ in range(2):
        builder.make_tasks(large)
        builder.make_tasks(small)
    assert len(calls) == 3  # the large fields each time, the small ones once
