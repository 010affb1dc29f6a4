"""The agent side of the server over HTTP: /tools (built-ins and MCP servers), the CORS proxy, and
resumable streams (X-Conversation-Id), on a served tiny model."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("mcp")

from http_server import API_KEY, AUTH, free_port, start_server, stop_server  # noqa: E402

MCP_SERVER = Path(__file__).parent / "fixtures" / "mcp_test_server.py"
pytestmark = pytest.mark.timeout(300)


def mcp_json(**servers: dict[str, Any]) -> str:
    return json.dumps({"mcpServers": servers})


def mcp_test_server(timeout_ms: int = 20000) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(MCP_SERVER)], "timeout_ms": timeout_ms}


@pytest.fixture(scope="module")
def agent(tiny_model_path: Path) -> Iterator[httpx.Client]:
    """Tools, two MCP servers (one that cannot start), the CORS proxy and an API key."""
    proc, base = start_server(
        tiny_model_path,
        "--tools", "all",
        "--mcp-servers-json", mcp_json(t=mcp_test_server(), broken={"command": "this_command_does_not_exist_42"}),
        "--ui-mcp-proxy",
        "--api-key", API_KEY,
        "--parallel", "2",
    )  # fmt: skip
    with httpx.Client(base_url=base, headers=AUTH, timeout=60) as client:
        yield client
    out = stop_server(proc)
    assert proc.returncode == 0, out[-3000:]


def call(client: httpx.Client, tool: str, params: dict[str, Any], **headers: str) -> httpx.Response:
    return client.post("/tools", json={"tool": tool, "params": params}, headers=headers)


def test_listing_has_builtins_then_mcp_tools(agent: httpx.Client) -> None:
    tools = agent.get("/tools").json()
    names = [t["tool"] for t in tools]
    builtins = ["read_file", "file_glob_search", "grep_search", "exec_shell_command", "write_file", "edit_file"]
    assert names[:7] == [*builtins, "get_info"]
    assert {"t_echo", "t_add", "t_sleep"} <= set(names)
    assert not [n for n in names if n.startswith("broken_")]  # its warm-up failed: no tools, no crash
    echo = next(t for t in tools if t["tool"] == "t_echo")
    assert echo["type"] == "mcp" and echo["permissions"] == {"write": False}
    fn = echo["definition"]["function"]
    assert echo["definition"]["type"] == "function" and fn["name"] == "t_echo"
    assert fn["parameters"]["type"] == "object" and "message" in fn["parameters"]["properties"]
    shell = next(t for t in tools if t["tool"] == "exec_shell_command")
    assert shell["type"] == "server" and shell["permissions"] == {"write": True} and shell["uses_cwd"]


def test_tools_need_the_api_key(agent: httpx.Client) -> None:
    assert httpx.get(agent.base_url.join("/tools")).status_code == 401
    no_key = httpx.post(agent.base_url.join("/tools"), json={"tool": "get_info", "params": {}})
    assert no_key.status_code == 401


def test_cwd_comes_from_the_header_only(agent: httpx.Client, tmp_path: Path) -> None:
    (tmp_path / "note.txt").write_text("from the header's folder\n")
    res = call(agent, "read_file", {"path": "note.txt", "cwd": "/nonexistent"}, **{"X-Tool-Cwd": str(tmp_path)})
    assert res.status_code == 200 and res.json() == {"plain_text_response": "from the header's folder\n"}
    written = call(agent, "write_file", {"path": "sub/new.txt", "content": "x"}, **{"x-tool-cwd": str(tmp_path)})
    assert written.json()["result"] == "file written successfully"
    assert (tmp_path / "sub" / "new.txt").read_text() == "x"


def test_the_model_cannot_pick_the_runtime_or_answer_shape(agent: httpx.Client, tmp_path: Path) -> None:
    # a model's own "runtime" would move the call elsewhere (an ssh host it names, with options):
    # only the header may, and here there is none, so the command runs on the host as configured
    marker = tmp_path / "ran-here"
    params = {"command": f"touch {marker}", "runtime": "ssh:-oProxyCommand=touch /tmp/pwned", "resp_type": "base64"}
    res = call(agent, "exec_shell_command", params)
    assert res.status_code == 200 and "[exit code: 0]" in res.json()["plain_text_response"] and marker.exists()
    (tmp_path / "t.txt").write_text("plain")
    read = call(agent, "read_file", {"path": str(tmp_path / "t.txt"), "resp_type": "base64"})
    assert read.json() == {"plain_text_response": "plain\n"}  # base64 only when the x-resp-type header asks


def test_searches_do_not_follow_a_link_out_of_the_folder(agent: httpx.Client, tmp_path: Path) -> None:
    outside, base = tmp_path / "outside", tmp_path / "base"
    (outside / "deep").mkdir(parents=True)
    (outside / "deep" / "secret.txt").write_text("needle outside\n")
    base.mkdir()
    (base / "inside.txt").write_text("needle inside\n")
    (base / "escape").symlink_to(outside, target_is_directory=True)
    globbed = call(agent, "file_glob_search", {"path": str(base), "include": "**"}).json()["plain_text_response"]
    assert "inside.txt" in globbed and "secret.txt" not in globbed
    grepped = call(agent, "grep_search", {"path": str(base), "pattern": "needle"}).json()["plain_text_response"]
    assert "needle inside" in grepped and "needle outside" not in grepped


def test_refusals_have_llama_servers_statuses(agent: httpx.Client) -> None:
    unknown = call(agent, "no_such_tool", {})
    assert unknown.status_code == 404 and 'unknown tool "no_such_tool"' in unknown.json()["message"]
    bad_runtime = call(agent, "get_info", {}, **{"X-Tool-Runtime": "fake:does-not-exist"})
    assert bad_runtime.status_code == 500 and "unknown tool runtime" in bad_runtime.text
    ssh = call(
        agent, "exec_shell_command", {"command": "echo hi"}, **{"X-Tool-Runtime": "ssh:-oProxyCommand=touch /tmp/pwned"}
    )
    assert ssh.status_code == 500 and "invalid ssh target" in ssh.text
    container = call(
        agent, "exec_shell_command", {"command": "echo hi"}, **{"X-Tool-Runtime": "docker-container:--privileged"}
    )
    assert container.status_code == 500 and "invalid container id" in container.text
    no_stream = agent.post("/tools", json={"tool": "read_file", "params": {"path": "x"}, "stream": True})
    assert no_stream.status_code == 404 and "does not support stream" in no_stream.text
    malformed = agent.post("/tools", content=b"{not json")
    assert malformed.status_code == 400
    # the model's arguments, refused by llama-server's JSON layer with nlohmann's messages
    missing = call(agent, "read_file", {})
    assert (
        missing.status_code == 400
        and missing.json()["message"] == "[json.exception.out_of_range.403] key 'path' not found"
    )
    mistyped = call(agent, "read_file", {"path": 5})
    assert mistyped.status_code == 400 and "type must be string, but is number" in mistyped.json()["message"]
    no_name = agent.post("/tools", json={"params": {}})
    assert (
        no_name.status_code == 400
        and no_name.json()["message"] == "[json.exception.out_of_range.403] key 'tool' not found"
    )
    not_object = agent.post("/tools", json={"tool": "read_file", "params": []})
    assert not_object.status_code == 400 and "cannot use at() with array" in not_object.json()["message"]


def test_a_tools_own_failure_is_an_error_answer(agent: httpx.Client, tmp_path: Path) -> None:
    res = call(agent, "read_file", {"path": str(tmp_path / "absent.txt")})
    assert res.status_code == 200 and res.json()["error"].startswith("cannot stat file")


def test_shell_output_streams(agent: httpx.Client, tmp_path: Path) -> None:
    body = {"tool": "exec_shell_command", "params": {"command": "echo one; echo two"}, "stream": True}
    with agent.stream("POST", "/tools", json=body, headers={"x-tool-cwd": str(tmp_path)}) as res:
        assert res.headers["content-type"].startswith("text/event-stream")
        events = [json.loads(line[6:]) for line in res.iter_lines() if line.startswith("data: ")]
    assert events[-1] == {"done": True}
    text = "".join(e["chunk"] for e in events[:-1])
    assert "one\ntwo\n" in text and "[exit code: 0]" in text


def test_mcp_tools_are_called(agent: httpx.Client) -> None:
    assert call(agent, "t_echo", {"message": "hello world"}).json() == {"plain_text_response": "echo: hello world"}
    assert call(agent, "t_add", {"a": 3, "b": 5}).json() == {"plain_text_response": "8"}
    failed = call(agent, "t_fail", {})
    assert failed.status_code == 200 and "always fails" in failed.json()["error"]
    assert call(agent, "broken_anything", {}).status_code == 404  # a server that never started has no tools


def test_concurrent_mcp_calls_share_one_server(agent: httpx.Client) -> None:
    results: list[httpx.Response] = []

    def one(i: int) -> None:
        results.append(call(agent, "t_echo", {"message": f"m{i}"}))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(r.json()["plain_text_response"] for r in results) == sorted(f"echo: m{i}" for i in range(8))
    pids = {call(agent, "t_pid", {}).json()["plain_text_response"] for _ in range(3)}
    assert len(pids) == 1  # started once, then kept


@pytest.fixture
def http_mcp_server() -> Iterator[str]:
    """The fixture MCP server over streamable HTTP; its URL."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(MCP_SERVER), "--http", str(port)], stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:  # ready once it accepts connections
            assert proc.poll() is None and time.monotonic() < deadline, "the HTTP MCP server did not start"
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait(30)


