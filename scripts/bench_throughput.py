#!/usr/bin/env python3
"""Aggregate generated tokens/s of the server context with 1, 2 and 4 slots, and speculative vs plain.

Every slot runs a greedy completion of ``--n-predict`` tokens (EOS ignored) at the same time.
Speculative decoding is measured with a small random draft model (low acceptance: an honest worst
case) and with the target itself as draft (every draft accepted: the best case).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench import bench_model, print_table, run_clients, write_json  # noqa: E402

from pyllama_yield.server import Engine  # noqa: E402
from pyllama_yield.server.results import CompletionFinal  # noqa: E402
from pyllama_yield.testing import make_draft_model  # noqa: E402

PROMPTS = ["The quick brown fox", "Once upon a time", "In a galaxy far away", "The llama said"]


def run(model: Path, n_slots: int, n_predict: int, threads: int, **kw) -> dict:
    with Engine.create(model, n_ctx=(n_predict + 64) * n_slots, n_parallel=n_slots, n_threads=threads, **kw) as srv:
        srv.complete({"prompt": "warm up", "n_predict": 4, "temperature": 0.0})
        results: list[CompletionFinal] = []

        def client(i: int, start: Callable[[], object]) -> None:
            start()
            results.append(
                srv.complete(
                    {
                        "prompt": PROMPTS[i % len(PROMPTS)],
                        "n_predict": n_predict,
                        "temperature": 0.0,
                        "ignore_eos": True,
                    }
                )
            )

        wall = run_clients(n_slots, client)
        m = srv.metrics()
    n = sum(r.tokens_predicted for r in results)
    return {
        "slots": n_slots,
        "tokens": n,
        "wall_s": wall,
        "tokens_per_s": n / wall,
        "draft_tokens": m["draft_tokens"],
        "draft_accepted": m["draft_accepted"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n-predict", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--n-draft", type=int, default=4)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        model = bench_model(Path(tmp))
        draft = make_draft_model(Path(tmp) / "d.gguf")
        rows = [{"config": f"plain, {n} slot(s)", **run(model, n, args.n_predict, args.threads)} for n in (1, 2, 4)]
        rows.append(
            {
                "config": "speculative, random draft",
                **run(model, 1, args.n_predict, args.threads, draft_model_path=draft, n_draft=args.n_draft),
            }
        )
        rows.append(
            {
                "config": "speculative, self draft",
                **run(model, 1, args.n_predict, args.threads, draft_model_path=model, n_draft=args.n_draft),
            }
        )
    print_table(rows, ["config", "tokens", "wall_s", "tokens_per_s", "draft_tokens", "draft_accepted"])
    base = rows[0]["tokens_per_s"]
    ratios = {r["config"]: r["tokens_per_s"] / base for r in rows}
    for k, v in ratios.items():
        print(f"  {k:28s} {v:5.2f}x of 1 slot")
    write_json(
        "bench_throughput", {"rows": rows, "ratio_vs_1_slot": ratios, "config": vars(args) | {"out": None}}, args.out
    )


if __name__ == "__main__":
    main()
