"""Ollama's API on serve's port, driven by the clients that speak only it: the official ``ollama``
Python client and LangChain's ``ChatOllama``."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from http_server import start_server, stop_server

ollama = pytest.importorskip("ollama")


@pytest.fixture(scope="module")
def base(tiny_model_path: Path):
    proc, url = start_server(tiny_model_path, "-c", "2048", "-np", "2", "-t", "1", "-a", "tiny")
    yield url
    assert "shut down: no thread left" in stop_server(proc)


@pytest.fixture
def client(base: str):
    return ollama.Client(host=base)


def test_chat_and_generate_whole_and_streamed(client):
    r = client.chat(model="tiny", messages=[{"role": "user", "content": "hi"}], options={"num_predict": 5, "seed": 1})
    assert r.done and r.done_reason == "length" and r.eval_count == 5 and r.message.role == "assistant"
    assert r.prompt_eval_count > 0 and r.total_duration >= r.eval_duration > 0 and r.load_duration == 0
    again = client.chat(model="tiny:latest", messages=[{"role": "user", "content": "hi"}], options={"num_predict": 5})
    assert again.model == "tiny:latest"
    parts = list(client.chat(model="tiny", messages=[{"role": "user", "content": "hi"}], stream=True,
                             options={"num_predict": 4, "temperature": 0}))  # fmt: skip
    assert parts[-1].done and parts[-1].eval_count == 4 and not any(p.done for p in parts[:-1])
    whole = client.chat(
        model="tiny", messages=[{"role": "user", "content": "hi"}], options={"num_predict": 4, "temperature": 0}
    )
    assert "".join(p.message.content for p in parts) == whole.message.content  # the same answer, in pieces
    g = client.generate(model="tiny", prompt="Once upon", options={"num_predict": 3, "temperature": 0})
    streamed = list(
        client.generate(model="tiny", prompt="Once upon", stream=True, options={"num_predict": 3, "temperature": 0})
    )
    assert g.done and "".join(p.response for p in streamed) == g.response and streamed[-1].eval_count == 3
    raw = client.generate(model="tiny", prompt="Once upon", raw=True, options={"num_predict": 2})
    assert raw.done and raw.eval_count == 2 and raw.prompt_eval_count < g.prompt_eval_count  # no template around it


def test_an_empty_chat_or_prompt_loads_the_model(client):
    assert client.chat(model="tiny", messages=[]).done_reason == "load"
    assert client.generate(model="tiny", prompt="").done_reason == "load"


def test_format_constrains_the_answer_to_json(client):
    """(Raw: the tiny model's fallback template has a generation prompt that a JSON grammar cannot
    follow, on every route; a real model's chat takes format as well, see the realmodel tier.)"""
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    for fmt in ("json", schema):
        r = client.generate(
            model="tiny", prompt="{", raw=True, format=fmt, options={"num_predict": 48, "temperature": 0}
        )
        text = r.response
        if r.done_reason == "stop":  # a random model may run out of tokens first; when it ends, it is valid
            value = json.loads(text)
            assert isinstance(value, dict) and (fmt == "json" or isinstance(value["n"], int))
        else:
            assert text.lstrip().startswith("{")


def test_models_show_ps_and_version(base, client):
    [m] = client.list().models
    assert m.model == "tiny:latest" and m.details.format == "gguf" and m.details.family == "llama"
    shown = client.show("tiny")
    assert shown.capabilities == ["completion"] and shown.modelinfo["general.architecture"] == "llama"
    assert shown.template  # the chat template the model's chats use
    [running] = client.ps().models
    assert running.model == "tiny:latest" and running.context_length == 2048 // 2
    assert httpx.get(f"{base}/api/version").json()["version"]


def test_errors_in_ollamas_shape(base, client):
    with pytest.raises(ollama.ResponseError) as unknown:
        client.chat(model="llama3", messages=[{"role": "user", "content": "hi"}])
    assert unknown.value.status_code == 404 and unknown.value.error == "model 'llama3' not found"
    for options, word in (({"num_gpu": 1}, "num_gpu"), ({"tfs_z": 1}, "tfs_z"), ({"num_ctx": 1 << 20}, "num_ctx")):
        with pytest.raises(ollama.ResponseError, match=word) as refused:
            client.chat(model="tiny", messages=[{"role": "user", "content": "hi"}], options=options)
        assert refused.value.status_code == 400  # refused by name, never ignored
    r = httpx.post(f"{base}/api/generate", json={"model": "tiny", "prompt": "x", "template": "{{ .Prompt }}"})
    assert r.status_code == 400 and "template is not supported" in r.json()["error"]
    r = httpx.post(f"{base}/api/chat", json={"model": "tiny", "messages": "not a list"})
    assert r.status_code == 400 and set(r.json()) == {"error"}
    r = httpx.post(
        f"{base}/api/chat", json={"model": "tiny", "messages": [{"role": "user", "content": "x"}], "keep_alive": 0}
    )
    assert r.status_code == 400 and "keep_alive 0" in r.json()["error"]
    # values Ollama's own decoder refuses are refused here too, by name
    chat = {"model": "tiny", "messages": [{"role": "user", "content": "x"}]}
    for extra, word in (
        ({"stream": "yes"}, "stream"),
        ({"keep_alive": "forever"}, "keep_alive: not a duration: 'forever'"),
        ({"options": {"num_ctx": -5}}, "num_ctx=-5: expected a positive number"),
        ({"options": {"num_ctx": True}}, "num_ctx=True"),
    ):
        r = httpx.post(f"{base}/api/chat", json={**chat, **extra})
        assert r.status_code == 400 and word in r.json()["error"], (extra, r.text)
    r = httpx.post(f"{base}/api/chat", json={**chat, "keep_alive": "1h30m", "options": {"num_predict": 1}})
    assert r.status_code == 200, r.text  # a Go duration is kept


def test_langchain_chat_ollama_invokes_streams_and_takes_tools(base):
    chat_ollama = pytest.importorskip("langchain_ollama")
    llm = chat_ollama.ChatOllama(model="tiny", base_url=base, num_predict=4, temperature=0)
    answer = llm.invoke("hello")
    assert answer.content and answer.response_metadata["done_reason"] == "length"
    pieces = [c.content for c in llm.stream("hello")]
    assert "".join(pieces) == answer.content

    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    tooled = llm.bind_tools([add]).invoke("what is 2 + 3?")  # the tools reach the template
    assert tooled.response_metadata["done"] is True


def test_tool_calls_come_back_with_object_arguments():
    from pyllama_yield.api.ollama import Answer
    from pyllama_yield.server.chat_message import ParsedMessage, ToolCall
    from pyllama_yield.server.results import CompletionFinal, Timings

    answer = Answer(
        "m:latest", {"format": 0, "parser": "", "reasoning_format": "none", "parse_tool_calls": True}, chat=True
    )
    assert answer.state is not None
    answer.state.message = ParsedMessage(tool_calls=(ToolCall("x", "add", '{"a": 2, "b": 3}'),))
    final = CompletionFinal(0, "", [], 0, 9, 3, 0, {}, "", False, False, "eos", "", 12, Timings(0, 9, 1.0, 3, 2.0))
    answer.state.update = lambda text, is_partial: []  # type: ignore[method-assign]  # the message above stands
    out = answer.whole(final)
    assert out["message"]["tool_calls"] == [{"function": {"index": 0, "name": "add", "arguments": {"a": 2, "b": 3}}}]
    assert (
        out["done_reason"] == "stop" and out["prompt_eval_duration"] == 1_000_000 and out["eval_duration"] == 2_000_000
    )


def test_pull_of_the_served_model_succeeds_and_of_another_says_why_not(client):
    assert client.pull("tiny").status == "success"
    with pytest.raises(ollama.ResponseError, match="pulling others needs router mode"):
        client.pull("llama3")


def test_embed_on_the_served_generation_model(base, client):
    import numpy as np

    r = client.embed(model="tiny", input=["hello world", "goodbye"])
    assert len(r.embeddings) == 2 and r.prompt_eval_count > 0
    assert all(abs(np.linalg.norm(v) - 1) < 1e-6 for v in r.embeddings)  # normalized, as Ollama's
    assert r.embeddings[0] != r.embeddings[1]
    short = client.embed(model="tiny", input="hello world", dimensions=8).embeddings[0]
    head = np.array(r.embeddings[0][:8])
    assert len(short) == 8 and np.allclose(head / np.linalg.norm(head), short, atol=1e-6)
    legacy = np.array(client.embeddings(model="tiny", prompt="hello world").embedding)  # not normalized
    assert np.allclose(legacy / np.linalg.norm(legacy), r.embeddings[0], atol=1e-6)
    long = "word " * 2000
    assert len(client.embed(model="tiny", input=long).embeddings) == 1  # truncated to the context by default
    refused = httpx.post(f"{base}/api/embed", json={"model": "tiny", "input": long, "truncate": False})
    assert refused.status_code == 400 and "longer than" in refused.json()["error"]
    # the slots are untouched: generation goes on, and llama-server's own route still refuses
    assert client.generate(model="tiny", prompt="x", options={"num_predict": 2}).eval_count == 2
    assert httpx.post(f"{base}/v1/embeddings", json={"input": "x"}).status_code == 501


def test_a_suffix_needs_the_models_fim_tokens(client):
    with pytest.raises(ollama.ResponseError, match="Infill is not supported by this model") as refused:
        client.generate(model="tiny", prompt="def f(", suffix="return 1", options={"num_predict": 2})
    assert refused.value.status_code == 501  # the tiny model has none: refused with the reason


def test_images_go_through_the_projector(tmp_path):
    import base64

    from pyllama_yield.testing import make_test_image, make_tiny_vision_model

    model, mmproj = make_tiny_vision_model(tmp_path)
    proc, url = start_server(model, "--mmproj", str(mmproj), "-c", "2048", "-np", "1", "-t", "1", "-a", "vis")
    try:
        client = ollama.Client(host=url)
        assert "vision" in client.show("vis").capabilities
        picture = base64.b64encode(make_test_image(32, 32)).decode()
        ask = {"role": "user", "content": "What is this?"}
        plain = client.chat(model="vis", messages=[ask], options={"num_predict": 1})
        seen = client.chat(model="vis", messages=[{**ask, "images": [picture]}], options={"num_predict": 1})
        assert seen.done and seen.prompt_eval_count > plain.prompt_eval_count  # the image's tokens
        g = client.generate(model="vis", prompt="Describe", images=[picture], options={"num_predict": 1})
        assert g.done and g.prompt_eval_count > plain.prompt_eval_count
    finally:
        stop_server(proc)


def test_a_json_schema_format_the_converter_refuses_is_named_as_the_schema(base):
    # llama.cpp's words, as llama-server answers the same schema: where in the schema, and why
    bad = {"type": "object", "properties": {"a": {"type": "frobnicate"}}}
    r = httpx.post(
        f"{base}/api/chat",
        json={"model": "tiny", "messages": [{"role": "user", "content": "x"}], "stream": False, "format": bad},
    )
    assert r.status_code == 400
    assert "JSON schema error at #/properties/a: unrecognized type frobnicate" in r.json()["error"]
    assert "chat template" not in r.json()["error"]