def test_a_remote_mcp_server_over_streamable_http(tiny_model_path: Path, http_mcp_server: str) -> None:
    remote = {"url": http_mcp_server, "headers": {"X-Test-Token": "sent-by-config"}}
    proc, base = start_server(tiny_model_path, "--mcp-servers-json", mcp_json(remote=remote))
    try:
        names = [t["tool"] for t in httpx.get(f"{base}/tools", timeout=30).json()]
        assert {"remote_echo", "remote_header"} <= set(names)

        def call_remote(tool: str, params: dict[str, Any]) -> Any:
            return httpx.post(f"{base}/tools", json={"tool": tool, "params": params}, timeout=60).json()

        assert call_remote("remote_echo", {"message": "hi"}) == {"plain_text_response": "echo: hi"}
        assert call_remote("remote_header", {"name": "x-test-token"}) == {"plain_text_response": "sent-by-config"}
    finally:
        out = stop_server(proc)
    assert proc.returncode == 0, out[-3000:]


def test_a_crashed_mcp_server_is_started_again(agent: httpx.Client) -> None:
    before = call(agent, "t_pid", {}).json()["plain_text_response"]
    crashed = call(agent, "t_crash", {}).json()
    assert "error" in crashed
    after = call(agent, "t_pid", {}).json()
    assert "plain_text_response" in after and after["plain_text_response"] != before


