#!/usr/bin/env python3
"""Serving under load, ours against llama-server, each run on a freshly started server.

For each client count N (``--clients 1,4,8,16,32``) and each server (the servers taking turns,
``--repeat`` rounds, the median round reported), a fresh server starts with the same flags
(``-t T -np N -c N×1024 --metrics``) and then:
1. **first burst**: N streaming clients at once, each a short request (``--burst-tokens``) of the
   same shape: the slowest answer's time (what a user of a just-started server waits);
2. **load**: N clients stream ``--n-predict`` tokens each from ``/completion`` (EOS ignored), while
   one more client polls ``/metrics`` every ``--poll-ms``: aggregate tokens/s, time to first token
   p50/p99, inter-token latency p50/p99, ``/metrics`` round trip p50/p99.
Then **a burst of ``--big-burst`` streaming clients at once** on a fresh server with 2 slots: how
many got an answer, the slowest first event, and whether any slot was left busy.

Writes ``benchmarks/bench_serving.json`` (``--out``): commit, machine, flags, every round of
every measurement, the medians and the ratios ours / llama-server.

    scripts/bench_serving.py --llama-server build/llama-server/bin/llama-server
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
from _bench import (  # noqa: E402
    bench_model,
    git_commit,
    print_table,
    run_clients,
    sse_events,
    stream_clients,
    streaming_body,
    summarize_us,
    write_json,
)
from bench_http import free_port, launch  # noqa: E402


def _ms(samples_ns: list[int]) -> dict[str, float]:
    s = summarize_us(samples_ns or [0])
    return {"p50_ms": s["p50_us"] / 1e3, "p99_ms": s["p99_us"] / 1e3, "max_ms": s["max_us"] / 1e3}


def metrics_poller(port: int, interval_s: float) -> tuple[Callable[[], list[int]], threading.Event]:
    """Polls /metrics on one connection every ``interval_s`` until the event is set (a scraper
    that asks often, not a flood: back to back, Python's HTTP handling would be the load);
    returns the round trips."""
    stop = threading.Event()
    samples: list[int] = []

    def poll() -> None:
        with httpx.Client(timeout=60) as c:
            while not stop.wait(interval_s):
                t0 = time.perf_counter_ns()
                c.get(f"http://127.0.0.1:{port}/metrics").raise_for_status()
                samples.append(time.perf_counter_ns() - t0)

    t = threading.Thread(target=poll)
    t.start()

    def finish() -> list[int]:
        stop.set()
        t.join()
        return samples

    return finish, stop


def fresh_server(cmd: list[str], flags: list[str], cwd: Path | None = None) -> tuple[subprocess.Popen[bytes], int]:
    """``cwd``: where ours runs from (its Python code comes from a checkout there)."""
    port = free_port()
    return launch([*cmd, *flags, "--port", str(port)], port, cwd), port


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def one_round(
    cmd: list[str], flags: list[str], n: int, burst_tokens: int, n_predict: int, poll_s: float
) -> dict[str, Any]:
    proc, port = fresh_server(cmd, flags)
    try:
        burst = stream_clients(f"http://127.0.0.1:{port}/completion", n, lambda i: streaming_body(i, burst_tokens))
        finish, _ = metrics_poller(port, poll_s)
        load = stream_clients(f"http://127.0.0.1:{port}/completion", n, lambda i: streaming_body(i, n_predict))
        polls = finish()
    finally:
        stop_server(proc)
    ttft, itl, m = _ms(load["ttft"]), _ms(load["gaps"]), _ms(polls)
    return {
        "first_burst_slowest_ms": max(burst["done"]) / 1e6,
        "tokens_per_s": load["tokens"] / load["wall_s"],
        "tokens": load["tokens"],
        "ttft_p50_ms": ttft["p50_ms"],
        "ttft_p99_ms": ttft["p99_ms"],
        "itl_p50_ms": itl["p50_ms"],
        "itl_p99_ms": itl["p99_ms"],
        "metrics_p50_ms": m["p50_ms"],
        "metrics_p99_ms": m["p99_ms"],
        "metrics_polls": len(polls),
    }


def big_burst(cmd: list[str], flags: list[str], n: int, n_predict: int, timeout_s: float) -> dict[str, Any]:
    """``n`` streaming clients at once on a fresh server: who got a first event, how late."""
    proc, port = fresh_server(cmd, flags)
    url = f"http://127.0.0.1:{port}/completion"
    first: list[int] = []
    answered = [False] * n
    errors: list[str] = []
    lock = threading.Lock()
    try:

        def client(i: int, start: Callable[[], object]) -> None:
            seen: list[int] = []

            def on_event(t: int, event: dict[str, Any]) -> None:
                if not seen:
                    seen.append(t)
                if event.get("stop"):
                    answered[i] = True

            try:
                with httpx.Client(timeout=timeout_s) as c:
                    start()
                    t0 = time.perf_counter_ns()
                    sse_events(c, url, streaming_body(i, n_predict), on_event)
            except httpx.HTTPError as exc:
                with lock:
                    errors.append(f"{type(exc).__name__}: {exc}")
                return
            with lock:
                if seen:
                    first.append(seen[0] - t0)

        wall = run_clients(n, client)
        m = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=30).text
        busy = next(float(x.split()[1]) for x in m.splitlines() if x.startswith("llamacpp:requests_processing "))
    finally:
        stop_server(proc)
    f = _ms(first)
    return {
        "clients": n,
        "answered": sum(answered),
        "errors": errors[:5],
        "first_event_p50_ms": f["p50_ms"],
        "first_event_slowest_ms": f["max_ms"],
        "wall_s": wall,
        "slots_busy_after": busy,
    }


KEYS = ("first_burst_slowest_ms", "tokens_per_s", "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms",
        "metrics_p50_ms", "metrics_p99_ms")  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", default="1,4,8,16,32")
    ap.add_argument("--n-predict", type=int, default=200)
    ap.add_argument("--burst-tokens", type=int, default=16, help="tokens of each first-burst request")
    ap.add_argument("--big-burst", type=int, default=100, help="clients of the big burst (0: skip)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--poll-ms", type=float, default=20, help="/metrics polled this often during the load")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--llama-server", type=Path, help="llama.cpp's llama-server, for the side-by-side run")
    ap.add_argument("--model", type=Path, help="GGUF model (default: Gemma 3 270M if installed, else a tiny one)")
    ap.add_argument("--ours", default=f"{sys.executable} -m pyllama_yield serve", help="our server's command")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "bench_serving.json")
    a = ap.parse_args()
    from pyllama_yield.testing import real_model_path

    servers = {"ours": a.ours.split()}
    if a.llama_server:
        servers["llama-server"] = [str(a.llama_server), "--no-webui"]
    rows: list[dict[str, Any]] = []
    bursts: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        model = a.model or real_model_path() or bench_model(Path(tmp))
        print(f"model: {model}", flush=True)
        for n in [int(x) for x in a.clients.split(",")]:
            flags = ["-m", str(model), "-t", str(a.threads), "-np", str(n), "-c", str(n * 1024), "--metrics"]
            for r in range(a.repeat):
                names = list(servers) if r % 2 == 0 else list(servers)[::-1]
                for name in names:
                    got = one_round(servers[name], flags, n, a.burst_tokens, a.n_predict, a.poll_ms / 1e3)
                    row = {"server": name, "clients": n, "round": r, **got}
                    rows.append(row)
                    print(json.dumps(row), flush=True)
        if a.big_burst:
            flags = ["-m", str(model), "-t", str(a.threads), "-np", "2", "-c", "2048", "--metrics"]
            for name, cmd in servers.items():
                res = {"server": name, **big_burst(cmd, flags, a.big_burst, a.burst_tokens, timeout_s=300)}
                bursts.append(res)
                print(json.dumps(res), flush=True)
    medians = []
    for name in servers:
        for n in dict.fromkeys(r["clients"] for r in rows):
            mine = [r for r in rows if r["server"] == name and r["clients"] == n]
            medians.append({"server": name, "clients": n, **{k: statistics.median(r[k] for r in mine) for k in KEYS}})
    print_table(medians, ["server", "clients", *KEYS])
    ratios: dict[str, Any] = {}
    if a.llama_server:
        for n in dict.fromkeys(m["clients"] for m in medians):
            ours, theirs = (next(m for m in medians if m["server"] == s and m["clients"] == n) for s in servers)
            ratios[str(n)] = {k: ours[k] / theirs[k] if theirs[k] else None for k in KEYS}
        if len(bursts) == 2 and bursts[1]["first_event_slowest_ms"]:
            ratios["big_burst_slowest_first_event"] = bursts[0]["first_event_slowest_ms"] / bursts[1][
                "first_event_slowest_ms"
            ]
        print(json.dumps(ratios, indent=1))
    flags_used = {k: str(v) for k, v in vars(a).items() if k != "out"}
    result = {"commit": git_commit(REPO), "model": Path(str(model)).name, "flags": flags_used, "rows": rows,
              "medians": medians, "big_burst": bursts, "ratios": ratios}  # fmt: skip
    write_json("bench_serving", result, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
