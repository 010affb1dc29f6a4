"""``pyllama_yield.Llama``: llama-cpp-python's calls and result shapes on a C-backed tiny model,
one engine batching many threads, typed errors, and a clean stop."""

from __future__ import annotations

import asyncio
import gc
import json
import threading
from pathlib import Path

import pytest

from pyllama_yield import Llama, LlamaGrammar
from pyllama_yield.client import ContextOverflowError, GrammarError
from pyllama_yield.testing import make_tiny_model

TIMEOUT = 60
CHAT = [{"role": "system", "content": "You are an assistant."}, {"role": "user", "content": "Hello"}]
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


@pytest.fixture(scope="module")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # a GPT-2 vocab: ChatML's markers are plain text there, so template grammars accept them
    return make_tiny_model(tmp_path_factory.mktemp("api") / "tiny-gpt2.gguf", vocab="gpt-2")


@pytest.fixture(scope="module")
def llm(model_path: Path):
    with Llama(str(model_path), n_ctx=512, n_parallel=4, n_threads=1) as llm:
        yield llm


def loop_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "pyllama-server-loop"]


def test_completion_shape_stop_and_echo(llm):
    out = llm("Q: Name the planets in the solar system? A: ", max_tokens=32, stop=["Q:", "\n"], echo=True, seed=1)
    assert out["id"].startswith("cmpl-") and out["object"] == "text_completion"
    assert isinstance(out["created"], int) and out["model"] == llm.model_path
    (choice,) = out["choices"]
    assert choice["text"].startswith("Q: Name the planets in the solar system? A: ")
    assert choice["index"] == 0 and choice["logprobs"] is None and choice["finish_reason"] in ("stop", "length")
    usage = out["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"] and usage["prompt_tokens"] > 5
    # a stop string ends the text before it, with finish_reason "stop"
    greedy = llm("Once upon a time", max_tokens=12, temperature=0)["choices"][0]["text"]
    word = greedy.split()[2]
    cut = llm("Once upon a time", max_tokens=12, temperature=0, stop=[word])["choices"][0]
    assert cut["finish_reason"] == "stop" and word not in cut["text"] and greedy.startswith(cut["text"])


def test_logprobs_without_any_switch(llm):
    out = llm("Hello", max_tokens=4, temperature=0, logprobs=3)
    lp = out["choices"][0]["logprobs"]
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == 4
    assert "".join(lp["tokens"]) == out["choices"][0]["text"]
    # offsets count in the prompt and the text, as OpenAI's (and llama-cpp-python's) do
    assert lp["text_offset"] == [len("Hello") + sum(len(t) for t in lp["tokens"][:i]) for i in range(4)]
    for token, logprob, top in zip(lp["tokens"], lp["token_logprobs"], lp["top_logprobs"], strict=True):
        assert top[token] == logprob <= 0 and len(top) <= 4
        assert logprob == max(top.values())  # greedy picks the most likely token


def test_echo_with_logprobs_rates_the_prompt_tokens_too(llm):
    prompt = "The quick brown fox jumps"
    n_prompt = len(llm.tokenize(prompt.encode()))
    out = llm(prompt, max_tokens=3, temperature=0, logprobs=2, echo=True)
    choice = out["choices"][0]
    lp = choice["logprobs"]
    assert choice["text"].startswith(prompt) and len(lp["tokens"]) == n_prompt + 3  # this vocab adds no BOS
    assert "".join(lp["tokens"]) == choice["text"]
    assert lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None
    assert all(x is not None and x <= 0 for x in lp["token_logprobs"][1:])
    assert lp["text_offset"] == [sum(len(t) for t in lp["tokens"][:i]) for i in range(len(lp["tokens"]))]
    # the generated part matches a call without echo, and a prompt token's logprob matches what a
    # completion of the prompt before it says about that token
    plain = llm(prompt, max_tokens=3, temperature=0, logprobs=2)["choices"][0]["logprobs"]
    assert lp["tokens"][n_prompt:] == plain["tokens"]
    assert lp["token_logprobs"][n_prompt:] == pytest.approx(plain["token_logprobs"], abs=1e-4)
    head = llm.detokenize(llm.tokenize(prompt.encode())[:2]).decode()
    nxt = llm(head, max_tokens=1, temperature=0, logprobs=50)["choices"][0]["logprobs"]["top_logprobs"][0]
    if lp["tokens"][2] in nxt:
        assert nxt[lp["tokens"][2]] == pytest.approx(lp["token_logprobs"][2], abs=1e-4)