def test_cors_is_local_only_once_tools_are_on(agent: httpx.Client) -> None:
    preflight = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "Authorization"}
    local = agent.options("/completions", headers={"Origin": "http://localhost:8080", **preflight})
    assert local.headers["Access-Control-Allow-Origin"] == "http://localhost:8080"
    evil = agent.options("/completions", headers={"Origin": "http://evil.com", **preflight})
    assert evil.status_code == 200 and "Access-Control-Allow-Origin" not in evil.headers


class Capture(BaseHTTPRequestHandler):
    """A target for the proxy: records what reached it; /empty answers 204."""

    seen: list[dict[str, str]] = []

    def _answer(self) -> None:
        Capture.seen.append({k.lower(): v for k, v in self.headers.items()})
        if self.path == "/empty":
            self.send_response(204)
            self.end_headers()
            return
        length = int(self.headers.get("content-length") or 0)
        body = b"echo:" + self.rfile.read(length) if length else b'{"data": "target"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Access-Control-Allow-Origin", "https://elsewhere.example")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer  # noqa: N815

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def target() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Capture)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_cors_proxy_forwards_only_named_headers(agent: httpx.Client, target: str) -> None:
    headers = {
        "Cookie": "session=secret",
        "Proxy-Authorization": "Basic secret",
        "x-llama-server-proxy-header-accept": "application/json",
        "x-llama-server-proxy-header-authorization": "Bearer explicit",
    }
    res = agent.get("/cors-proxy", params={"url": f"{target}/capture"}, headers=headers)
    assert res.status_code == 200 and res.json() == {"data": "target"}
    seen = Capture.seen[-1]
    assert seen["accept"] == "application/json" and seen["authorization"] == "Bearer explicit"
    assert "cookie" not in seen and "proxy-authorization" not in seen and "x-api-key" not in seen
    assert res.headers.get("access-control-allow-origin") != "https://elsewhere.example"  # ours, not the target's
    posted = agent.post("/cors-proxy", params={"url": f"{target}/rpc"}, content=b"payload")
    assert posted.status_code == 200 and posted.content == b"echo:payload"
    empty = agent.post("/cors-proxy", params={"url": f"{target}/empty"}, content=b"{}")
    assert empty.status_code == 204 and empty.content == b""


def test_cors_proxy_refuses_bad_targets(agent: httpx.Client) -> None:
    for url, why in [
        ("file:///etc/passwd", "unsupported URL scheme"),
        ("http://user:pw@127.0.0.1/", "authentication in target URL"),
        ("not a url", "invalid URL: no scheme"),
        ("http:///path", "missing host"),
    ]:
        res = agent.get("/cors-proxy", params={"url": url})
        assert res.status_code == 500 and why in res.json()["error"]["message"], (url, res.text)


def sse_data(raw: bytes) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in raw.decode().splitlines() if line.startswith("data: {")]


