"""Completion features through the server context, on a C-backed tiny model: constrained output,
probabilities, logit bias, seeds, several prompts and choices, prompt forms."""

from __future__ import annotations

import json
import math

import pytest

from pyllama_yield.server import ContextOverflowError, Engine
from pyllama_yield.server.results import PromptProgress


@pytest.fixture(scope="module")
def srv(tiny_model_path):
    with Engine.create(tiny_model_path, n_ctx=2048, n_parallel=4, n_threads=1) as s:
        yield s


def run(srv: Engine, **kw) -> list[dict]:
    """Every final result of one request, in the request's order."""
    tasks = srv.tasks.make_tasks({"n_predict": 8, "temperature": 0.0, **kw})
    with srv.submit(tasks) as reader:
        batch = reader.wait_for_all(lambda: False)
    assert batch.error is None, batch.error and batch.error.payload
    return sorted((r.payload for r in batch.results), key=lambda p: p.index)


def test_grammar_constrains_a_random_model(srv):
    outs = run(srv, prompt="Answer:", grammar='root ::= ("yes" | "no") "."', temperature=1.0, seed=3, n_predict=20)
    assert outs[0].content in ("yes.", "no.") and outs[0].stop_type == "eos"


def test_json_schema_output_parses_and_matches(srv):
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 5}, "age": {"type": "integer"}},
        "required": ["name", "age"],
        "additionalProperties": False,
    }
    out = run(srv, prompt="JSON:", json_schema=schema, n_predict=60, temperature=1.0, seed=1)[0]
    assert out.stop_type == "eos", out
    value = json.loads(out.content)
    assert set(value) == {"name", "age"} and isinstance(value["age"], int) and len(value["name"]) <= 5


def test_pre_sampling_probs_shape_and_values(srv):
    out = run(srv, prompt="Hello", n_probs=5, n_predict=4)[0]
    probs = out.probs
    assert len(probs) == 4
    for entry in (e.json() for e in probs):  # llama-server's completion_probabilities entries
        assert set(entry) == {"id", "token", "bytes", "logprob", "top_logprobs"}
        tops = entry["top_logprobs"]
        assert len(tops) == 5 and tops[0]["id"] == entry["id"]  # greedy: the sampled token is the top one
        lps = [t["logprob"] for t in tops]
        assert lps == sorted(lps, reverse=True) and all(lp <= 0 for lp in lps)
        assert math.isclose(entry["logprob"], tops[0]["logprob"], rel_tol=1e-6)
        assert bytes(tops[0]["bytes"]).decode("utf-8", "replace").startswith(tops[0]["token"][:1])


def test_post_sampling_probs_follow_the_chain(srv):
    out = run(srv, prompt="Hello", n_probs=3, post_sampling_probs=True, temperature=1.0, top_k=2, seed=4)[0]
    for entry in (e.json() for e in out.probs):
        assert set(entry) == {"id", "token", "bytes", "prob", "top_probs"}
        tops = entry["top_probs"]
        assert 1 <= len(tops) <= 2  # top_k=2 left two candidates (zero-probability ones are dropped)
        assert math.isclose(sum(t["prob"] for t in tops), 1.0, rel_tol=1e-4)
        assert entry["id"] in [t["id"] for t in tops]


def test_logit_bias_bans_the_greedy_token_and_ignore_eos(srv):
    first = run(srv, prompt="Hello", n_predict=1, return_tokens=True)[0].tokens[0]
    banned = run(srv, prompt="Hello", n_predict=1, return_tokens=True, logit_bias=[[first, False]])[0]
    assert banned.tokens[0] != first
    as_dict = run(srv, prompt="Hello", n_predict=1, return_tokens=True, logit_bias={str(first): -1e9})[0]
    assert as_dict.tokens[0] != first
    g = run(srv, prompt="Hello", n_predict=2, ignore_eos=True)[0].generation_settings
    assert g["ignore_eos"] is True and any(b["bias"] is None for b in g["logit_bias"])


def test_seed_makes_sampling_repeatable(srv):
    a = run(srv, prompt="Once", temperature=1.5, top_k=0, top_p=1.0, min_p=0.0, seed=42, n_predict=12)[0]
    b = run(srv, prompt="Once", temperature=1.5, top_k=0, top_p=1.0, min_p=0.0, seed=42, n_predict=12)[0]
    c = run(srv, prompt="Once", temperature=1.5, top_k=0, top_p=1.0, min_p=0.0, seed=43, n_predict=12)[0]
    assert a.content == b.content and a.content != c.content


def test_samplers_dry_xtc_typical_mirostat_run(srv):
    for extra in (
        {"samplers": ["top_k", "temperature"], "top_k": 1},
        {"dry_multiplier": 0.8, "dry_allowed_length": 1},
        {"xtc_probability": 0.5, "xtc_threshold": 0.05},
        {"typical_p": 0.5},
        {"mirostat": 2, "mirostat_tau": 3.0},
        {"repeat_penalty": 1.3, "frequency_penalty": 0.5, "presence_penalty": 0.5},
    ):
        out = run(srv, prompt="Once upon", temperature=0.9, seed=7, ignore_eos=True, **extra)[0]
        assert out.tokens_predicted == 8, extra
    greedy = run(srv, prompt="Once upon", ignore_eos=True, return_tokens=True)[0].tokens
    top1 = run(srv, prompt="Once upon", temperature=2.0, top_k=1, seed=9, ignore_eos=True, return_tokens=True)
    assert top1[0].tokens == greedy  # top_k=1 is greedy, whatever the temperature