def test_streams_are_chunks_in_its_shapes(llm):
    chunks = list(llm("Hello", max_tokens=5, temperature=0, stream=True))
    whole = llm("Hello", max_tokens=5, temperature=0)["choices"][0]["text"]
    assert "".join(c["choices"][0]["text"] for c in chunks) == whole
    assert len({c["id"] for c in chunks}) == 1 and all(c["object"] == "text_completion" for c in chunks)
    assert [c["choices"][0]["finish_reason"] for c in chunks][-1] == "length"
    assert chunks[-1]["choices"][0]["text"] == "" and "usage" not in chunks[-1]
    chat = list(llm.create_chat_completion(messages=CHAT, max_tokens=4, temperature=0, stream=True))
    assert chat[0]["choices"][0]["delta"] == {"role": "assistant"} and chat[0]["object"] == "chat.completion.chunk"
    assert chat[-1]["choices"][0]["delta"] == {} and chat[-1]["choices"][0]["finish_reason"] == "length"
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chat)
    assert text == llm.create_chat_completion(messages=CHAT, max_tokens=4, temperature=0)["choices"][0]["message"][
        "content"
    ]


def test_leaving_a_stream_early_cancels_it(llm):
    stream = llm("Hello", max_tokens=400, stream=True)
    next(stream)
    stream.close()  # the request is cancelled: its slot frees without generating 400 tokens
    snap = llm._engine.metrics()
    assert snap["requests_processing"] == 0 or all(s["n_decoded"] < 400 for s in snap["slots"])


def test_chat_shape_and_n_choices(llm):
    out = llm.create_chat_completion(messages=CHAT, max_tokens=6, n=2, seed=5, temperature=1.0)
    assert out["id"].startswith("chatcmpl-") and out["object"] == "chat.completion"
    assert [c["index"] for c in out["choices"]] == [0, 1]
    for c in out["choices"]:
        assert c["message"]["role"] == "assistant" and isinstance(c["message"]["content"], str)
        assert "tool_calls" not in c["message"] and c["finish_reason"] == "length"
    assert out["usage"]["completion_tokens"] == 12
    lp = llm.create_chat_completion(messages=CHAT, max_tokens=3, logprobs=True, top_logprobs=2)["choices"][0]
    entries = lp["logprobs"]["content"]
    assert len(entries) == 3 and all(len(e["top_logprobs"]) == 2 and e["logprob"] <= 0 for e in entries)


def test_response_format_with_a_schema(llm):
    schema = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}
    out = llm.create_chat_completion(
        messages=[{"role": "user", "content": "Answer in JSON"}],
        response_format={"type": "json_object", "schema": schema},
        max_tokens=48,
        temperature=1.0,
        seed=2,
    )
    message = out["choices"][0]["message"]["content"]
    if out["choices"][0]["finish_reason"] == "stop":
        assert isinstance(json.loads(message)["answer"], int)
    assert message.lstrip().startswith("{")