def test_stream_replays_and_stops(agent: httpx.Client) -> None:
    cid = "conv-1::org/model:Q8_0"  # a slash in the id: it travels in the query string
    body = {"prompt": "Once upon a time", "n_predict": 12, "stream": True, "ignore_eos": True}
    with agent.stream("POST", "/completion", json=body, headers={"X-Conversation-Id": cid}) as res:
        live = b"".join(res.iter_bytes())
    events = sse_data(live)
    assert len(events) == 13 and events[-1]["stop"] is True  # 12 tokens, then the final event
    replay = agent.get("/v1/stream", params={"conv_id": cid, "from": 0})
    assert replay.status_code == 200 and replay.content == live
    tail = agent.get("/v1/stream", params={"conv_id": cid, "from": len(live) - 10})
    assert tail.content == live[-10:]
    found = agent.post("/v1/streams/lookup", json={"conversation_ids": ["conv-1", "unknown"]}).json()
    assert [(s["conversation_id"], s["is_done"], s["total_bytes"]) for s in found] == [(cid, True, len(live))]
    assert agent.delete("/v1/stream", params={"conv_id": cid}).status_code == 204
    assert agent.get("/v1/stream", params={"conv_id": cid}).status_code == 404
    assert agent.delete("/v1/stream", params={"conv_id": cid}).status_code == 204  # idempotent
    assert agent.get("/v1/stream").status_code == 400
    assert agent.post("/v1/streams/lookup", content=b"[").status_code == 400


def test_generation_outlives_its_client(agent: httpx.Client) -> None:
    cid = "conv-reload"
    body = {"prompt": "Once upon a time", "n_predict": 48, "stream": True, "ignore_eos": True}
    with agent.stream("POST", "/completion", json=body, headers={"X-Conversation-Id": cid}) as res:
        next(res.iter_bytes())  # the first event, then the page "reloads"
    resumed = agent.get("/v1/stream", params={"conv_id": cid, "from": 0})  # to the end of the generation
    events = sse_data(resumed.content)
    assert len(events) == 49 and events[-1]["stop"] is True


def test_user_stop_cancels_the_generation(agent: httpx.Client) -> None:
    cid = "conv-stop"
    body = {"prompt": "Once upon a time", "n_predict": 4000, "stream": True, "ignore_eos": True}
    with agent.stream("POST", "/completion", json=body, headers={"X-Conversation-Id": cid}) as res:
        chunks = res.iter_bytes()
        next(chunks)
        assert agent.delete("/v1/stream", params={"conv_id": cid}).status_code == 204
        rest = b"".join(chunks)  # the response ends instead of running 4000 tokens
    assert not any(e.get("stop") for e in sse_data(rest))
    deadline = time.monotonic() + 60  # the cancel reaches the loop thread at its next step
    while any(s["is_processing"] for s in agent.get("/slots").json()):
        assert time.monotonic() < deadline, "the stopped generation still holds its slot"
        time.sleep(0.05)


def test_off_by_default(server: httpx.Client) -> None:
    assert server.get("/tools").status_code == 403
    assert server.post("/tools", json={"tool": "read_file", "params": {"path": "/etc/passwd"}}).status_code == 403
    proxied = server.get("/cors-proxy", params={"url": "http://127.0.0.1:9/"})
    assert proxied.status_code == 403 and proxied.json()["error"]["type"] == "feature_disabled"


@pytest.mark.parametrize(
    "flags, cause",
    [
        (("--mcp-servers-json", "not valid json"), "failed to parse MCP config JSON"),
        (("--mcp-servers-config", "/nonexistent/mcp.json"), "failed to open MCP config file"),
        (("--tools", "read_file,teleport"), 'unknown tool "teleport"'),
        (("--tools", "all", "--tools-runtime", "fake:x"), "unknown tool runtime"),
    ],
)
def test_bad_agent_flags_stop_the_server(tiny_model_path: Path, flags: tuple[str, ...], cause: str) -> None:
    with pytest.raises(RuntimeError, match=cause):
        start_server(tiny_model_path, *flags)


def test_shutdown_does_not_wait_for_a_slow_mcp_call(tiny_model_path: Path, tmp_path: Path) -> None:
    proc, base = start_server(tiny_model_path, "--mcp-servers-json", mcp_json(slow=mcp_test_server(timeout_ms=600_000)))
    marker = tmp_path / "sleep-started"
    answer: list[httpx.Response] = []

    def slow_call() -> None:
        params = {"seconds": 600, "started_marker": str(marker)}
        try:
            answer.append(httpx.post(f"{base}/tools", json={"tool": "slow_sleep", "params": params}, timeout=120))
        except httpx.HTTPError:
            pass

    caller = threading.Thread(target=slow_call)
    caller.start()
    deadline = time.monotonic() + 30
    while not marker.exists():  # the MCP server creates it when the slow call has begun
        assert time.monotonic() < deadline, "the slow MCP call never started"
        time.sleep(0.05)
    assert httpx.post(f"{base}/tools", json={"tool": "slow_pid", "params": {}}, timeout=60).status_code == 200
    out = stop_server(proc)  # returns when the process exited; wait_and_read_log bounds it at 60 s
    caller.join(60)
    assert not caller.is_alive()
    assert proc.returncode == 0, out[-3000:]
    assert not answer or answer[0].json() == {"error": "cancelled"}
