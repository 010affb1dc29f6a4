"""Request features over HTTP, through the ``openai`` client and raw HTTP, streaming and not."""

from __future__ import annotations

import json

import openai
import pytest
from http_server import API_KEY

SCHEMA = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}, "n": {"type": "integer"}},
    "required": ["ok", "n"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=f"{server.base_url}/v1", api_key=API_KEY, max_retries=0)


def sse_events(server, path: str, body: dict) -> list:
    events = []
    with server.stream("POST", path, json=body) as resp:
        assert resp.status_code == 200, resp.read()
        for line in resp.iter_lines():
            if line.startswith("data: "):
                data = line[6:]
                events.append(data if data == "[DONE]" else json.loads(data))
    return events


CHAT = [{"role": "user", "content": "Hello"}]


@pytest.fixture(scope="module")
def gpt2_client(tmp_path_factory):
    """A model with a byte-level (gpt-2) vocab: its tokens spell the chat template's generation
    prompt exactly, which a tool-call/format grammar must accept first (an SPM vocab's leading
    space makes llama.cpp skip a character of it, in llama-server too)."""
    from http_server import start_server, stop_server

    from pyllama_yield.testing import make_tiny_model

    model = make_tiny_model(tmp_path_factory.mktemp("gpt2") / "tiny-gpt2.gguf", vocab="gpt-2")
    proc, base = start_server(model, "--threads", "1", "-np", "2", "-c", "4096")
    yield openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0)
    out = stop_server(proc)
    assert proc.returncode == 0, out[-3000:]


def test_chat_response_format_json_schema_and_json_object(gpt2_client):
    client = gpt2_client
    r = client.chat.completions.create(
        model="tiny",
        messages=CHAT,
        max_tokens=60,
        temperature=1.0,
        seed=2,
        response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": SCHEMA}},
    )
    value = json.loads(r.choices[0].message.content)
    assert set(value) == {"ok", "n"} and isinstance(value["ok"], bool)
    r = client.chat.completions.create(
        model="tiny", messages=CHAT, max_tokens=40, temperature=1.0, seed=3, response_format={"type": "json_object"}
    )
    content = r.choices[0].message.content
    assert content.startswith("{")
    if r.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(content), dict)


def test_chat_logprobs_streamed_and_not(client):
    r = client.chat.completions.create(
        model="tiny", messages=CHAT, max_tokens=4, temperature=0, logprobs=True, top_logprobs=3
    )
    content = r.choices[0].logprobs.content
    assert len(content) == 4 and all(len(c.top_logprobs) == 3 for c in content)
    assert all(c.logprob <= 0 and c.token == c.top_logprobs[0].token for c in content)
    chunks = list(
        client.chat.completions.create(
            model="tiny", messages=CHAT, max_tokens=4, temperature=0, logprobs=True, top_logprobs=2, stream=True
        )
    )
    streamed = [c.choices[0].logprobs for c in chunks if c.choices and c.choices[0].logprobs]
    assert streamed and all(len(lp.content[0].top_logprobs) == 2 for lp in streamed)


def test_n_choices_and_include_usage(client):
    r = client.chat.completions.create(model="tiny", messages=CHAT, max_tokens=3, n=2, temperature=1.0, seed=1)
    assert sorted(c.index for c in r.choices) == [0, 1] and r.usage.completion_tokens <= 6
    chunks = list(
        client.chat.completions.create(
            model="tiny", messages=CHAT, max_tokens=3, stream=True, stream_options={"include_usage": True}
        )
    )
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens >= 1
    assert chunks[0].choices[0].delta.role == "assistant"
    assert any(c.choices and c.choices[0].finish_reason for c in chunks)


def test_completions_prompt_list_logprobs_and_max_completion_tokens(client, server):
    r = client.completions.create(model="tiny", prompt=["Hello", "Bye"], max_tokens=3, temperature=0, logprobs=2)
    assert sorted(c.index for c in r.choices) == [0, 1]
    lp = r.choices[0].logprobs.model_extra["content"]  # llama-server's shape, not OpenAI's legacy one
    assert len(lp) >= 1 and len(lp[0]["top_logprobs"]) == 2
    c = client.chat.completions.create(model="tiny", messages=CHAT, max_completion_tokens=2, temperature=0)
    assert c.usage.completion_tokens <= 2
    events = sse_events(server, "/v1/completions", {"prompt": "Hi", "max_tokens": 3, "stream": True})
    assert events[-1] == "[DONE]" and events[-2]["usage"]["completion_tokens"] >= 1
    assert events[-2]["choices"][0]["finish_reason"] in ("stop", "length")


