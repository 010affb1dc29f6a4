#!/usr/bin/env python3
"""Latency from ``post()`` to the new-task callback, yielding vs not, side by side.

Yielding: the loop thread sits in ``yield_to_queue(work)`` where ``work`` is a GIL-releasing
blocking C call (``os.read`` on a pipe, standing in for ``llama_decode``); the worker serves the
tasks. Not yielding: the loop thread is idle and serves the tasks itself. Each task is posted
after the previous one was handled, so this measures wake-up latency, not queueing.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench import print_table, summarize_us, write_json  # noqa: E402

from pyllama_yield.queue import ServerQueue, Task, TaskType  # noqa: E402


def measure(n: int, yielding: bool) -> list[int]:
    q = ServerQueue()
    latencies: list[int] = []
    handled = threading.Event()
    in_yield = threading.Event()
    r, w = os.pipe()

    def on_task(task: Task, is_yielding: bool) -> bool:
        latencies.append(time.perf_counter_ns() - task.payload)
        assert is_yielding == yielding
        handled.set()
        return True

    def work() -> None:
        in_yield.set()
        os.read(r, 1)  # blocks in C with the GIL released until the benchmark is over

    def update() -> None:
        if yielding and not in_yield.is_set():
            q.yield_to_queue(work)
        in_yield.set()

    q.on_new_task(on_task)
    q.on_update_slots(update)
    loop = threading.Thread(target=q.start_loop)
    loop.start()
    if not in_yield.wait(10):
        raise RuntimeError("loop did not start")
    for _ in range(n):
        handled.clear()
        q.post(Task(TaskType.METRICS, payload=time.perf_counter_ns()))
        if not handled.wait(10):
            raise RuntimeError("task not handled")
    os.write(w, b"x")
    q.terminate()
    loop.join(10)
    os.close(r)
    os.close(w)
    return latencies


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=10_000, help="tasks per mode (default 10000)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    results = {}
    for mode, yielding in (("not_yielding", False), ("yielding", True)):
        samples: list[int] = []
        for _ in range(args.rounds):
            samples += measure(args.n, yielding)
        results[mode] = summarize_us(samples)
    rows = [{"mode": m, **v} for m, v in results.items()]
    print_table(rows, ["mode", "n", "p50_us", "p99_us", "mean_us", "max_us"])
    ratio = results["yielding"]["p99_us"] / results["not_yielding"]["p99_us"]
    print(
        f"yielding_vs_not_p99_ratio = {ratio:.3f}   (goal: yielding p99 <= 1000 us: "
        f"{'met' if results['yielding']['p99_us'] <= 1000 else 'NOT met'})"
    )
    write_json("bench_queue", {"results": results, "yielding_vs_not_p99_ratio": ratio}, args.out)


if __name__ == "__main__":
    main()
