#!/usr/bin/env python3
"""One model, local or split over two ``rpc-server`` processes on loopback: prompt and decode
speed side by side, and whether greedy output stays the same.

Setups, each a fresh ``serve`` per round (the setups taking turns, ``--repeat`` rounds, the
median reported):
- ``local``: ``serve -t T`` (the CPU, no offload);
- ``rpc x2``: two ``python -m pyllama_yield rpc-server -t T`` and ``serve --rpc A,B -ngl 99 -ts 1,1``:
  the layers split between them, every step crossing the loopback twice;
- ``rpc x2 (llama.cpp's rpc-server)`` with ``--llama-rpc-server PATH``: the same, served by
  llama.cpp's own ``rpc-server`` (``scripts/build_llama_server.sh`` builds it as ggml-rpc-server).

Each round sends one greedy ``/completion`` (a prompt of about ``--prompt-tokens`` tokens,
``--n-predict`` tokens, EOS ignored) and reads llama.cpp's timings from the answer. On one
machine the rpc-servers share its cores with the server: this measures the protocol's cost, not
what more machines would add.

Writes ``benchmarks/bench_rpc.json``: commit, machine, flags, every round, medians, ratios.

    scripts/bench_rpc.py --llama-rpc-server build/llama-server/bin/ggml-rpc-server
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
from _bench import bench_model, print_table, write_json  # noqa: E402
from bench_http import free_port  # noqa: E402
from bench_serving import fresh_server, stop_server  # noqa: E402

KEYS = ["prompt_tok_s", "decode_tok_s"]
STORY = (
    "The lighthouse keeper climbed the spiral stairs every evening, counting each of the one hundred "
    "and twelve steps, listening to the sea below and the wind that pushed against the old glass. "
)


@contextmanager
def rpc_servers(cmd: list[str], threads: int, n: int = 2) -> Iterator[list[str]]:
    """``n`` rpc-servers from ``cmd`` on free loopback ports; yields their endpoints."""
    from pyllama_yield import rpc

    procs: list[subprocess.Popen[bytes]] = []
    endpoints: list[str] = []
    try:
        for _ in range(n):
            port = free_port()
            args = [*cmd, "--host", "127.0.0.1", "--port", str(port), "--threads", str(threads)]
            procs.append(subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            endpoint = f"127.0.0.1:{port}"
            deadline = time.monotonic() + 60
            while True:
                try:
                    rpc.probe(endpoint)
                    break
                except rpc.RpcError:
                    if procs[-1].poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(f"{cmd[0]} did not start") from None
                    time.sleep(0.1)  # waiting for a process to listen
            endpoints.append(endpoint)
        yield endpoints
    finally:
        for p in procs:
            p.kill()
            p.wait()


def one_round(serve: list[str], flags: list[str], body: dict[str, Any]) -> dict[str, Any]:
    proc, port = fresh_server(serve, flags)
    try:
        r = httpx.post(f"http://127.0.0.1:{port}/completion", json=body, timeout=600)
        r.raise_for_status()
        got = r.json()
    finally:
        stop_server(proc)
    t = got["timings"]
    return {
        "prompt_tokens": t["prompt_n"],
        "prompt_tok_s": t["prompt_per_second"],
        "decode_tokens": t["predicted_n"],
        "decode_tok_s": t["predicted_per_second"],
        "content": got["content"],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, help="GGUF model (default: Gemma 3 270M if installed, else a tiny one)")
    ap.add_argument("--threads", type=int, default=2, help="threads of the server and of each rpc-server")
    ap.add_argument("--prompt-tokens", type=int, default=256)
    ap.add_argument("--n-predict", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--llama-rpc-server", type=Path, help="llama.cpp's rpc-server, as a third setup")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "bench_rpc.json")
    a = ap.parse_args()
    from pyllama_yield.testing import real_model_path

    serve = [sys.executable, "-m", "pyllama_yield", "serve"]
    rpc_cmds = {"rpc x2": [sys.executable, "-m", "pyllama_yield", "rpc-server"]}
    if a.llama_rpc_server:
        rpc_cmds["rpc x2 (llama.cpp's rpc-server)"] = [str(a.llama_rpc_server)]
    setups = ["local", *rpc_cmds]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        model = a.model or real_model_path() or bench_model(Path(tmp))
        words = STORY * (a.prompt_tokens // 30 + 1)
        body = {"prompt": " ".join(words.split()[: int(a.prompt_tokens * 0.75)]), "n_predict": a.n_predict,
                "temperature": 0, "ignore_eos": True, "cache_prompt": False}  # fmt: skip
        base = ["-m", str(model), "-t", str(a.threads), "-c", "2048"]
        for r in range(a.repeat):
            for name in setups if r % 2 == 0 else setups[::-1]:
                with ExitStack() as stack:
                    flags = list(base)
                    if name != "local":
                        eps = stack.enter_context(rpc_servers(rpc_cmds[name], a.threads))
                        flags += ["--rpc", ",".join(eps), "-ngl", "99", "-ts", "1,1"]
                    row = {"setup": name, "round": r, **one_round(serve, flags, body)}
                rows.append(row)
                print(json.dumps({k: v for k, v in row.items() if k != "content"}), flush=True)
    medians = [
        {"setup": s, **{k: statistics.median(r[k] for r in rows if r["setup"] == s) for k in KEYS}} for s in setups
    ]
    print_table(medians, ["setup", *KEYS])
    local = medians[0]
    ratios = {m["setup"]: {k: m[k] / local[k] for k in KEYS} for m in medians[1:]}
    texts = {r["content"] for r in rows}
    same = len(texts) == 1
    print(json.dumps(ratios, indent=1))
    print(f"greedy output the same in every round of every setup: {same}")
    commit = subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty"], capture_output=True, text=True)
    result = {
        "commit": commit.stdout.strip(),
        "model": Path(str(model)).name,
        "cpus": os.cpu_count(),
        "flags": {k: str(v) for k, v in vars(a).items() if k != "out"},
        "rows": rows,
        "medians": medians,
        "ratios_over_local": ratios,
        "same_greedy_output": same,
    }
    write_json("bench_rpc", result, a.out)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
