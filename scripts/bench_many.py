#!/usr/bin/env python3
"""Many prompts in-process: ``Llama.create_completions`` beside llama.cpp's ``llama-batched-bench``
of the pin, on the same model, threads and parallelism, taking turns (``--rounds``).

llama-batched-bench decodes ``--parallel`` sequences of ``--pp`` random prompt tokens at once and
then ``--tg`` tokens for each, all in one batch per step, reading no logits and sampling nothing:
the model's own throughput, an upper bound. Ours answers ``--prompts`` completions of ``--pp``
random prompt tokens and ``--tg`` generated tokens each (EOS banned, greedy) through the engine's
slots (``n_parallel = --parallel``): sampling, detokenizing and results included. Both report
(prompt + generated tokens) / seconds; ours is timed around the call, the model already loaded.

Writes ``benchmarks/bench_many.json`` (``--out``): commit, machine, flags, every round, medians
and the ratio ours / llama-batched-bench.

    scripts/bench_many.py --batched-bench build/llama-server/bin/llama-batched-bench
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
from _bench import bench_model, git_commit, print_table, write_json  # noqa: E402


def batched_bench(binary: Path, model: Path, a: argparse.Namespace) -> dict[str, Any]:
    n_ctx = a.parallel * (a.pp + a.tg) + 64
    cmd = [str(binary), "-m", str(model), "-c", str(n_ctx), "-b", "2048", "-ub", "512", "-t", str(a.threads),
           "-npp", str(a.pp), "-ntg", str(a.tg), "-npl", str(a.parallel), "--output-format", "jsonl"]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    row = json.loads(next(line for line in out.stdout.splitlines() + out.stderr.splitlines() if line.startswith("{")))
    return {"tokens_per_s": row["speed"], "prompt_tokens_per_s": row["speed_pp"], "gen_tokens_per_s": row["speed_tg"]}


def ours(llm: Any, prompts: list[list[int]], a: argparse.Namespace) -> dict[str, Any]:
    ban = {llm.token_eos(): -100.0}
    t0 = time.perf_counter()
    answers = llm.create_completions(prompts, max_tokens=a.tg, temperature=0.0, logit_bias=ban, progress=False)
    seconds = time.perf_counter() - t0
    prompt = sum(x["usage"]["prompt_tokens"] for x in answers)
    generated = sum(x["usage"]["completion_tokens"] for x in answers)
    return {"tokens_per_s": (prompt + generated) / seconds, "seconds": seconds, "generated": generated}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batched-bench", type=Path, required=True, help="llama.cpp's llama-batched-bench")
    ap.add_argument("--model", type=Path, help="GGUF model (default: Gemma 3 270M if installed, else a tiny one)")
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--pp", type=int, default=64, help="prompt tokens per sequence")
    ap.add_argument("--tg", type=int, default=64, help="generated tokens per sequence")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "bench_many.json")
    a = ap.parse_args()
    from pyllama_yield import Llama
    from pyllama_yield.testing import real_model_path

    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        model = a.model or real_model_path() or bench_model(Path(tmp))
        n_ctx = a.parallel * (a.pp + a.tg + 16)
        with Llama(str(model), n_ctx=n_ctx, n_parallel=a.parallel, n_threads=a.threads, verbose=False) as llm:
            rng = random.Random(0)
            prompts = [[rng.randrange(1000, llm.n_vocab()) for _ in range(a.pp)] for _ in range(a.prompts)]
            ours(llm, prompts[: a.parallel], a)  # warm-up
            for r in range(a.rounds):
                for name in ("llama-batched-bench", "ours") if r % 2 == 0 else ("ours", "llama-batched-bench"):
                    got = batched_bench(a.batched_bench, model, a) if name != "ours" else ours(llm, prompts, a)
                    rows.append({"peer": name, "round": r, **got})
                    print(json.dumps(rows[-1]), flush=True)
    medians = [
        {"peer": p, "tokens_per_s": statistics.median(r["tokens_per_s"] for r in rows if r["peer"] == p)}
        for p in ("ours", "llama-batched-bench")
    ]
    print_table(medians, ["peer", "tokens_per_s"])
    ratio = medians[0]["tokens_per_s"] / medians[1]["tokens_per_s"]
    print(f"ours / llama-batched-bench: {ratio:.2f}")
    flags = {k: str(v) for k, v in vars(a).items() if k != "out"}
    result = {"commit": git_commit(REPO), "model": Path(str(model)).name, "flags": flags, "rows": rows,
              "medians": medians, "ratio": ratio}  # fmt: skip
    write_json("bench_many", result, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