def test_native_completion_fields_and_streaming(server):
    body = {"prompt": "Hello", "n_predict": 3, "temperature": 0, "ignore_eos": True}
    r = server.post("/completion", json={**body, "n_probs": 2, "return_tokens": True}).json()
    assert len(r["tokens"]) == 3 and len(r["completion_probabilities"]) == 3
    assert r["generation_settings"]["n_probs"] == 2 and r["model"] == "tiny.gguf"
    events = sse_events(server, "/completion", {**body, "stream": True, "n_probs": 1, "return_progress": True})
    assert events[-1]["stop"] is True and "[DONE]" not in events  # llama-server's native stream has no [DONE]
    assert all("completion_probabilities" in e for e in events[:-1] if e["tokens"])
    picked = server.post("/completion", json={**body, "response_fields": ["content", "generation_settings/n_predict"]})
    assert set(picked.json()) == {"content", "n_predict"}
    many = server.post("/completion", json={**body, "prompt": ["a", "b"]}).json()
    assert isinstance(many, list) and [m["index"] for m in many] == [0, 1]
    by_ids = server.post("/completion", json={**body, "prompt": [1, 15043]}).json()
    assert by_ids["tokens_evaluated"] == 2


def test_openai_errors_have_the_openai_shape(client, server):
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="tiny", messages=CHAT, top_logprobs=2)
    assert "top_logprobs" in str(info.value)
    with pytest.raises(openai.BadRequestError):
        client.completions.create(model="tiny", prompt="x", echo=True)
    r = server.post("/v1/chat/completions", json={"messages": CHAT, "response_format": {"type": "xml"}})
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
    r = server.post("/completion", json={"prompt": "word " * 3000})
    err = r.json()["error"]
    assert r.status_code == 400 and err["type"] == "exceed_context_size_error"
    assert err["n_ctx"] == 2048 and err["n_prompt_tokens"] > 2048
    r = server.post("/v1/chat/completions", json={"messages": CHAT, "json_schema": {}, "grammar": 'root ::= "x"'})
    assert r.status_code == 400
    ok = server.post("/v1/chat/completions", json={"messages": CHAT, "max_tokens": 1, "unknown_field": {"a": 1}})
    assert ok.status_code == 200  # unknown fields are ignored, as llama-server ignores them


def test_props_apply_template_and_index(server):
    props = server.get("/props").json()
    assert props["total_slots"] == 4 and props["default_generation_settings"]["n_ctx"] == 2048
    assert props["default_generation_settings"]["params"]["temperature"] == 0.8
    assert props["model_alias"] == "tiny.gguf" and props["endpoint_metrics"] is True
    assert props["bos_token"] and props["build_info"].startswith("b")
    assert server.post("/props", json={}).status_code == 501  # needs --props
    r = server.post("/apply-template", json={"messages": [{"role": "user", "content": "Hi there"}]}).json()
    assert "Hi there" in r["prompt"] and r["prompt"] != "Hi there"
    assert server.get("/").status_code == 200


def test_slot_save_restore_erase_and_traversal(tiny_model_path, tmp_path):
    from http_server import start_server, stop_server

    proc, base = start_server(tiny_model_path, "--threads", "1", "-np", "1", "--slot-save-path", str(tmp_path))
    try:
        import httpx

        body = {"prompt": "Hello world, once more", "n_predict": 2, "temperature": 0, "id_slot": 0}
        assert httpx.post(f"{base}/completion", json=body).status_code == 200
        saved = httpx.post(f"{base}/slots/0?action=save", json={"filename": "s0.bin"}).json()
        assert saved["n_saved"] > 0 and saved["filename"] == "s0.bin" and (tmp_path / "s0.bin").is_file()
        assert httpx.post(f"{base}/slots/0?action=erase").json()["n_erased"] == saved["n_saved"]
        restored = httpx.post(f"{base}/slots/0?action=restore", json={"filename": "s0.bin"}).json()
        assert restored["n_restored"] == saved["n_saved"] and restored["n_read"] > 0
        again = httpx.post(f"{base}/completion", json=body).json()
        assert again["tokens_cached"] >= saved["n_saved"] - 1
        for bad in ("../escape.bin", "/etc/passwd", "a/b.bin", "..", ""):
            r = httpx.post(f"{base}/slots/0?action=save", json={"filename": bad})
            assert r.status_code == 400 and r.json()["error"]["message"] == "Invalid filename", bad
        assert httpx.post(f"{base}/slots/0?action=dance").status_code == 400
        assert not (tmp_path.parent / "escape.bin").exists()
    finally:
        out = stop_server(proc)
    assert proc.returncode == 0, out[-3000:]


def test_chat_token_count_verbose_and_message_rules(server):
    chat = {"messages": [{"role": "system", "content": "Book"}, {"role": "user", "content": "What is the best book"}]}
    n = server.post("/v1/chat/completions/input_tokens", json=chat).json()["input_tokens"]
    assert n > 5 and server.post("/chat/completions/input_tokens", json=chat).json()["input_tokens"] == n
    r = server.post("/chat/completions", json={**chat, "max_tokens": 2, "verbose": True}).json()
    assert "Book" in r["__verbose"]["prompt"]
    assert "__verbose" not in server.post("/chat/completions", json={**chat, "max_tokens": 2}).json()
    two = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "assistant", "content": "c"},
    ]
    assert server.post("/chat/completions", json={"messages": two, "max_tokens": 1}).status_code == 400
    both = {"messages": two[:2], "max_tokens": 1, "add_generation_prompt": True, "continue_final_message": True}
    assert server.post("/chat/completions", json=both).status_code == 400
    prefill = server.post("/apply-template", json={"messages": two[:2]}).json()["prompt"]
    assert prefill.rstrip().endswith("b")  # the assistant's message is continued, not closed