def test_several_prompts_choices_and_prompt_forms(srv):
    outs = run(srv, prompt=["Hello", "Goodbye"], n_cmpl=2, temperature=1.0, seed=5, n_predict=3)
    assert [o.index for o in outs] == [0, 1, 2, 3]
    ids = srv.tasks.tokenize("Hello world", True, True)
    by_text = run(srv, prompt="Hello world", return_tokens=True)[0]
    by_ids = run(srv, prompt=ids, return_tokens=True)[0]
    mixed = run(srv, prompt=[ids[0], *srv.tasks.tokenize("Hello", False, True), " world"], return_tokens=True)[0]
    assert by_text.tokens == by_ids.tokens and by_text.tokens_evaluated == len(ids)
    assert mixed.tokens_evaluated >= 3
    with pytest.raises(ValueError, match="prompt"):
        srv.tasks.make_tasks({"prompt": [{"bad": 1}]})


def test_n_predict_zero_return_tokens_and_settings(srv):
    out = run(srv, prompt="Hello there", n_predict=0)[0]
    assert out.content == "" and out.tokens_predicted == 0 and out.stop_type == "limit"
    out = run(srv, prompt="Hello", n_predict=3, ignore_eos=True)[0]
    assert out.tokens == []  # only with return_tokens
    assert out.generation_settings["n_predict"] == 3 and out.prompt == "Hello"
    assert {"prompt_per_token_ms", "predicted_per_token_ms"} <= set(out.timings.json())


def test_context_overflow_names_the_sizes(srv):
    with pytest.raises(ContextOverflowError) as info:
        srv.tasks.make_tasks({"prompt": "word " * 600})
    assert info.value.n_ctx == srv.n_ctx_slot and info.value.n_prompt_tokens > srv.n_ctx_slot


def test_streamed_probs_and_timings_per_token(srv):
    tasks = srv.tasks.make_tasks(
        {
            "prompt": "Hi",
            "n_predict": 4,
            "stream": True,
            "n_probs": 2,
            "timings_per_token": True,
            "temperature": 0.0,
            "ignore_eos": True,
        }
    )
    partials = []
    with srv.submit(tasks) as reader:
        while True:
            r = reader.next(lambda: False)
            if r.is_final:
                final = r.payload
                break
            partials.append(r.payload)
    assert len(partials) == 4 and all(len(p.probs) == 1 for p in partials)
    assert all(p.timings is not None for p in partials)
    assert final.probs is None  # streamed ones are not repeated


def test_context_shift_keeps_generating_past_the_context(tiny_model_path):
    body = {"prompt": "Once upon a time", "n_predict": 600, "temperature": 0.0, "ignore_eos": True, "n_keep": 2}
    with Engine.create(tiny_model_path, n_ctx=256, n_threads=1) as plain:
        cut = run(plain, **body)[0]
    assert cut.truncated and cut.tokens_predicted < 256 and cut.stop_type == "limit"
    with Engine.create(tiny_model_path, n_ctx=256, n_threads=1, context_shift=True) as shifting:
        out = run(shifting, **body)[0]
        again = run(shifting, prompt="Hello", n_predict=3)[0]  # the slot is usable afterwards
    assert out.tokens_predicted == 600 and out.truncated and out.stop_type == "limit"
    assert again.tokens_predicted == 3
    # with a draft model both caches shift; the target drafting for itself accepts every draft,
    # so the tokens are those of plain decoding
    with Engine.create(
        tiny_model_path, n_ctx=256, n_threads=1, context_shift=True, draft_model_path=tiny_model_path, n_draft=4
    ) as speculative:
        spec = run(speculative, **body)[0]
    assert spec.tokens_predicted == 600 and spec.truncated
    assert spec.content == out.content and spec.timings.draft_n_accepted > 0


def test_a_full_unified_cache_frees_idle_slots_then_fails_in_llama_servers_words(tiny_model_path):
    with Engine.create(tiny_model_path, n_ctx=256, n_parallel=4, kv_unified=True, n_threads=1) as srv:
        # an idle slot holds a cached prompt: a request that needs its cells gets them
        assert run(srv, prompt="word " * 100, n_predict=4)[0].tokens_predicted == 4
        long = run(srv, prompt="Once", n_predict=200, ignore_eos=True)[0]
        assert long.tokens_predicted == 200
        # four requests that together outgrow the pool: each ends, done or failed as llama-server says
        tasks = [
            t for _ in range(4) for t in srv.tasks.make_tasks({"prompt": "A", "n_predict": 90, "ignore_eos": True})
        ]
        with srv.submit(tasks) as reader:
            outcomes = []
            while reader.has_next():
                r = reader.next(lambda: False)
                if r.is_error:
                    outcomes.append(r.payload.message)
                    break
                if r.is_final:
                    outcomes.append(r.payload.tokens_predicted)
        assert "Context size has been exceeded." in outcomes, outcomes
        assert run(srv, prompt="Hello", n_predict=3)[0].tokens_predicted == 3  # and the server goes on


