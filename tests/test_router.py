"""Router mode (``serve`` with ``--models-dir`` / ``--models-preset`` and no model): models listed
from a folder and a preset, routed by the body's or the query's ``model``, one process per model,
at most ``--models-max`` running (least recently used evicted, a busy one never), a corrupt or
killed model failing alone and coming back, unload, and SIGTERM ending the router and every model."""

from __future__ import annotations

import json
import os
import shutil
import signal
import threading
import time
from pathlib import Path

import httpx
import pytest
from http_server import start_serve, stop_server, wait_and_read_log

TIMEOUT = 120


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory: pytest.TempPathFactory, tiny_model_path: Path) -> Path:
    """Two tiny models, a corrupt one, and a vision model in a folder of its own with its mmproj."""
    from pyllama_yield.testing import make_tiny_vision_model

    folder = tmp_path_factory.mktemp("models")
    shutil.copy(tiny_model_path, folder / "tiny-a.gguf")
    shutil.copy(tiny_model_path, folder / "tiny-b.gguf")
    (folder / "broken.gguf").write_bytes(b"GGUF but not really")
    model, mmproj = make_tiny_vision_model(folder / "vision")
    mmproj.rename(folder / "vision" / "mmproj-tiny.gguf")
    return folder


def router(models_dir: Path, *args: str) -> tuple[object, httpx.Client]:
    proc, base = start_serve(["--models-dir", str(models_dir), "-c", "512", "-np", "1", "-t", "1", *args], models_dir)
    return proc, httpx.Client(base_url=base, timeout=TIMEOUT)


def statuses(c: httpx.Client) -> dict[str, dict]:
    return {m["id"]: m["status"] for m in c.get("/models").json()["data"]}


def wait_status(c: httpx.Client, model: str, value: str) -> dict:
    deadline = time.monotonic() + TIMEOUT
    while (status := statuses(c)[model])["value"] != value:
        assert time.monotonic() < deadline, status
        time.sleep(0.05)  # polling the router's state, as llama-server's clients do
    return status


def complete(c: httpx.Client, model: str, **kw: object) -> httpx.Response:
    return c.post("/completion", json={"model": model, "prompt": "Hello", "n_predict": 4, **kw})


def model_pid(status: dict) -> int:
    """The process serving a loaded model (found by the port in its command line)."""
    port = status["args"][status["args"].index("--port") + 1]
    for pid in os.listdir("/proc"):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue
        if b"--port" in cmd and cmd[cmd.index(b"--port") + 1] == port.encode() and b"--alias" in cmd:
            return int(pid)
    raise AssertionError(f"no process on port {port}")


def test_the_folder_is_listed_and_requests_are_routed_by_model(models_dir):
    proc, c = router(models_dir, "--models-max", "2")
    with c:
        listed = {m["id"]: m for m in c.get("/v1/models").json()["data"]}
        assert sorted(listed) == ["broken", "tiny-a", "tiny-b", "vision"]
        assert all(m["source"] == "models_dir" and m["status"]["value"] == "unloaded" for m in listed.values())
        assert listed["vision"]["architecture"]["input_modalities"] == ["text", "image"]
        assert c.get("/props").json()["role"] == "router"
        r = c.post("/v1/chat/completions", json={"model": "tiny-a", "messages": [{"role": "user", "content": "hi"}]})
        assert r.status_code == 200 and r.json()["model"] == "tiny-a"
        assert c.get("/slots", params={"model": "tiny-a"}).status_code == 200  # a GET by ?model=
        body = {"model": "tiny-b", "prompt": "Hi", "n_predict": 3, "stream": True}
        with c.stream("POST", "/completion", json=body) as s:
            events = [json.loads(line[6:]) for line in s.iter_lines() if line.startswith("data: ")]
        assert len(events) == 4 and events[-1]["stop"] is True  # three tokens and the end, as they came
        assert complete(c, "nope").json()["error"]["message"] == "model 'nope' not found"
        missing = c.post("/completion", json={"prompt": "x"}).json()["error"]["message"]
        assert missing == "model name is missing from the request"
    assert "shut down: no thread left" in stop_server(proc)  # type: ignore[arg-type]