def test_vertex_ai_predict_route(tiny_model_path, monkeypatch):
    from starlette.testclient import TestClient

    from pyllama_yield.api import build_app
    from pyllama_yield.api.gcp import gcp_name
    from pyllama_yield.server import Engine

    assert gcp_name("/v1/chat/completions") == "chatCompletions" and gcp_name("/apply-template") == "applyTemplate"
    monkeypatch.setenv("AIP_MODE", "PREDICTION")
    monkeypatch.setenv("AIP_HEALTH_ROUTE", "/vertex-health")
    with Engine.create(tiny_model_path, n_ctx=1024, n_threads=1) as srv, TestClient(build_app(srv)) as c:
        assert c.get("/vertex-health").json() == {"status": "ok"}
        chat = {"@requestFormat": "chatCompletions", "max_tokens": 3, "messages": [{"role": "user", "content": "Hi"}]}
        done = {"@requestFormat": "/completion", "prompt": "Hello", "n_predict": 2, "stream": True}
        r = c.post("/predict", json={"instances": [chat, done, {"@requestFormat": "nope"}, 5]}).json()
        p = r["predictions"]
        assert p[0]["object"] == "chat.completion" and p[1]["tokens_predicted"] == 2
        assert "no handler" in p[2]["error"]["message"] and "JSON object" in p[3]["error"]["message"]
        assert c.post("/predict", json={"nothing": 1}).status_code == 400
    from pyllama_yield.settings import ServerSettings

    small = ServerSettings(max_body_size=1000)
    with Engine.create(tiny_model_path, n_ctx=1024, n_threads=1) as srv, TestClient(build_app(srv, small)) as c:
        big = {"instances": [{"@requestFormat": "/completion", "prompt": "x" * 2000, "n_predict": 1}]}
        r = c.post("/predict", json=big)
        assert r.status_code == 413 and "too large" in r.json()["error"]["message"]


def test_our_own_fault_is_a_500_in_the_error_shape_with_the_traceback_logged(tiny_model_path, caplog):
    from starlette.testclient import TestClient

    from pyllama_yield.api import build_app
    from pyllama_yield.server import Engine

    def broken(*args: object) -> list[int]:
        raise RuntimeError("a bug of ours")

    with Engine.create(tiny_model_path, n_ctx=1024, n_threads=1) as srv, TestClient(build_app(srv)) as c:
        srv.tasks.tokenize = broken  # type: ignore[method-assign]
        with caplog.at_level("ERROR", logger="pyllama_yield.api"):
            r = c.post("/tokenize", json={"content": "Hello"})
        assert r.status_code == 500
        assert r.json() == {"error": {"code": 500, "message": "RuntimeError: a bug of ours", "type": "server_error"}}
        assert "POST /tokenize failed" in caplog.text and "a bug of ours" in caplog.text
        assert c.post("/tokenize", json={"content": 5}).status_code == 400  # still answering


def test_small_text_requests_are_built_on_the_event_loop_and_others_on_one_bridge_call(tiny_model_path):
    """A small body on a server without media is planned and tokenized on the event loop (no
    thread hop); a large body, or any body once a projector could read media, goes to a bridge
    thread, in one call for a chat (its plan and its tokens together)."""
    import threading

    from starlette.testclient import TestClient

    from pyllama_yield.api import build_app
    from pyllama_yield.api.bridge import INLINE_BODY_BYTES
    from pyllama_yield.server import Engine

    with Engine.create(tiny_model_path, n_ctx=2048, n_threads=1) as srv, TestClient(build_app(srv)) as c:
        seen: list[tuple[str, str]] = []

        def spy_on(owner: object, name: str) -> None:
            fn = getattr(owner, name)

            def spy(*a, **kw):  # noqa: ANN002, ANN003, ANN202
                seen.append((name, threading.current_thread().name))
                return fn(*a, **kw)

            setattr(owner, name, spy)

        spy_on(srv.tasks, "make_tasks")
        spy_on(srv.chats, "plan")

        def ask(path: str, text: str) -> list[tuple[str, str]]:
            seen.clear()
            body = {"prompt": text} if path == "/completion" else {"messages": [{"role": "user", "content": text}]}
            assert c.post(path, json={**body, "n_predict": 1, "max_tokens": 1}).status_code == 200
            return list(seen)

        big = "x " * INLINE_BODY_BYTES
        for path in ("/completion", "/v1/chat/completions"):
            small = ask(path, "Hi")
            assert small and not any(t.startswith("pyllama-http") for _, t in small), small
            large = ask(path, big)
            assert large and all(t == large[0][1] and t.startswith("pyllama-http") for _, t in large), large
        assert [n for n, _ in ask("/v1/chat/completions", "Hi")] == ["plan", "make_tasks"]
        srv.tasks.projector = object()  # type: ignore[assignment]  # media possible: never on the loop
        try:
            assert ask("/completion", "Hi")[0][1].startswith("pyllama-http")
        finally:
            srv.tasks.projector = None
