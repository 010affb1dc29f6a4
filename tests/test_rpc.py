"""llama.cpp's RPC backend: ``python -m pyllama_yield rpc-server`` lending its CPU over loopback,
``serve --rpc`` putting a tiny model's layers there, and the two ways an rpc-server fails it.

Every engine that uses an rpc-server runs in a subprocess: registering a remote device is for
the whole process, and a later test's model would offload to a server that is gone."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

httpx = pytest.importorskip("httpx")
from http_server import REPO, free_port, start_server, stop_server, wait_and_read_log  # noqa: E402

from pyllama_yield import lib, rpc  # noqa: E402

pytestmark = pytest.mark.skipif(not lib.llama_supports_rpc(), reason="built with -DGGML_RPC=OFF")

GREEDY = {"prompt": "Once upon a time", "n_predict": 24, "temperature": 0, "cache_prompt": False}


@contextmanager
def rpc_server(*args: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """Our ``rpc-server`` on a free loopback port, until the block ends; yields it and its endpoint."""
    port = free_port()
    endpoint = f"127.0.0.1:{port}"
    log = tempfile.TemporaryFile("w+")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [sys.executable, "-m", "pyllama_yield", "rpc-server", "--port", str(port), "--threads", "1", *args],
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        deadline = time.monotonic() + 60
        while True:  # waiting for a process to listen: nothing to wait on but the port
            try:
                rpc.probe(endpoint, timeout_s=5)
                break
            except rpc.RpcError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    raise RuntimeError(f"rpc-server did not start: {log.read()}") from None
                time.sleep(0.1)
        yield proc, endpoint
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)
        log.close()


def completion(base: str, body: dict[str, object]) -> str:
    r = httpx.post(f"{base}/completion", json=body, timeout=120)
    assert r.status_code == 200, r.text
    return str(r.json()["content"])


# --- the client side: endpoints checked before llama.cpp sees them ----------------------------
@pytest.mark.parametrize("endpoint", ["localhost", "127.0.0.1:", "127.0.0.1:port", ":50052", "127.0.0.1:70000"])
def test_a_malformed_endpoint_is_refused(endpoint: str) -> None:
    with pytest.raises(ValueError, match="host:port"):
        rpc.probe(endpoint)


def test_an_unreachable_endpoint_is_an_error_naming_it() -> None:
    endpoint = f"127.0.0.1:{free_port()}"  # nothing listens there
    with pytest.raises(rpc.RpcError, match=f"cannot reach rpc-server at {endpoint}"):
        rpc.connect([endpoint])


def test_a_server_that_is_not_an_rpc_server_is_refused() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        endpoint = f"127.0.0.1:{listener.getsockname()[1]}"

        def answer_like_http() -> None:
            conn, _ = listener.accept()
            with conn:
                conn.recv(64)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")

        t = threading.Thread(target=answer_like_http)
        t.start()
        with pytest.raises(rpc.RpcError, match=f"{endpoint} is not a usable rpc-server"):
            rpc.probe(endpoint)
        t.join(10)


def test_a_server_that_never_answers_times_out_with_the_likely_cause() -> None:
    with socket.socket() as listener:  # accepts (the kernel does) but never replies
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        endpoint = f"127.0.0.1:{listener.getsockname()[1]}"
        with pytest.raises(rpc.RpcError, match="did not answer within 0.3 s.*one client at a time"):
            rpc.probe(endpoint, timeout_s=0.3)


def test_serve_refuses_an_unreachable_rpc_server_at_start(tiny_model_path: Path) -> None:
    endpoint = f"127.0.0.1:{free_port()}"
    with pytest.raises(RuntimeError, match=f"cannot reach rpc-server at {endpoint}"):
        start_server(tiny_model_path, "--rpc", endpoint, "-ngl", "99")


# --- the server side ---------------------------------------------------------------------------
def test_rpc_server_lends_its_cpu_and_info_lists_it() -> None:
    with rpc_server() as (_, endpoint):
        out = subprocess.run(
            [sys.executable, "-m", "pyllama_yield", "info", "--json", "--rpc", endpoint],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
    assert out.returncode == 0, out.stderr
    regs = {b["name"]: b["devices"] for b in json.loads(out.stdout)["backends"]}
    devices = regs[f"RPC[{endpoint}]"]
    assert len(devices) == 1 and devices[0]["name"].startswith("RPC") and devices[0]["description"] == endpoint
    assert devices[0]["memory_total"] > 0


def test_rpc_server_refuses_a_busy_port_and_an_unknown_device() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        cmd = [sys.executable, "-m", "pyllama_yield", "rpc-server", "--port", str(port)]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 1 and f"cannot listen on 127.0.0.1:{port}" in out.stderr
    cmd = [sys.executable, "-m", "pyllama_yield", "rpc-server", "--port", str(free_port()), "--device", "NOPE0"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 1 and "unknown device 'NOPE0'" in out.stderr and "CPU" in out.stderr


def test_rpc_server_warns_when_listening_beyond_loopback() -> None:
    cmd = [sys.executable, "-m", "pyllama_yield", "rpc-server", "--host", "0.0.0.0", "--port", "0", "--device", "X"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert "Never expose the RPC server to an open network" in out.stderr


def test_a_model_split_over_two_rpc_servers_answers_as_the_local_one(tiny_model_path: Path) -> None:
    proc, base = start_server(tiny_model_path, "--threads", "1")
    try:
        local = completion(base, GREEDY)
    finally:
        assert stop_server(proc) is not None and proc.returncode == 0
    with rpc_server() as (_, a), rpc_server() as (_, b):
        flags = ["--threads", "1", "--rpc", f"{a},{b}", "-ngl", "99", "-ts", "1,1", "-v"]
        proc, base = start_server(tiny_model_path, *flags)
        try:
            assert completion(base, GREEDY) == local
            assert completion(base, {**GREEDY, "stream": False, "n_predict": 4}).strip()
        finally:
            out = stop_server(proc)
        assert proc.returncode == 0, out[-3000:]
        for endpoint in (a, b):  # llama.cpp's load log: model weights on both rpc-servers
            assert any(f"[{endpoint}] model buffer size" in line for line in out.splitlines()), out[-5000:]


def test_an_rpc_server_that_dies_fails_the_requests_not_the_server(tiny_model_path: Path) -> None:
    with rpc_server() as (rpc_proc, endpoint):
        proc, base = start_server(tiny_model_path, "--threads", "1", "--rpc", endpoint, "-ngl", "99")
        try:
            events: list[dict[str, object]] = []
            body = {**GREEDY, "n_predict": 100000, "ignore_eos": True, "stream": True}
            with httpx.stream("POST", f"{base}/completion", json=body, timeout=60) as r:
                for line in r.iter_lines():
                    if not line.startswith("data: "):
                        continue
                    events.append(json.loads(line[6:]))
                    if len(events) == 3:  # decoding on the rpc-server: now it dies
                        rpc_proc.send_signal(signal.SIGKILL)
            last = events[-1]
            assert "error" in last, events[-3:]
            assert "llama.cpp aborted" in json.dumps(last)
            health = httpx.get(f"{base}/health", timeout=10)
            assert health.status_code == 503
            assert "RPC server" in health.json()["error"]["message"]  # llama.cpp's own words
            again = httpx.post(f"{base}/completion", json=GREEDY, timeout=10)
            assert again.status_code == 503
            assert proc.poll() is None  # still answering, no crash
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            out = wait_and_read_log(proc)
        assert proc.returncode == 1, out[-3000:]
        assert "error: the model can no longer run" in out, out[-3000:]


def test_the_llama_api_takes_rpc_servers(tiny_model_path: Path) -> None:
    script = (
        "import sys\n"
        "from pyllama_yield import Llama\n"
        "kw = dict(n_gpu_layers=-1, rpc_servers=sys.argv[2]) if len(sys.argv) > 2 else {}\n"
        "with Llama(sys.argv[1], n_ctx=256, n_threads=1, **kw) as llm:\n"
        "    print(repr(llm('Once upon a time', max_tokens=12, temperature=0)['choices'][0]['text']))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def run(*extra: str) -> str:
        out = subprocess.run(
            [sys.executable, "-c", script, str(tiny_model_path), *extra],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        assert out.returncode == 0, out.stderr[-3000:]
        return out.stdout

    local = run()
    with rpc_server() as (_, endpoint):
        assert run(endpoint) == local


def test_serve_whose_rpc_server_is_gone_still_ends_on_sigterm(tiny_model_path: Path) -> None:
    """Freeing a model on a dead rpc-server made llama.cpp abort inside the free, on the main
    thread, which the abort hold then parked: SIGTERM could no longer end serve."""
    with rpc_server() as (rpc_proc, endpoint):
        proc, base = start_server(tiny_model_path, "--threads", "1", "--rpc", endpoint, "-ngl", "99")
        try:
            assert completion(base, {**GREEDY, "n_predict": 4})
            rpc_proc.send_signal(signal.SIGKILL)  # gone while the server is idle
            rpc_proc.wait(30)
        finally:
            proc.send_signal(signal.SIGTERM)
            out = wait_and_read_log(proc)  # bounded: a hang fails here
    assert proc.returncode == 1, out[-3000:]
    assert f"error: the model's rpc-server at {endpoint} is gone" in out, out[-3000:]


_ABORT = """
import os, sys, threading
from pyllama_yield._native import ffi, hold_on_abort, lib
heard = []
hold_on_abort(heard.append)
if sys.argv[1] == "thread":
    t = threading.Thread(target=lambda: lib.ggml_abort(b"t.c", 1, b"%s", ffi.new("char[]", b"boom")), daemon=True)
    t.start()
    t.join(10)
    print("parked" if t.is_alive() else "returned", heard, flush=True)
    os._exit(0)
lib.ggml_abort(b"t.c", 1, b"%s", ffi.new("char[]", b"boom"))
print("not reached", flush=True)
"""


@pytest.mark.skipif(sys.platform != "linux", reason="the main-thread rule is Linux's")
def test_an_abort_parks_a_worker_thread_but_never_the_main_thread() -> None:
    worker = subprocess.run([sys.executable, "-c", _ABORT, "thread"], capture_output=True, text=True, timeout=60)
    assert worker.returncode == 0 and "parked ['t.c:1: boom']" in worker.stdout, worker.stdout + worker.stderr
    main = subprocess.run([sys.executable, "-c", _ABORT, "main"], capture_output=True, text=True, timeout=60)
    assert main.returncode == -signal.SIGABRT and "not reached" not in main.stdout, main.stdout + main.stderr