def test_lru_eviction_never_takes_a_model_with_a_request_in_flight(models_dir):
    proc, c = router(models_dir, "--models-max", "1")
    with c:
        assert complete(c, "tiny-a").status_code == 200
        a_events: list[dict] = []
        a_done = threading.Event()
        first_event = threading.Event()

        def long_stream() -> None:
            body = {"model": "tiny-a", "prompt": "Hi", "n_predict": 64, "stream": True, "ignore_eos": True}
            with c.stream("POST", "/completion", json=body) as s:
                for line in s.iter_lines():
                    if line.startswith("data: "):
                        a_events.append(json.loads(line[6:]))
                        first_event.set()
            a_done.set()

        t = threading.Thread(target=long_stream)
        t.start()
        assert first_event.wait(TIMEOUT)  # tiny-a is busy now
        r = complete(c, "tiny-b")  # waits for tiny-a's request, then evicts it
        assert a_done.is_set(), "tiny-b was loaded while tiny-a still streamed"
        t.join(TIMEOUT)
        assert r.status_code == 200 and a_events[-1]["stop"] is True and a_events[-1]["tokens_predicted"] == 64
        now = statuses(c)
        assert now["tiny-a"]["value"] == "unloaded" and now["tiny-b"]["value"] == "loaded"
        assert c.post("/models/unload", json={"model": "tiny-b"}).json() == {"success": True}
        assert statuses(c)["tiny-b"]["value"] == "unloaded"
        assert c.post("/models/unload", json={"model": "tiny-b"}).json()["error"]["message"] == "model is not running"
        assert c.post("/models/unload", json={"model": "x"}).status_code == 400
        assert c.post("/models/load", json={"model": "x"}).status_code == 404
    stop_server(proc)  # type: ignore[arg-type]


def test_a_client_that_leaves_mid_stream_frees_its_model_for_eviction(models_dir):
    """The router closes the model's stream when its client goes, so the model stops generating
    and is idle again (with context shift, this stream would otherwise run for minutes)."""
    proc, c = router(models_dir, "--models-max", "1", "--context-shift")
    with c:
        body = {"model": "tiny-a", "prompt": "Hi", "n_predict": 100_000, "ignore_eos": True, "stream": True}
        with c.stream("POST", "/completion", json=body) as s:
            assert next(line for line in s.iter_lines() if line.startswith("data: "))
        # the client left: tiny-a must be idle at once, so tiny-b may evict it
        assert complete(c, "tiny-b").status_code == 200
        now = statuses(c)
        assert now["tiny-a"]["value"] == "unloaded" and now["tiny-b"]["value"] == "loaded"
    stop_server(proc)  # type: ignore[arg-type]


def test_a_corrupt_or_killed_model_fails_alone_and_comes_back(models_dir):
    proc, c = router(models_dir, "--models-max", "2")
    with c:
        r = complete(c, "broken")
        assert r.status_code == 500 and r.json()["error"]["message"] == "model name=broken failed to load"
        broken = statuses(c)["broken"]
        assert (broken["value"], broken["failed"], broken["exit_code"]) == ("unloaded", True, 1)
        assert complete(c, "tiny-a").status_code == 200  # the router and the others live on
        os.kill(model_pid(statuses(c)["tiny-a"]), signal.SIGKILL)
        status = wait_status(c, "tiny-a", "unloaded")
        assert status["failed"] is True and status["exit_code"] == 128 + signal.SIGKILL
        assert complete(c, "tiny-a").status_code == 200  # loaded again on the next request
        assert "exit_code" not in statuses(c)["tiny-a"]
    stop_server(proc)  # type: ignore[arg-type]


def test_without_autoload_a_model_serves_once_loaded_and_the_key_guards_the_router(models_dir):
    proc, c = router(models_dir, "--no-models-autoload", "--api-key", "sk-r")
    with c:
        assert c.get("/health").status_code == 200  # public
        assert c.get("/models").status_code == 401
        c.headers["Authorization"] = "Bearer sk-r"
        assert c.get("/props").json()["models_autoload"] is False
        refused = complete(c, "tiny-a")
        assert refused.status_code == 400 and refused.json()["error"]["message"] == "model is not loaded"
        asked = c.post("/completion?autoload=true", json={"model": "tiny-b", "prompt": "x", "n_predict": 1})
        assert asked.status_code == 200  # ?autoload= overrides the flag
        assert c.post("/models/load", json={"model": "tiny-a"}).json() == {"success": True}
        assert c.post("/models/load", json={"model": "tiny-a"}).json()["error"]["message"] == "model is already running"
        wait_status(c, "tiny-a", "loaded")
        assert complete(c, "tiny-a").status_code == 200
    stop_server(proc)  # type: ignore[arg-type]


