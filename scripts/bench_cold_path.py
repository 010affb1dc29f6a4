#!/usr/bin/env python3
"""How much slower the request path's Python runs when it runs cold, as it does in a server.

``trace_first_token.py`` times each step of a request on a live server; the same steps timed in a
loop take a fraction of that. This script shows why, in one process with no server and no other
thread: it builds a request's tasks (``TaskBuilder.make_tasks``, the event loop's first step; the
settings are the same each time, so after the first call they are a kept copy and the prompt is
tokenized) back to back, and then after a pause of ``--pause-ms`` (sleeping, or
spinning in Python), three times in a row after each pause. Between a client's requests a server's
threads wait for milliseconds; what the CPU held of their code and data is then gone (on this VM
even a spinning pause loses it), and the first run after the pause pays for it.

Writes ``benchmarks/bench_cold_path.json``: per case, the median µs of the 1st, 2nd and 3rd call.

    scripts/bench_cold_path.py
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
sys.path.insert(1, str(REPO))  # this checkout's code (its compiled parts from the installed package)
from _bench import bench_model, git_commit, write_json  # noqa: E402
from bench_host_cost import MODELS  # noqa: E402


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def calls_after(pause: Callable[[], None], make: Callable[[int], Any], n: int) -> list[float]:
    """``n`` rounds of a pause then three calls; the median µs of the 1st, 2nd and 3rd call (the
    first tenth of the rounds dropped as warm-up)."""
    times: list[list[int]] = [[], [], []]
    for i in range(n):
        pause()
        for k in range(3):
            t0 = time.perf_counter_ns()
            make(3 * i + k)
            times[k].append(time.perf_counter_ns() - t0)
    skip = n // 10
    return [round(statistics.median(t[skip:]) / 1e3, 1) for t in times]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pause-ms", type=float, default=3.0, help="about a request's time to first token here")
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "bench_cold_path.json")
    a = ap.parse_args()
    from pyllama_yield.server import Engine

    with tempfile.TemporaryDirectory() as tmp:
        model = bench_model(Path(tmp), "2x64.gguf", n_ctx=4096, **MODELS["2x64"])
        engine = Engine.create(str(model), n_threads=1, n_parallel=1, n_ctx=4096)
        settings = {"n_predict": 16, "stream": True, "temperature": 0.0, "ignore_eos": True, "cache_prompt": False}

        def make(i: int) -> Any:  # a distinct prompt each time, as trace_first_token's client sends
            return engine.tasks.make_tasks({"prompt": f"Client {i} says: once upon a time", **settings})

        pause_s = a.pause_ms / 1e3
        cases: dict[str, Callable[[], None]] = {
            "back to back": lambda: None,
            f"after sleeping {a.pause_ms:g} ms": lambda: time.sleep(pause_s),
            f"after spinning {a.pause_ms:g} ms": lambda: spin(pause_s),
        }
        rows = []
        for r in range(a.repeat):
            for case, pause in cases.items():
                row = {"case": case, "round": r, "median_us_1st_2nd_3rd": calls_after(pause, make, a.rounds)}
                rows.append(row)
                print(row, flush=True)
        engine.stop()  # frees the model (the loop never started)
    result: dict[str, Any] = {
        "commit": git_commit(REPO),
        "model": "2x64",
        "step": "TaskBuilder.make_tasks",
        "rows": rows,
    }
    result["flags"] = {k: str(v) for k, v in vars(a).items() if k != "out"}
    write_json("bench_cold_path", result, a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
