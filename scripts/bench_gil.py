#!/usr/bin/env python3
"""How much a pure-Python thread can run while another thread is inside ``llama_decode``.

Reports the counter thread's rate during decode divided by its rate alone (goal >= 0.9 with the
decode on 1 thread of 2 cores), next to the same ratio during a GIL-holding C call of the same
length (``sum(range(n))``), which shows what the ratio would be if the GIL were not released.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench import bench_model, print_table, write_json  # noqa: E402

from pyllama_yield.llama import Batch, Context, Model  # noqa: E402


class Counter:
    def __init__(self) -> None:
        self.value = 0
        self.stop = threading.Event()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        self.ready.set()
        while not self.stop.is_set():
            self.value += 1

    def rate_during(self, call) -> tuple[float, float]:
        c0, t0 = self.value, time.perf_counter()
        call()
        dt = time.perf_counter() - t0
        return (self.value - c0) / dt, dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--n-prompt", type=int, default=512)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        model = Model(bench_model(Path(tmp)))
        prompt = (model.vocab.tokenize("The quick brown fox jumps over the lazy dog. " * 200))[: args.n_prompt]
        ctx = Context(model, n_ctx=args.n_prompt, n_batch=args.n_prompt, n_ubatch=args.n_prompt, n_threads=1)
        batch = Batch(len(prompt))
        batch.add_sequence(prompt)
        counter = Counter()
        counter.thread.start()
        counter.ready.wait(5)
        solo, decode, held = [], [], []
        for _ in range(args.rounds):
            solo.append(counter.rate_during(lambda: threading.Event().wait(0.2))[0])
            ctx.memory_clear()
            rate, secs = counter.rate_during(lambda: ctx.decode(batch))
            decode.append(rate)
            n = int(2e6)
            t0 = time.perf_counter()
            sum(range(n))
            per = (time.perf_counter() - t0) / n
            held.append(counter.rate_during(lambda k=int(secs / per): sum(range(k)))[0])
        counter.stop.set()
        ctx.close()
        model.close()
    solo_r = statistics.median(solo)
    results = {
        "solo_counts_per_s": solo_r,
        "during_decode_ratio": statistics.median(decode) / solo_r,
        "during_gil_held_call_ratio": statistics.median(held) / solo_r,
    }
    print_table(
        [
            {"window": "llama_decode (1 thread)", "counter_rate_vs_solo": results["during_decode_ratio"]},
            {"window": "GIL-holding C call", "counter_rate_vs_solo": results["during_gil_held_call_ratio"]},
        ],
        ["window", "counter_rate_vs_solo"],
    )
    print(f"gil_counter_rate_ratio = {results['during_decode_ratio']:.3f}  (goal >= 0.9)")
    write_json("bench_gil", {"config": {"rounds": args.rounds, "n_prompt": args.n_prompt}, **results}, args.out)


if __name__ == "__main__":
    main()