def test_tool_choice_naming_a_function_yields_that_call(llm):
    """The tiny model's template (ChatML) has no tool format: the named function is forced by
    its arguments' schema, as llama-cpp-python does."""
    out = llm.create_chat_completion(
        messages=[{"role": "user", "content": "Weather in Paris?"}],
        tools=[WEATHER],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        max_tokens=64,
        temperature=0.5,
        seed=7,
    )
    choice = out["choices"][0]
    message = choice["message"]
    assert message["content"] is None and choice["finish_reason"] in ("tool_calls", "length")
    (call,) = message["tool_calls"]
    assert call["type"] == "function" and call["function"]["name"] == "get_weather"
    assert call["id"].startswith("call__0_get_weather_cmpl-") and message["function_call"] == call["function"]
    assert call["function"]["arguments"].lstrip().startswith("{")
    if choice["finish_reason"] == "tool_calls":
        assert isinstance(json.loads(call["function"]["arguments"])["city"], str)
    with pytest.raises(ValueError, match="not found in tools"):
        llm.create_chat_completion(
            messages=CHAT, tools=[WEATHER], tool_choice={"type": "function", "function": {"name": "x"}}
        )


def test_grammars_constrain_and_bad_ones_raise_before_queueing(llm):
    yes_no = LlamaGrammar.from_string('root ::= "yes" | "no"')
    assert llm("Is it?", grammar=yes_no, max_tokens=4)["choices"][0]["text"] in ("yes", "no")
    with pytest.raises(GrammarError, match="grammar"):
        llm("x", grammar=LlamaGrammar.from_string("root ::= undefined-rule"))
    with pytest.raises(GrammarError, match="JSON schema"):  # a schema llama.cpp cannot convert
        llm.create_chat_completion(
            messages=CHAT, response_format={"type": "json_object", "schema": {"$ref": "#/nowhere"}}
        )
    schema = LlamaGrammar.from_json_schema(json.dumps({"type": "boolean"}))
    assert llm("Bool:", grammar=schema, max_tokens=8)["choices"][0]["text"].strip() in ("true", "false")
    with pytest.raises(GrammarError):
        LlamaGrammar.from_json_schema("{not json")


def test_tokenize_detokenize_and_model_facts(llm):
    tokens = llm.tokenize(b"Hello world")
    assert tokens and all(isinstance(t, int) for t in tokens)
    assert llm.detokenize(tokens) == b"Hello world"
    assert llm.n_ctx() == 512 and llm.n_vocab() > 1000 and llm.token_eos() >= 0
    assert llm.tokenize(b"<|endoftext|>", add_bos=False, special=True) == [llm.token_eos()]


def test_errors_are_typed(llm):
    with pytest.raises(ContextOverflowError) as info:
        llm("hello " * 600)
    assert info.value.n_ctx == 512 and isinstance(info.value, ValueError)
    with pytest.raises(TypeError, match="n_ctxx"):
        Llama(llm.model_path, n_ctxx=5)
    with pytest.raises(NotImplementedError, match="rope_freq_base"):
        Llama(llm.model_path, rope_freq_base=10000.0)
    with pytest.raises(ValueError, match="does not exist"):
        Llama("/no/such/model.gguf")
    with pytest.raises(NotImplementedError, match="stopping_criteria"):
        llm("x", stopping_criteria=lambda *a: False)
    with pytest.raises(NotImplementedError, match="tfs_z=0.9: tail-free sampling was removed"):
        llm("x", tfs_z=0.9)
    assert llm("x", tfs_z=1.0, max_tokens=1)["choices"]  # its "off" value, as llama-cpp-python passes it
    with pytest.raises(RuntimeError, match="embedding=True"):
        llm.embed("x")


def test_save_and_load_state_bring_back_the_cache(model_path):
    with Llama(str(model_path), n_ctx=256, n_threads=1) as llm:
        prompt = "The quick brown fox jumps over the lazy dog and keeps running"
        llm(prompt, max_tokens=4, temperature=0)
        state = llm.save_state()
        assert state.n_tokens > 10 and state.llama_state_size > 0
        assert list(state.input_ids[:3]) == llm.tokenize(prompt.encode())[:3]
        llm("Something else entirely, nothing like the first", max_tokens=2)  # evicts the cache
        llm.load_state(state)
        snap = llm._engine.metrics()
        assert snap["slots"][0]["n_cached"] == state.n_tokens


