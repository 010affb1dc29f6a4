#!/usr/bin/env python3
"""Where the host time of one token and of one request goes: ours (now, and at an earlier commit)
and llama-server, on a model that decodes at GPU speed on one core here (2×64, ≈0.6 ms a token).

Each server is started fresh with ``-t 1 -np 1 --metrics`` and measured twice, one client at a time:
- **per token**: ``--tokens`` tokens in one request, streamed and not;
- **per request**: ``--requests`` streamed requests of one token each, back to back.
For each: the wall time, and the CPU time of each of the server's threads (``/proc/PID/task/*/
schedstat``, nanoseconds), divided by the tokens or requests. Ours is split further: the loop
thread's phases (its own clock, ``pyllama_yield:loop_seconds_total{phase}`` on ``/metrics``), the
event loop (the main thread: HTTP, routing, rendering, the socket) and the other threads (the
bridge's, which tokenize and build the tasks; the queue's worker). llama-server's threads are
given as the main one (its slot loop) and the rest (HTTP). Writes
``benchmarks/profile_host_cost.json`` (``--out``): every measurement, the commits, the flags.

    scripts/profile_host_cost.py --llama-server build/llama-server/bin/llama-server --before-tree /tmp/base
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
from _bench import bench_model, git_commit, write_json  # noqa: E402
from bench_host_cost import MODELS  # noqa: E402
from bench_serving import fresh_server, stop_server  # noqa: E402


def thread_cpu_ns(pid: int) -> dict[int, int]:
    """Each thread's CPU time so far (ns), by thread id."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out[int(task.name)] = int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # a thread that ended meanwhile
    return out


def loop_phases(client: httpx.Client) -> dict[str, float]:
    """Our loop thread's seconds by phase (llama-server has no such counter: empty)."""
    r = client.get("/metrics")
    if r.status_code != 200:
        return {}
    phases = {}
    for line in r.text.splitlines():
        if line.startswith("pyllama_yield:loop_seconds_total{phase="):
            name = line.split('"')[1]
            phases[name] = float(line.split()[-1])
    return phases


def run_requests(client: httpx.Client, n: int, n_predict: int, stream: bool) -> int:
    """``n`` requests one after another; the tokens they generated."""
    body = {"prompt": "Once upon a time", "n_predict": n_predict, "temperature": 0.0, "ignore_eos": True}
    body |= {"stream": stream, "cache_prompt": False}
    tokens = 0
    for _ in range(n):
        with client.stream("POST", "/completion", json=body) as r:
            r.raise_for_status()
            for _line in r.iter_lines():
                pass
        tokens += n_predict
    return tokens


def measure(proc_pid: int, client: httpx.Client, what: str, a: argparse.Namespace) -> dict[str, Any]:
    """One measurement on a running server: per token or per request."""
    per_token = what.startswith("token")
    n, n_predict, stream = (1, a.tokens, what == "token_streamed") if per_token else (a.requests, 1, True)
    run_requests(client, 2, min(n_predict, 64), stream)  # warm: a fresh server's first requests are not this
    cpu0, phases0, t0 = thread_cpu_ns(proc_pid), loop_phases(client), time.perf_counter()
    tokens = run_requests(client, n, n_predict, stream)
    wall = time.perf_counter() - t0
    cpu1, phases1 = thread_cpu_ns(proc_pid), loop_phases(client)
    per = tokens if per_token else n
    threads = {tid: (cpu1[tid] - cpu0.get(tid, 0)) / per / 1e3 for tid in cpu1}  # us per unit
    main = threads.pop(proc_pid, 0.0)
    busiest = max(threads, key=lambda t: threads[t]) if threads else None
    loop = threads.pop(busiest, 0.0) if busiest is not None else 0.0
    return {
        "what": what,
        "count": per,
        "wall_us": wall / per * 1e6,
        "main_thread_us": main,
        "busiest_other_thread_us": loop,
        "other_threads_us": sum(threads.values()),
        "loop_phases_us": {k: (phases1[k] - phases0.get(k, 0.0)) / per * 1e6 for k in phases1},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-server", type=Path, required=True)
    ap.add_argument("--before-tree", type=Path, help="a checkout at an earlier commit, profiled as 'ours-before'")
    ap.add_argument("--model", default="2x64", choices=list(MODELS))
    ap.add_argument("--tokens", type=int, default=2000)
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "profile_host_cost.json")
    a = ap.parse_args()
    ours = [sys.executable, "-m", "pyllama_yield", "serve"]
    servers: dict[str, tuple[list[str], Path]] = {
        "ours": (ours, REPO),
        "llama-server": ([str(a.llama_server.resolve()), "--no-webui"], REPO),
    }
    if a.before_tree:
        servers["ours-before"] = (ours, a.before_tree)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        model = bench_model(Path(tmp), f"{a.model}.gguf", n_ctx=4096, **MODELS[a.model])
        flags = ["-m", str(model), "-t", "1", "-np", "1", "-c", str(a.tokens + 256), "--metrics"]
        for r in range(a.repeat):
            for name, (cmd, cwd) in servers.items():
                proc, port = fresh_server(cmd, flags, cwd=cwd)
                try:
                    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=600) as client:
                        for what in ("token_streamed", "token_plain", "request"):
                            row = {"server": name, "round": r, **measure(proc.pid, client, what, a)}
                            rows.append(row)
                            print(row, flush=True)
                finally:
                    stop_server(proc)

    result: dict[str, Any] = {"commit": git_commit(REPO), "model": a.model, "cpus": os.cpu_count(), "rows": rows}
    result["flags"] = {k: str(v) for k, v in vars(a).items() if k != "out"}
    if a.before_tree:
        result["before_commit"] = git_commit(a.before_tree)
    write_json("profile_host_cost", result, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
