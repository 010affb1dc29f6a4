"""The HTTP server as a user runs it: a real process on a loopback port, real HTTP clients."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import httpx
import pytest
from http_server import API_KEY, AUTH, start_server, stop_server, wait_and_read_log


def greedy(**kw):
    return {"prompt": "The quick brown fox", "n_predict": 8, "temperature": 0.0, "ignore_eos": True, **kw}


def test_health_models_slots(server):
    assert server.get("/health").json() == {"status": "ok"}
    models = server.get("/v1/models").json()
    assert models["object"] == "list" and models["data"][0]["id"] == "tiny.gguf"
    slots = server.get("/slots").json()
    assert len(slots) == 4 and all(s["state"] == "idle" for s in slots)


def test_completion_fields(server):
    r = server.post("/completion", json=greedy()).json()
    assert r["tokens_predicted"] == 8 and r["tokens_evaluated"] >= 5 and isinstance(r["content"], str)
    assert {"prompt_n", "predicted_n", "predicted_per_second"} <= set(r["timings"])
    again = server.post("/completion", json=greedy()).json()
    assert again["content"] == r["content"]  # greedy is deterministic
    assert again["tokens_cached"] > 0  # cache_prompt reused the prefix


def test_completion_stream_matches_non_stream(server):
    full = server.post("/completion", json=greedy(n_predict=12)).json()
    parts = []
    with server.stream("POST", "/completion", json=greedy(n_predict=12, stream=True)) as resp:
        assert resp.headers["content-type"].startswith("text/event-stream")
        for line in resp.iter_lines():
            if line.startswith("data: "):
                parts.append(json.loads(line[6:]))
    assert parts[-1]["stop"] is True and all(p["stop"] is False for p in parts[:-1])
    assert "".join(p["content"] for p in parts) == full["content"]


def test_tokenize_detokenize(server):
    toks = server.post("/tokenize", json={"content": "Hello world"}).json()["tokens"]
    assert toks and all(isinstance(t, int) for t in toks)
    assert server.post("/detokenize", json={"tokens": toks}).json()["content"].strip() == "Hello world"
    pieces = server.post("/tokenize", json={"content": "Hello", "with_pieces": True}).json()["tokens"]
    assert "Hello" in "".join(p["piece"] for p in pieces)


def test_openai_endpoints_with_httpx(server):
    r = server.post("/v1/completions", json={"model": "x", "prompt": "Hi", "max_tokens": 4}).json()
    assert r["object"] == "text_completion" and r["usage"]["completion_tokens"] <= 4
    c = server.post(
        "/v1/chat/completions",
        json={"model": "x", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4, "temperature": 0},
    ).json()
    assert c["choices"][0]["message"]["role"] == "assistant" and c["usage"]["prompt_tokens"] > 2


def test_openai_client_library(server):
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=f"{server.base_url}/v1", api_key=API_KEY)
    chat = client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "Hello"}], max_tokens=6, temperature=0
    )
    assert chat.choices[0].finish_reason in ("length", "stop") and chat.usage.completion_tokens <= 6
    chunks = list(
        client.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "Hello"}], max_tokens=6, temperature=0, stream=True
        )
    )
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == chat.choices[0].message.content
    comp = client.completions.create(model="tiny", prompt="Hello", max_tokens=3)
    assert comp.choices[0].text is not None


def test_bad_input_400_and_auth_401(server):
    for body in [b"{not json", b"[1, 2]"]:
        r = server.post("/completion", content=body)
        assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
    for payload in [
        {"prompt": "x", "n_predict": "many"},
        {"prompt": "x", "n_predict": -7},
        {"prompt": "word " * 3000, "n_predict": 1},
        {"prompt": "x", "stream": True, "n_predict": 2**31},
        {"prompt": "x", "grammar": "root ::= nonsense"},
        {"prompt": "x", "json_schema": {"$ref": "#/nowhere"}},
    ]:
        r = server.post("/completion", json=payload)
        assert r.status_code == 400, (payload, r.text)
        assert r.json()["error"]["message"]
    r = server.post("/v1/chat/completions", json={"model": "x", "messages": "hi"})
    assert r.status_code == 400
    for stop in [-1, [1, 2], {"a": 1}]:  # a wrong type is named, not a 500 from the stop-list merge
        r = server.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}], "stop": stop})
        assert r.status_code == 400 and "Field 'stop'" in r.json()["error"]["message"], r.text
    image = [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]
    r = server.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": image}]})
    assert r.status_code == 500 and "image input is not supported" in r.json()["error"]["message"]
    assert httpx.post(f"{server.base_url}/completion", json=greedy()).status_code == 401
    assert httpx.get(f"{server.base_url}/metrics", headers={"Authorization": "Bearer nope"}).status_code == 401
    assert httpx.get(f"{server.base_url}/health").status_code == 200  # public
    assert server.post("/completion", json=greedy(n_predict=2)).status_code == 200  # still serving


def test_eight_concurrent_clients_get_complete_answers(server):
    prompts = [f"Story number {i}: once upon a time" for i in range(8)]
    alone = {p: server.post("/completion", json=greedy(prompt=p)).json()["content"] for p in prompts}
    results: dict[str, str] = {}
    barrier = threading.Barrier(8)

    def client(p: str) -> None:
        with httpx.Client(base_url=str(server.base_url), headers=AUTH, timeout=120) as c:
            barrier.wait(30)
            results[p] = c.post("/completion", json=greedy(prompt=p)).json()["content"]

    threads = [threading.Thread(target=client, args=(p,)) for p in prompts]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert results == alone


def test_metrics_answer_while_a_long_completion_runs(server):
    done = threading.Event()

    def long_completion() -> None:
        with httpx.Client(base_url=str(server.base_url), headers=AUTH, timeout=300) as c:
            c.post("/completion", json=greedy(prompt="word " * 1500, n_predict=200))
        done.set()

    t = threading.Thread(target=long_completion)
    t.start()
    seen_busy = False
    latencies = []
    while not done.is_set():
        t0 = time.perf_counter()
        text = server.get("/metrics").text
        latencies.append(time.perf_counter() - t0)
        seen_busy |= "llamacpp:requests_processing 1" in text
    t.join(300)
    assert seen_busy and "llamacpp:prompt_tokens_total" in text
    latencies.sort()
    assert latencies[len(latencies) // 2] <= 0.05, latencies[-5:]  # median round trip on one connection


def test_client_disconnect_cancels_the_request(server):
    with httpx.Client(base_url=str(server.base_url), headers=AUTH, timeout=60) as c:
        with c.stream("POST", "/completion", json=greedy(n_predict=1800, stream=True)) as resp:
            for line in resp.iter_lines():
                if line.startswith("data: "):
                    break  # got the first token: now hang up
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if all(s["state"] == "idle" for s in server.get("/slots").json()):
            break
        time.sleep(0.05)  # the cancel is asynchronous; poll the public API for its effect
    assert all(s["state"] == "idle" for s in server.get("/slots").json())


def test_sigterm_shuts_down_cleanly_while_busy(tiny_model_path):
    proc, base = start_server(tiny_model_path, "--threads", "1")
    started = threading.Event()

    def busy() -> None:
        try:
            with httpx.stream("POST", f"{base}/completion", json=greedy(n_predict=1500, stream=True), timeout=60) as r:
                for _ in r.iter_lines():
                    started.set()
        except httpx.HTTPError:
            pass

    t = threading.Thread(target=busy)
    t.start()
    assert started.wait(60)
    out = stop_server(proc)
    t.join(60)
    assert proc.returncode == 0, out[-3000:]
    assert "no thread left" in out


@pytest.mark.skipif(os.name != "posix", reason="SIGINT semantics")
def test_ctrl_c_shuts_down_cleanly(tiny_model_path):
    proc, _ = start_server(tiny_model_path, "--threads", "1")
    proc.send_signal(signal.SIGINT)
    out = wait_and_read_log(proc)
    assert proc.returncode == 0 and "no thread left" in out


def test_metrics_and_slots_follow_their_flags(tiny_model_path):
    proc, base = start_server(tiny_model_path, "--threads", "1", "--no-slots", "--alias", "my-model", "-c", "1024")
    try:
        for path, flag in (("/metrics", "--metrics"), ("/slots", "--slots")):
            r = httpx.get(f"{base}{path}")
            assert r.status_code == 501 and flag in r.json()["error"]["message"]
        assert httpx.get(f"{base}/v1/models").json()["data"][0]["id"] == "my-model"
        r = httpx.post(f"{base}/completion", json=greedy(n_predict=2)).json()
        assert r["model"] == "my-model" and r["generation_settings"]["n_predict"] == 2
    finally:
        out = stop_server(proc)
    assert proc.returncode == 0, out[-3000:]


def test_loading_answers_503_and_cors_follows_llama_server():
    from starlette.testclient import TestClient

    from pyllama_yield.api import build_app
    from pyllama_yield.settings import ServerSettings

    with TestClient(build_app(None, ServerSettings())) as c:  # no model attached yet: still loading
        r = c.get("/health")
        assert r.status_code == 503 and r.json()["error"]["message"] == "Loading model"
        pre = c.options("/v1/chat/completions", headers={"Origin": "http://example.com"})
        assert pre.status_code == 200 and pre.headers["access-control-allow-origin"] == "http://example.com"
        assert "POST" in pre.headers["access-control-allow-methods"]
    local = build_app(None, ServerSettings(cors_origins="localhost"))
    with TestClient(local) as c:
        assert "access-control-allow-origin" not in c.options("/", headers={"Origin": "http://evil.com"}).headers
        ok = c.options("/", headers={"Origin": "http://localhost:3000"}).headers
        assert ok["access-control-allow-origin"] == "http://localhost:3000"


def test_a_missing_model_is_a_clear_error_and_exit_1(tmp_path):
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "pyllama_yield", "serve", "-m", str(tmp_path / "nope.gguf"), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1 and "model file not found" in proc.stderr and "nope.gguf" in proc.stderr


def test_cors_headers_on_a_real_answer(server):
    r = server.get("/health", headers={"Origin": "http://a.example"})
    assert r.headers["access-control-allow-origin"] == "http://a.example"


def metric(text: str, name: str) -> float:
    (line,) = [ln for ln in text.splitlines() if ln.startswith(f"llamacpp:{name} ")]
    return float(line.split()[1])


def test_sleep_frees_the_context_and_a_request_wakes_it(tiny_model_path):
    proc, base = start_server(tiny_model_path, "--threads", "1", "--sleep-idle-seconds", "1", "--metrics")

    def asleep() -> bool:
        return httpx.get(f"{base}/props").json()["is_sleeping"]

    def wait_for_sleep() -> None:
        deadline = time.monotonic() + 30
        while not asleep():
            assert time.monotonic() < deadline, "never went to sleep"
            time.sleep(0.1)  # the idle timer runs in the server; poll its public state

    try:
        assert httpx.post(f"{base}/completion", json=greedy(n_predict=8)).status_code == 200
        httpx.get(f"{base}/metrics", timeout=10)  # a scrape starts a new window: the next reports zero rates
        awake = httpx.get(f"{base}/metrics", timeout=10).text
        wait_for_sleep()
        # asleep, the snapshot taken as it fell asleep: what an awake scrape saw, every line
        # (llama-server's test_server_sleep_read_only_endpoints)
        assert httpx.get(f"{base}/metrics", timeout=10).text == awake
        httpx.post(f"{base}/completion", json=greedy(n_predict=8))  # wakes it: sleep again with a fresh window
        wait_for_sleep()
        # read-only routes answer from what sleep keeps, and do not wake it; the throughput
        # gauges cover the window since the last scrape (llama-server's buckets), asleep too
        assert httpx.get(f"{base}/health").status_code == 200
        first = httpx.get(f"{base}/metrics", timeout=10).text
        second = httpx.get(f"{base}/metrics", timeout=10).text
        assert metric(first, "predicted_tokens_seconds") > 0 and metric(second, "predicted_tokens_seconds") == 0
        assert metric(second, "tokens_predicted_total") == 16 and metric(second, "requests_processing") == 0
        assert httpx.get(f"{base}/metrics", timeout=10).text == second
        assert asleep()
        # any other route wakes it, even one that needs no context (as llama-server)
        assert httpx.post(f"{base}/tokenize", json={"content": "Hello"}, timeout=60).status_code == 200
        assert not asleep()
        assert metric(httpx.get(f"{base}/metrics").text, "predicted_tokens_seconds") == 0  # reported asleep
        wait_for_sleep()
        count = {"input": "Hello world"}
        r = httpx.post(f"{base}/v1/responses/input_tokens", json=count, timeout=60).json()
        assert r["object"] == "response.input_tokens" and r["input_tokens"] > 0 and not asleep()
        r = httpx.post(f"{base}/completion", json=greedy(n_predict=3), timeout=60).json()
        assert r["tokens_predicted"] == 3 and len(httpx.get(f"{base}/slots", timeout=10).json()) == 4
    finally:
        out = stop_server(proc)
    assert proc.returncode == 0, out[-3000:]


def test_several_addresses_and_sorted_aliases(tiny_model_path):
    import socket

    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback here")
    from http_server import free_port

    port = free_port()
    proc, base = start_server(tiny_model_path, "--threads", "1", "--host", "127.0.0.1,::1", "--port", str(port),
                              "--alias", "tiny,fim,code", "--tags", "chat,small")  # fmt: skip
    try:
        assert httpx.get(f"http://[::1]:{port}/health").status_code == 200
        model = httpx.get(f"{base}/v1/models").json()["data"][0]
        assert model["id"] == "code" and set(model["aliases"]) == {"tiny", "fim", "code"}
        assert set(model["tags"]) == {"chat", "small"}
    finally:
        out = stop_server(proc)
    assert proc.returncode == 0, out[-3000:]


def test_header_names_keep_llama_servers_case(server):
    names = {k for k, _ in server.get("/health", headers={"Origin": "http://a.example"}).headers.raw}
    assert b"Access-Control-Allow-Origin" in names
    metrics = server.get("/metrics")
    assert int(dict(metrics.headers.raw)[b"Process-Start-Time-Unix"]) > 1_600_000_000


def test_metric_names_are_llama_servers(server):
    server.post("/completion", json=greedy(n_predict=2))
    text = server.get("/metrics").text
    names = ["prompt_tokens_cached_total", "n_tokens_max", "spec_decode_num_drafts_total", "n_busy_slots_per_decode"]
    for name in [*names, "prompt_tokens_seconds", "requests_deferred"]:
        assert f"# TYPE llamacpp:{name} " in text and f"# HELP llamacpp:{name} " in text
    assert float(text.split("\nllamacpp:n_tokens_max ")[1].split()[0]) >= 2


def test_usage_counts_each_prompt_once_and_every_choice(server):
    # OpenAI's counting: two prompts, two choices each -> each prompt's tokens once, all four
    # choices' tokens (llama-server reports only its first result's usage here)
    prompts = ["Once upon a time", "The quick brown fox jumps over"]
    tokenized = [server.post("/tokenize", json={"content": p, "add_special": True}).json() for p in prompts]
    n_tokens = [len(t["tokens"]) for t in tokenized]
    body = {"prompt": prompts, "n": 2, "max_tokens": 3, "temperature": 0, "ignore_eos": True, "cache_prompt": False}
    r = server.post("/v1/completions", json=body)
    assert r.status_code == 200, r.text
    out = r.json()
    assert len(out["choices"]) == 4
    assert out["usage"]["prompt_tokens"] == sum(n_tokens)
    assert out["usage"]["completion_tokens"] == 4 * 3
    assert out["usage"]["total_tokens"] == sum(n_tokens) + 12
