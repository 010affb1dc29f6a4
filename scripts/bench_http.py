#!/usr/bin/env python3
"""N concurrent streaming clients against our HTTP server (and llama-server, given its binary).

Each client streams one greedy completion of ``--n-predict`` tokens (EOS ignored) from
``/completion``; the script reports aggregate generated tokens/s and time-to-first-token
p50/p99, for our server and, with ``--llama-server PATH`` (see scripts/build_llama_server.sh),
for llama.cpp's own server on the same model with the same slots and threads, and their ratio.
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench import bench_model, print_table, run_clients, summarize_us, write_json  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(cmd: list[str], port: int) -> subprocess.Popen:
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return proc
        except httpx.TransportError:
            pass
        if proc.poll() is not None:
            raise RuntimeError(f"{cmd[0]} exited with {proc.returncode}")
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"{cmd[0]} did not start")


def load(port: int, clients: int, n_predict: int) -> dict:
    ttft: list[int] = []
    tokens = [0] * clients
    lock = threading.Lock()

    def client(i: int, start: Callable[[], object]) -> None:
        body = {
            "prompt": f"Client {i} says: once upon a time",
            "n_predict": n_predict,
            "temperature": 0.0,
            "ignore_eos": True,
            "stream": True,
            "cache_prompt": False,
        }
        with httpx.Client(timeout=300) as c:
            start()
            t0 = time.perf_counter_ns()
            first = True
            with c.stream("POST", f"http://127.0.0.1:{port}/completion", json=body) as r:
                for line in r.iter_lines():
                    if not line.startswith("data: "):
                        continue
                    event = json.loads(line[6:])
                    if first:
                        with lock:
                            ttft.append(time.perf_counter_ns() - t0)
                        first = False
                    if event.get("stop"):
                        tokens[i] = event.get("tokens_predicted", n_predict)

    wall = run_clients(clients, client)
    s = summarize_us(ttft)
    return {
        "tokens": sum(tokens),
        "wall_s": wall,
        "tokens_per_s": sum(tokens) / wall,
        "ttft_p50_ms": s["p50_us"] / 1e3,
        "ttft_p99_ms": s["p99_us"] / 1e3,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--n-predict", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--llama-server", type=Path, help="llama.cpp's llama-server binary, for a side-by-side run")
    ap.add_argument("--model", type=Path, help="GGUF model (default: a generated tiny model)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model or bench_model(Path(tmp))

        def flags(ctx_size: int) -> list[str]:
            return [
                "-m",
                str(model),
                "--parallel",
                str(args.clients),
                "--threads",
                str(args.threads),
                "--ctx-size",
                str(ctx_size),
            ]

        total_ctx = (args.n_predict + 64) * args.clients  # --ctx-size is the total over all slots, in both
        servers = [("pyllama-yield", [sys.executable, "-m", "pyllama_yield", "serve", *flags(total_ctx)])]
        if args.llama_server:
            servers.append(("llama-server", [str(args.llama_server), *flags(total_ctx), "--no-webui"]))
        for name, cmd in servers:
            port = free_port()
            proc = launch([*cmd, "--port", str(port)], port)
            try:
                load(port, args.clients, 8)  # warm up
                rows.append({"server": name, "clients": args.clients, **load(port, args.clients, args.n_predict)})
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.wait(60)
    print_table(rows, ["server", "clients", "tokens", "wall_s", "tokens_per_s", "ttft_p50_ms", "ttft_p99_ms"])
    result: dict = {"rows": rows}
    if len(rows) == 2:
        result["tokens_per_s_ratio_ours_vs_llama_server"] = rows[0]["tokens_per_s"] / rows[1]["tokens_per_s"]
        print(f"tokens/s ours / llama-server = {result['tokens_per_s_ratio_ours_vs_llama_server']:.3f}")
    else:
        print("llama-server: not given (--llama-server PATH; build it with scripts/build_llama_server.sh)")
    write_json("bench_http", result, args.out)


if __name__ == "__main__":
    main()
