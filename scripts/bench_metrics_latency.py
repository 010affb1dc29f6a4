#!/usr/bin/env python3
"""Metrics round-trip latency while a long prompt decodes: yield_decode=True vs False.

For each prompt length, a completion with that many prompt tokens is decoded in one batch while a
client thread sends metrics tasks back to back and times each round trip until the completion is
done. With the yielding decode the worker answers during ``llama_decode``; without it a metrics
task waits for the decode to end.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench import bench_model, print_table, summarize_us, write_json  # noqa: E402

from pyllama_yield.server import Engine  # noqa: E402


def measure(model: Path, n_prompt: int, yield_decode: bool, repeats: int, threads: int) -> tuple[list[int], float]:
    samples: list[int] = []
    decode_s: list[float] = []
    with Engine.create(
        model, n_ctx=n_prompt + 64, n_batch=n_prompt, n_threads=threads, yield_decode=yield_decode
    ) as srv:
        for r in range(repeats):
            prompt = [100 + (i * 7 + r) % 20000 for i in range(n_prompt)]
            done = threading.Event()
            reader = srv.submit({"prompt": prompt, "n_predict": 1, "cache_prompt": False, "temperature": 0.0})
            t0 = time.perf_counter()

            def wait(reader=reader, done=done) -> None:
                reader.wait_for_all()
                done.set()

            waiter = threading.Thread(target=wait)
            waiter.start()
            while not done.is_set():
                t = time.perf_counter_ns()
                srv.metrics()
                samples.append(time.perf_counter_ns() - t)
            decode_s.append(time.perf_counter() - t0)
            waiter.join()
    return samples, sorted(decode_s)[len(decode_s) // 2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lengths", type=int, nargs="+", default=[256, 1024, 2048])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        model = bench_model(Path(tmp), n_ctx=max(args.lengths) + 128)
        for n in args.lengths:
            for yd in (True, False):
                samples, decode_s = measure(model, n, yd, args.repeats, args.threads)
                rows.append({"prompt_tokens": n, "yield_decode": yd, "request_s": decode_s, **summarize_us(samples)})
    print_table(rows, ["prompt_tokens", "yield_decode", "request_s", "n", "p50_us", "p99_us", "max_us"])
    worst_yield_p99 = max(r["p99_us"] for r in rows if r["yield_decode"])
    print(f"worst p99 with yield: {worst_yield_p99 / 1e3:.3f} ms (goal <= 2 ms, independent of prompt length)")
    for n in args.lengths:
        y = next(r for r in rows if r["prompt_tokens"] == n and r["yield_decode"])
        ny = next(r for r in rows if r["prompt_tokens"] == n and not r["yield_decode"])
        print(f"  {n:5d} tokens: p99 no-yield / yield = {ny['p99_us'] / y['p99_us']:.1f}x")
    write_json("bench_metrics_latency", {"rows": rows, "worst_yield_p99_ms": worst_yield_p99 / 1e3}, args.out)


if __name__ == "__main__":
    main()
