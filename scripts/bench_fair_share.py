#!/usr/bin/env python3
"""One user's burst against another user's single question, ours against llama-server, each on a
freshly started server, the servers taking turns (``--rounds``).

On each fresh server (``-np SLOTS -c SLOTS×1024 -t T --metrics``): alice opens ``--streams``
streamed ``/completion`` requests of ``--n-predict`` tokens each (EOS ignored, no prompt cache,
``"user": "alice"``); once the server reports all of them taken in (``/metrics``: every slot
processing, the rest deferred), bob sends one request of the same shape (``"user": "bob"``).
Ours counts fair share by OpenAI's ``user`` field when it has no API keys; llama-server serves
its queue first come, first served. Measured: bob's time to his first token and to his answer,
alice's tokens/s over her whole burst and her last answer (what fairness costs her).

Writes ``benchmarks/bench_fair_share.json`` (``--out``): commit, machine, flags, every round, the
medians and the ratios ours / llama-server.

    scripts/bench_fair_share.py --llama-server build/llama-server/bin/llama-server
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
from _bench import bench_model, git_commit, print_table, streaming_body, write_json  # noqa: E402
from bench_serving import fresh_server, stop_server  # noqa: E402

KEYS = ["bob_ttft_ms", "bob_done_ms", "alice_tokens_per_s", "alice_last_done_ms"]


def metric(port: int, name: str) -> float:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    return next(float(line.split()[1]) for line in text.splitlines() if line.startswith(f"llamacpp:{name} "))


def stream(port: int, body: dict[str, Any]) -> tuple[int, int, int]:
    """One streamed request: (time of its first token, time of its end, tokens), in ns."""
    first, tokens = 0, 0
    with httpx.Client(timeout=600) as c, c.stream("POST", f"http://127.0.0.1:{port}/completion", json=body) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith("data: "):
                continue
            event = json.loads(line[6:])
            if not first and (event.get("content") or event.get("tokens")):
                first = time.perf_counter_ns()
            if event.get("stop"):
                tokens = event.get("tokens_predicted", 0)
    return first, time.perf_counter_ns(), tokens


def one_round(cmd: list[str], flags: list[str], slots: int, streams: int, n_predict: int) -> dict[str, Any]:
    proc, port = fresh_server(cmd, flags)
    try:
        stream(port, {**streaming_body(0, 4), "user": "warm-up"})
        alice: list[tuple[int, int, int]] = []
        lock = threading.Lock()

        def run_alice(i: int) -> None:
            got = stream(port, {**streaming_body(i, n_predict), "user": "alice"})
            with lock:
                alice.append(got)

        t0 = time.perf_counter_ns()
        threads = [threading.Thread(target=run_alice, args=(i,)) for i in range(streams)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 60
        while metric(port, "requests_processing") < slots or metric(port, "requests_deferred") < streams - slots:
            if time.monotonic() > deadline:
                raise RuntimeError("alice's requests were not all taken in")
            time.sleep(0.002)  # a scrape every 2 ms: the same light load on both servers
        t_bob = time.perf_counter_ns()
        bob_first, bob_done, _ = stream(port, {**streaming_body(streams, n_predict), "user": "bob"})
        for t in threads:
            t.join()
    finally:
        stop_server(proc)
    t_alice_done = max(done for _, done, _ in alice)
    return {
        "bob_ttft_ms": (bob_first - t_bob) / 1e6,
        "bob_done_ms": (bob_done - t_bob) / 1e6,
        "alice_tokens_per_s": sum(n for _, _, n in alice) / ((t_alice_done - t0) / 1e9),
        "alice_last_done_ms": (t_alice_done - t0) / 1e6,
        "alice_tokens": sum(n for _, _, n in alice),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--slots", type=int, default=4)
    ap.add_argument("--streams", type=int, default=16, help="alice's concurrent requests")
    ap.add_argument("--n-predict", type=int, default=96)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--llama-server", type=Path, help="llama.cpp's llama-server, for the side-by-side run")
    ap.add_argument("--model", type=Path, help="GGUF model (default: the benchmarks' tiny 4x256 model)")
    ap.add_argument("--ours", default=f"{sys.executable} -m pyllama_yield serve", help="our server's command")
    ap.add_argument("--ours-tree", type=Path, default=REPO, help="the checkout whose commit ours runs")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "bench_fair_share.json")
    a = ap.parse_args()

    servers = {"ours": a.ours.split()}
    if a.llama_server:
        servers["llama-server"] = [str(a.llama_server), "--no-webui"]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        model = a.model or bench_model(Path(tmp))
        flags = ["-m", str(model), "-t", str(a.threads), "-np", str(a.slots), "-c", str(a.slots * 1024), "--metrics"]
        for r in range(a.rounds):
            for name in list(servers) if r % 2 == 0 else list(servers)[::-1]:
                row = {"server": name, "round": r, **one_round(servers[name], flags, a.slots, a.streams, a.n_predict)}
                rows.append(row)
                print(json.dumps(row), flush=True)
    medians = [
        {"server": name, **{k: statistics.median(r[k] for r in rows if r["server"] == name) for k in KEYS}}
        for name in servers
    ]
    print_table(medians, ["server", *KEYS])
    ratios: dict[str, float] = {}
    if a.llama_server:
        ours, theirs = medians
        ratios = {k: ours[k] / theirs[k] for k in KEYS if theirs[k]}
        print(json.dumps(ratios, indent=1))
    flags_used = {k: str(v) for k, v in vars(a).items() if k != "out"}
    result = {"commit": git_commit(a.ours_tree), "model": Path(str(model)).name, "flags": flags_used,
              "rows": rows, "medians": medians, "ratios": ratios}  # fmt: skip
    write_json("bench_fair_share", result, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