def test_timings_count_decode_steps_and_progress_carries_them(tiny_model_path):
    """llama-server's timing rules: the first token comes free with the prompt's logits, so one
    generated token has no generation rate; prompt progress starts at 0 % and, with
    ``timings_per_token``, every progress event has timings whose prompt time only grows."""
    with Engine.create(tiny_model_path, n_ctx=512, n_batch=32, n_threads=1) as srv:
        one = run(srv, prompt="Hello", n_predict=1)[0].timings.json()  # llama-server's timings object
        assert (one["predicted_n"], one["predicted_per_second"], one["predicted_per_token_ms"]) == (1, 0.0, 0.0)
        t = run(srv, prompt="Hello", n_predict=16, ignore_eos=True)[0].timings.json()
        assert math.isclose(t["predicted_per_second"], 15 * 1e3 / t["predicted_ms"], rel_tol=1e-9)
        assert math.isclose(t["predicted_per_token_ms"], t["predicted_ms"] / 15, rel_tol=1e-9)

        body = {"prompt": "word " * 70, "n_predict": 2, "stream": True, "return_progress": True}
        events = []
        with srv.submit({**body, "timings_per_token": True, "cache_prompt": False}) as reader:
            while (r := reader.next(lambda: False)) is not None:
                events.append(r.payload)
                if r.is_final:
                    break
    progress = [e for e in events if isinstance(e, PromptProgress)]
    assert len(progress) >= 3 and all(e.timings is not None for e in progress)
    first = progress[0]
    assert first.processed == 0 and first.native()["prompt_progress"]["processed"] == 0
    assert (first.timings.prompt_n, first.timings.prompt_ms, first.timings.predicted_n) == (0, 0, 0)
    prompt_ms = [e.timings.prompt_ms for e in progress]
    assert prompt_ms == sorted(prompt_ms) and prompt_ms[-1] > 0
    assert progress[-1].processed == progress[-1].total


def test_prompt_logprobs_rate_every_prompt_token_even_over_several_batches(tiny_model_path):
    """prompt_logprobs (vLLM's field): the logits at prompt position p rate token p+1; a prompt
    split over several batches and a cached prefix change nothing."""
    with Engine.create(tiny_model_path, n_ctx=512, n_batch=16, n_threads=1) as small:
        tokens = small.tasks.tokenize(
            "The quick brown fox jumps over the lazy dog, then naps in the sun all day", True, True
        )
        assert len(tokens) > 16  # more than one batch
        body = {"prompt": tokens, "n_predict": 1, "temperature": 0.0, "prompt_logprobs": 3}
        first = run(small, **body)[0]
        again = run(small, **body)[0]  # the whole prompt is cached now: it is evaluated anyway
        plain = run(small, prompt=tokens, n_predict=1, temperature=0.0)[0]
    entries = first.prompt_probs
    assert [e.id for e in entries] == tokens[1:]
    assert all(e.logprob <= 0 and len(e.top) == 3 for e in entries)
    assert [e.logprob for e in again.prompt_probs] == pytest.approx([e.logprob for e in entries])
    assert again.timings.cache_n == 0 and plain.prompt_probs is None
    # position p's logits are the ones a completion of tokens[:p+1] samples from
    with Engine.create(tiny_model_path, n_ctx=512, n_threads=1) as ref:
        nxt = run(ref, prompt=tokens[:5], n_predict=1, temperature=0.0, n_probs=1)[0]
    top = nxt.probs[0].top[0]
    assert (top.id, top.logprob) == (
        entries[4].top[0].id,
        pytest.approx(entries[4].top[0].logprob, abs=1e-3),
    )


def test_a_slot_reuses_its_sampler_as_new_for_the_same_parameters(tiny_model_path):
    """A task with the sampling parameters of the slot's last one gets that sampler back, reset:
    it draws what a new one would (seeded draws, penalties that forgot the last task's tokens);
    other parameters get a new one."""
    params = {"temperature": 1.5, "top_k": 0, "top_p": 1.0, "min_p": 0.0, "seed": 9, "repeat_penalty": 1.5}
    with Engine.create(tiny_model_path, n_ctx=512, n_parallel=1, n_threads=1) as one:
        slot = one.core.slots[0]
        first = run(one, prompt="Once", n_predict=12, cache_prompt=False, **params)[0]
        kept = slot.spent_sampler
        run(one, prompt="Hello there", n_predict=12, cache_prompt=False, **params)
        assert slot.spent_sampler is kept  # reused, not made anew
        again = run(one, prompt="Once", n_predict=12, cache_prompt=False, **params)[0]
        assert slot.spent_sampler is kept and again.content == first.content
        run(one, prompt="Once", n_predict=2, cache_prompt=False, **{**params, "seed": 10})
        assert slot.spent_sampler is not kept