def test_a_preset_names_models_and_their_flags(models_dir, tmp_path):
    preset = tmp_path / "models.ini"
    preset.write_text(
        "[*]\nctx-size = 256\n\n"
        f"[small]\nmodel = {models_dir / 'tiny-a.gguf'}\nalias = little, petite\nLLAMA_ARG_N_PARALLEL = 2\n"
        "stop-timeout = 3\n\n"
        "[tiny-b]\nc = 128  ; merges into the folder's model\n"
    )
    proc, c = router(models_dir, "--models-preset", str(preset))
    with c:
        listed = {m["id"]: m for m in c.get("/models").json()["data"]}
        assert listed["small"]["source"] == "preset" and listed["small"]["aliases"] == ["little", "petite"]
        args = listed["small"]["status"]["args"]
        assert args[args.index("--ctx-size") + 1] == "256" and args[args.index("--parallel") + 1] == "2"
        b = listed["tiny-b"]["status"]["args"]
        assert listed["tiny-b"]["source"] == "preset" and b[b.index("--ctx-size") + 1] == "128"
        r = complete(c, "petite")  # an alias routes to its model
        assert r.status_code == 200 and r.json()["model"] == "small"
        preset.write_text(preset.read_text() + "\n[extra]\nmodel = " + str(models_dir / "tiny-b.gguf") + "\n")
        assert "extra" not in statuses(c) and "extra" in {m["id"] for m in c.get("/models?reload=1").json()["data"]}
    stop_server(proc)  # type: ignore[arg-type]
    bad = tmp_path / "bad.ini"
    bad.write_text("[m]\nteleport = yes\n")
    with pytest.raises(RuntimeError, match="option 'teleport' not recognized in preset 'm'"):
        start_serve(["--models-preset", str(bad)], tmp_path)


def test_keep_alive_unloads_an_idle_model_and_a_pinned_one_is_never_evicted(models_dir, tmp_path):
    preset = tmp_path / "keep.ini"
    preset.write_text("[tiny-a]\nkeep-alive = 1\n\n[tiny-b]\nkeep-alive = -1\n")
    proc, c = router(models_dir, "--models-preset", str(preset), "--models-max", "1")
    with c:
        assert complete(c, "tiny-a").status_code == 200
        wait_status(c, "tiny-a", "unloaded")  # a second idle, then unloaded (and not failed)
        assert "failed" not in statuses(c)["tiny-a"]
        assert complete(c, "tiny-b").status_code == 200  # pinned
        r = complete(c, "tiny-a")
        assert r.status_code == 500 and r.json()["error"]["message"] == "model limit reached, try again later"
        assert statuses(c)["tiny-b"]["value"] == "loaded"
        assert c.post("/models/unload", json={"model": "tiny-b"}).json() == {"success": True}  # by hand, it goes
        assert complete(c, "tiny-a").status_code == 200
    stop_server(proc)  # type: ignore[arg-type]


def test_ollamas_clients_pick_models_by_name_and_keep_alive_0_unloads(models_dir):
    ollama = pytest.importorskip("ollama")
    proc, c = router(models_dir, "--models-max", "2")
    with c:
        client = ollama.Client(host=str(c.base_url))
        assert {m.model for m in client.list().models} == {
            "broken:latest",
            "tiny-a:latest",
            "tiny-b:latest",
            "vision:latest",
        }
        r = client.chat(model="tiny-a:latest", messages=[{"role": "user", "content": "hi"}], options={"num_predict": 2})
        assert r.done and r.eval_count == 2 and [m.model for m in client.ps().models] == ["tiny-a:latest"]
        client.generate(model="tiny-b", prompt="x", options={"num_predict": 1}, keep_alive=0)
        wait_status(c, "tiny-b", "unloaded")  # keep_alive 0: unloaded once the answer is out
        assert statuses(c)["tiny-a"]["value"] == "loaded"  # no keep_alive given: it stays
        with pytest.raises(ollama.ResponseError) as unknown:
            client.chat(model="llama3", messages=[{"role": "user", "content": "hi"}])
        assert (unknown.value.status_code, unknown.value.error) == (404, "model 'llama3' not found")
        bad = c.post("/api/chat", json={"model": "tiny-a", "messages": [], "keep_alive": "soon"})
        assert bad.status_code == 400 and "keep_alive" in bad.json()["error"]
    stop_server(proc)  # type: ignore[arg-type]


def test_sigterm_ends_the_router_and_its_models_and_a_dead_router_takes_them_along(models_dir):
    for sig in (signal.SIGTERM, signal.SIGKILL):
        proc, c = router(models_dir, "--models-max", "2")
        with c:
            assert complete(c, "tiny-a").status_code == 200 and complete(c, "tiny-b").status_code == 200
            pids = [model_pid(s) for s in statuses(c).values() if s["value"] == "loaded"]
        assert len(pids) == 2
        proc.send_signal(sig)  # type: ignore[attr-defined]
        log = wait_and_read_log(proc)  # type: ignore[arg-type]
        deadline = time.monotonic() + 30
        while any(Path(f"/proc/{p}").exists() and "zombie" not in _state(p) for p in pids):
            assert time.monotonic() < deadline, f"models outlived the router ({sig.name}): {log[-2000:]}"
            time.sleep(0.05)  # waiting on other processes' exit: nothing to block on
        if sig is signal.SIGTERM:
            assert "shut down: no thread left" in log


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split("\n")[0]
    except (OSError, IndexError):
        return "zombie"


