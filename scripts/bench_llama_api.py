#!/usr/bin/env python3
"""The in-process ``Llama`` under threads, against llama-cpp-python and against our HTTP server.

N Python threads (``--threads-clients``, 8) each ask for one completion of ``--max-tokens`` (64)
greedy tokens from a story prompt of their own, all at once:
- ``ours``: one ``pyllama_yield.Llama(n_parallel=N)``, the calls batched on its loop thread;
- ``lcp``: llama-cpp-python's ``Llama`` (``--lcp-python``: a Python with llama-cpp-python
  installed), the calls serialized behind a lock, as its ``Llama`` needs (flash attention on);
- ``http``: our server (``serve -np N``), N HTTP clients on ``/completion``.
Each runs in a process of its own, the three taking turns for ``--repeat`` rounds; the model is
loaded and warmed before the clock starts. Reported: generated tokens/s (every generated token,
over the wall time from the common start to the last answer), the median round, and the ratios
ours/lcp and ours/http. Writes the JSON result (``--out``, default ``benchmarks/bench_llama_api.json``).

    scripts/bench_llama_api.py --lcp-python /tmp/lcp-venv/bin/python
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
from _bench import run_clients  # noqa: E402


def prompts(n: int) -> list[str]:
    subjects = ["a dragon", "a lighthouse keeper", "two robots", "a lost cat", "a baker", "the moon", "a sailor"]
    return [f"Once upon a time, there was {subjects[i % len(subjects)]} who" for i in range(n)]


def worker(kind: str, model: str, n: int, max_tokens: int, threads: int) -> None:
    """One timed run in this process; prints one JSON line."""
    if kind == "lcp":
        from llama_cpp import Llama  # type: ignore[import-not-found]

        # flash attention on: its best setting here (ours and llama-server pick it by default)
        llm = Llama(
            model_path=model, n_ctx=max_tokens + 64, n_threads=threads, n_threads_batch=threads, flash_attn=True,
            verbose=False,
        )  # fmt: skip
    else:
        from pyllama_yield import Llama

        llm = Llama(model, n_ctx=max_tokens + 64, n_parallel=n, n_threads=threads, n_threads_batch=threads)
    lock = threading.Lock() if kind == "lcp" else contextlib.nullcontext()  # llama-cpp-python: one call at a time
    llm("Warm up", max_tokens=4, temperature=0)
    counts = [0] * n

    def one(i: int, start: Callable[[], object]) -> None:
        start()
        with lock:
            counts[i] = llm(prompts(n)[i], max_tokens=max_tokens, temperature=0)["usage"]["completion_tokens"]

    seconds = run_clients(n, one)
    print(json.dumps({"tokens": sum(counts), "seconds": seconds}))


def http_run(model: str, n: int, max_tokens: int, threads: int) -> dict[str, float]:
    import httpx
    from bench_http import free_port, launch

    port = free_port()
    cmd = [sys.executable, "-m", "pyllama_yield", "serve", "-m", model, "--port", str(port), "-np", str(n),
           "-c", str(n * (max_tokens + 64)), "-t", str(threads), "-tb", str(threads)]  # fmt: skip
    proc = launch(cmd, port)
    try:
        url = f"http://127.0.0.1:{port}/completion"
        httpx.post(url, json={"prompt": "Warm up", "n_predict": 4, "temperature": 0}, timeout=120)
        counts = [0] * n

        def one(i: int, start: Callable[[], object]) -> None:
            with httpx.Client(timeout=300) as c:
                start()
                body = {"prompt": prompts(n)[i], "n_predict": max_tokens, "temperature": 0}
                counts[i] = c.post(url, json=body).json()["tokens_predicted"]

        seconds = run_clients(n, one)  # before counting: the clients fill in their counts
        return {"tokens": sum(counts), "seconds": seconds}
    finally:
        proc.terminate()
        proc.wait(60)


def run(kind: str, python: str, model: str, n: int, max_tokens: int, threads: int) -> dict[str, float]:
    if kind == "http":
        return http_run(model, n, max_tokens, threads)
    env = {**os.environ, "PYTHONPATH": str(REPO)} if kind == "ours" else dict(os.environ)
    cmd = [python, __file__, "--worker", kind, "--model", model, "--threads-clients", str(n),
           "--max-tokens", str(max_tokens), "--threads", str(threads)]  # fmt: skip
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lcp-python", help="a Python with llama-cpp-python installed (default: skip that peer)")
    ap.add_argument("--model", help="GGUF model (default: Gemma 3 270M when installed)")
    ap.add_argument("--threads-clients", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2, help="llama.cpp threads for every peer")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "bench_llama_api.json")
    ap.add_argument("--worker", choices=["ours", "lcp"], help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        worker(a.worker, a.model, a.threads_clients, a.max_tokens, a.threads)
        return 0

    from _bench import print_table, write_json

    from pyllama_yield.testing import real_model_path

    with tempfile.TemporaryDirectory() as tmp:
        model = a.model or real_model_path()
        if model is None:
            from _bench import bench_model

            model = bench_model(Path(tmp))
        peers = ["ours", "http"] + (["lcp"] if a.lcp_python else [])
        python = {"ours": sys.executable, "http": sys.executable, "lcp": a.lcp_python}
        rounds: list[dict[str, object]] = []
        for r in range(a.repeat):
            for kind in peers:  # the peers take turns, so a slow minute hits all of them
                res = run(kind, python[kind], str(model), a.threads_clients, a.max_tokens, a.threads)
                row = {"round": r, "peer": kind, **res, "tok_s": res["tokens"] / res["seconds"]}
                rounds.append(row)
                print(f"round {r} {kind}: {row['tok_s']:.1f} tok/s", flush=True)
    median = {k: statistics.median(float(x["tok_s"]) for x in rounds if x["peer"] == k) for k in peers}  # type: ignore[arg-type]
    summary = [{"peer": k, "tok_s_median": v} for k, v in median.items()]
    ratios = {"ours_over_http": median["ours"] / median["http"]}
    if "lcp" in median:
        ratios["ours_over_lcp_serialized"] = median["ours"] / median["lcp"]
    print_table(summary, ["peer", "tok_s_median"])
    print(json.dumps(ratios, indent=2))
    commit = subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty"], capture_output=True, text=True)
    write_json(
        "bench_llama_api",
        {
            "commit": commit.stdout.strip(),
            "model": Path(str(model)).name,
            "flags": {k: v for k, v in vars(a).items() if k not in ("worker", "out")} | {"out": str(a.out)},
            "rounds": rounds,
            "median_tok_s": median,
            "ratios": ratios,
        },
        a.out,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