def test_embeddings_in_its_shapes(model_path):
    with Llama(str(model_path), n_ctx=256, n_threads=1, embedding=True, pooling_type=1) as llm:  # mean
        one = llm.embed("hello world")
        two = llm.embed(["hello world", "goodbye"], normalize=True)
        assert isinstance(one[0], float) and len(one) == llm.n_embd()
        assert len(two) == 2 and abs(sum(x * x for x in two[0]) - 1.0) < 1e-4
        resp = llm.create_embedding(["a", "b c"])
        assert resp["object"] == "list" and [d["index"] for d in resp["data"]] == [0, 1]
        assert resp["data"][0]["object"] == "embedding" and resp["usage"]["prompt_tokens"] >= 2


def test_threads_share_one_engine_and_are_batched(model_path):
    """8 threads at once on 4 slots: every call answers, and decodes carry several slots."""
    with Llama(str(model_path), n_ctx=256, n_parallel=4, n_threads=1) as llm:
        barrier = threading.Barrier(8, timeout=TIMEOUT)
        results: list[dict | None] = [None] * 8

        def one(i: int) -> None:
            barrier.wait()
            results[i] = llm(f"Story number {i}:", max_tokens=16, temperature=0)

        threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(TIMEOUT)
        assert not any(t.is_alive() for t in threads)
        assert all(r is not None and r["usage"]["completion_tokens"] == 16 for r in results)
        m = llm._engine.metrics()
        assert m["n_busy_slots"] / m["n_decode"] > 1.5  # batched, not one call after another
        alone = llm("Story number 3:", max_tokens=16, temperature=0)
        assert results[3] is not None and results[3]["choices"][0]["text"] == alone["choices"][0]["text"]


def test_async_twins(llm):
    async def main() -> tuple[dict, list[dict], dict]:
        whole = await llm.acreate_completion("Hello", max_tokens=4, temperature=0)
        stream = await llm.acreate_chat_completion(messages=CHAT, max_tokens=3, temperature=0, stream=True)
        chunks = [c async for c in stream]
        chat = await llm.acreate_chat_completion(messages=CHAT, max_tokens=3, temperature=0)
        return whole, chunks, chat

    whole, chunks, chat = asyncio.run(asyncio.wait_for(main(), TIMEOUT))
    assert whole["choices"][0]["text"] == llm("Hello", max_tokens=4, temperature=0)["choices"][0]["text"]
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert text == chat["choices"][0]["message"]["content"]


def test_close_and_garbage_collection_stop_the_loop(model_path):
    before = len(loop_threads())
    llm = Llama(str(model_path), n_ctx=128, n_threads=1)
    assert len(loop_threads()) == before + 1
    llm.close()
    assert len(loop_threads()) == before and llm.closed
    with pytest.raises(RuntimeError, match="closed"):
        llm("x")
    llm = Llama(str(model_path), n_ctx=128, n_threads=1)
    del llm
    gc.collect()
    assert len(loop_threads()) == before


def test_many_prompts_are_answered_in_their_order_as_one_at_a_time(llm, capsys):
    prompts = [f"Story {i}:" for i in range(9)]  # more than the 4 slots
    one_by_one = [llm.create_completion(p, max_tokens=6, temperature=0)["choices"][0]["text"] for p in prompts]
    many = llm.create_completions(prompts, max_tokens=6, temperature=0, progress=True)
    assert [c["choices"][0]["text"] for c in many] == one_by_one
    assert "completions: 100%" in capsys.readouterr().err  # the bar, forced on
    chats = llm.create_chat_completions([[{"role": "user", "content": p}] for p in prompts[:3]], max_tokens=4)
    assert [c["object"] for c in chats] == ["chat.completion"] * 3
    with pytest.raises(ValueError):
        llm.create_completions(["fine", "fine"], temperature="hot")