def test_keep_alive_durations_read_as_ollama_writes_them():
    from pyllama_yield.router.ollama import keep_alive_seconds

    assert [keep_alive_seconds(v) for v in (0, 30, "0", "5m", "1h30m", "-1", "1.5s", "250ms")] == [
        0, 30, 0, 300, 5400, -1, 1.5, 0.25,
    ]  # fmt: skip
    for bad in ("soon", "5 minutes", True, ""):
        with pytest.raises(ValueError, match="keep_alive"):
            keep_alive_seconds(bad)


def test_a_model_that_sleeps_shows_sleeping_and_a_request_wakes_it(models_dir):
    proc, c = router(models_dir, "--sleep-idle-seconds", "1")  # the router's flag goes to every model
    with c:
        assert complete(c, "tiny-a").status_code == 200
        wait_status(c, "tiny-a", "sleeping")  # the process runs, its model freed
        assert c.get("/props", params={"model": "tiny-a"}).json()["is_sleeping"] is True  # it stays asleep
        assert statuses(c)["tiny-a"]["value"] == "sleeping"
        r = complete(c, "tiny-a")
        assert r.status_code == 200 and r.json()["tokens_predicted"] == 4
        assert statuses(c)["tiny-a"]["value"] == "loaded"
    stop_server(proc)  # type: ignore[arg-type]


def test_the_router_runs_the_server_tools_itself(models_dir, tmp_path):
    proc, c = router(models_dir, "--tools", "read_file,get_info")
    with c:
        assert sorted(t["tool"] for t in c.get("/tools").json()) == ["get_info", "read_file"]
        note = tmp_path / "note.txt"
        note.write_text("from the router\n")
        r = c.post("/tools", json={"tool": "read_file", "params": {"path": str(note)}})
        assert r.json()["plain_text_response"] == "from the router\n"
        assert c.post("/tools", json={"tool": "exec_shell_command", "params": {}}).status_code == 404
        assert complete(c, "tiny-a").status_code == 200
        assert "--tools" not in statuses(c)["tiny-a"]["args"]  # the models' processes run none
    stop_server(proc)  # type: ignore[arg-type]
    proc, c = router(models_dir)
    with c:
        assert c.get("/tools").status_code == 403  # off unless --tools or MCP servers, as llama-server
    stop_server(proc)  # type: ignore[arg-type]


def test_sessions_resume_through_the_router_and_a_stop_cancels_a_request_waiting_for_its_model(models_dir, tmp_path):
    fifo = tmp_path / "slow.gguf"
    os.mkfifo(fifo)  # a model file that never opens: its process stays "loading"
    preset = tmp_path / "slow.ini"
    preset.write_text(f"[slow]\nmodel = {fifo}\nstop-timeout = 1\n")
    proc, c = router(models_dir, "--models-preset", str(preset))
    session = {"X-Conversation-Id": "conv-a"}
    with c:
        body = {"model": "tiny-a", "prompt": "Hi", "n_predict": 4, "stream": True}
        with c.stream("POST", "/completion", json=body, headers=session) as r:
            assert "data: " in "".join(r.iter_text())
        r = c.get("/v1/stream", params={"conv_id": "conv-a", "from": 0})  # replayed by the model's process
        assert r.status_code == 200 and "data: " in r.text
        assert c.delete("/v1/stream", params={"conv_id": "conv-a"}).status_code == 204
        assert c.get("/v1/stream", params={"conv_id": "conv-a", "from": 0}).status_code == 404

        waiting: dict[str, httpx.Response] = {}

        def post() -> None:
            with httpx.Client(base_url=c.base_url, timeout=TIMEOUT) as other:
                slow = {"model": "slow", "prompt": "Hi", "stream": True}
                waiting["r"] = other.post("/completion", json=slow, headers={"X-Conversation-Id": "conv-b"})

        thread = threading.Thread(target=post)
        thread.start()
        wait_status(c, "slow", "loading")
        r = c.get("/v1/stream", params={"conv_id": "conv-b", "from": 0})
        assert r.status_code == 503 and "retry later" in r.json()["error"]["message"]
        assert c.delete("/v1/stream", params={"conv_id": "conv-b"}).status_code == 204
        thread.join(TIMEOUT)
        assert waiting["r"].status_code == 400 and "cancelled by a stop" in waiting["r"].json()["error"]["message"]
        assert c.get("/v1/stream", params={"conv_id": "conv-b", "from": 0}).status_code == 404
    stop_server(proc)  # type: ignore[arg-type]
