#!/usr/bin/env python3
"""Our Python greedy decode loop vs the same loop in C, over the same libllama, side by side.

Both load the same tiny model (made here), use the same thread count, decode the same prompt,
and generate the same number of tokens with llama.cpp's greedy sampler; the script checks they
generate the same tokens, runs several alternating rounds, and reports the tokens/s ratio.
The C program (scripts/bench_decode.c) is compiled against the installed package's libllama.

On a GPU (``scripts/gpu_check.sh``): ``--n-gpu-layers 99`` offloads on both sides, and
``--llama-bench PATH`` adds llama.cpp's own ``llama-bench`` (pp/tg of the same model, same
threads and sizes) as a third peer, taking its turn in every round.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _bench import bench_model, git_commit, print_table, write_json  # noqa: E402

import pyllama_yield  # noqa: E402
from pyllama_yield.llama import Batch, Context, Model, Sampler  # noqa: E402

LLAMA_DIR = HERE.parent / "vendor" / "llama.cpp"


def build_native(workdir: Path) -> Path:
    from pyllama_yield._native import PACKAGE_DIR as pkg  # the compiled parts, also from a checkout

    exe = workdir / "bench_decode"
    cc = os.environ.get("CC") or shutil.which("cc") or "gcc"
    from pyllama_yield import _build_config

    # the linked libraries only: a wheel's backend modules are loaded at run time (BENCH_BACKEND_DIR)
    libs = [f"-l:lib{name}.so" for name in _build_config.LINKED_LIBRARIES if (pkg / f"lib{name}.so").exists()]
    libs = libs or ["-lllama"]
    subprocess.run(
        [
            cc,
            "-O2",
            str(HERE / "bench_decode.c"),
            "-o",
            str(exe),
            f"-I{LLAMA_DIR / 'include'}",
            f"-I{LLAMA_DIR / 'ggml' / 'include'}",
            f"-L{pkg}",
            *libs,
            f"-Wl,-rpath,{pkg}",
        ],
        check=True,
    )
    return exe


def run_native(
    exe: Path, model: Path, threads: int, n_gen: int, rounds: int, prompt: list[int], n_gpu_layers: int
) -> list[dict]:
    """``rounds`` fresh contexts on one loaded model, as the Python side does."""
    args = [str(exe), str(model), str(threads), str(n_gen), str(rounds), *map(str, prompt)]
    env = {**os.environ, "BENCH_N_GPU_LAYERS": str(n_gpu_layers)}
    if pyllama_yield.build_info()["backend_dl"]:
        from pyllama_yield._native import PACKAGE_DIR

        env["BENCH_BACKEND_DIR"] = str(PACKAGE_DIR)
    out = subprocess.run(args, check=True, capture_output=True, text=True, env=env).stdout
    return [json.loads(line) for line in out.splitlines()]


def run_llama_bench(exe: Path, model: Path, threads: int, n_gen: int, n_prompt: int, n_gpu_layers: int) -> dict:
    """llama.cpp's own benchmark tool on the same model and sizes: prompt and generation tokens/s.

    Its generation test runs at the depth the other two generate at (``-d``: after the prompt's
    ``n_prompt`` tokens): each step attends to every cached token, so a test from an empty cache
    would decode faster than the loops it is compared with."""

    def rate(*sizes: str) -> float:
        args = [str(exe), "-m", str(model), *sizes, "-t", str(threads), "-ngl", str(n_gpu_layers), "-r", "1"]
        (test,) = json.loads(subprocess.run([*args, "-o", "json"], check=True, capture_output=True, text=True).stdout)
        return float(test["avg_ts"])

    pp = rate("-p", str(n_prompt), "-n", "0")
    tg = rate("-p", "0", "-n", str(n_gen), "-d", str(n_prompt))
    return {"pp_s": n_prompt / pp, "tg_s": n_gen / tg}


def run_python(model: Model, threads: int, n_gen: int, prompt: list[int]) -> dict:
    with (
        Context(
            model, n_ctx=len(prompt) + n_gen + 8, n_batch=len(prompt), n_ubatch=len(prompt), n_threads=threads
        ) as ctx,
        Sampler() as sampler,
    ):
        batch = Batch(len(prompt))
        batch.add_sequence(prompt)
        t0 = time.perf_counter()
        ctx.decode(batch)
        pp_s = time.perf_counter() - t0
        out = []
        pos = len(prompt)
        t0 = time.perf_counter()
        for _ in range(n_gen):
            tok = sampler.sample(ctx)
            out.append(tok)
            batch.clear()
            batch.add(tok, pos, 0, True)
            pos += 1
            ctx.decode(batch)
        tg_s = time.perf_counter() - t0
        batch.close()
    return {"tokens": out, "pp_s": pp_s, "tg_s": tg_s}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--n-gen", type=int, default=128)
    ap.add_argument("--n-prompt", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--n-embd", type=int, default=256)
    ap.add_argument("--n-layer", type=int, default=4)
    ap.add_argument("--n-head", type=int, default=8)
    ap.add_argument("--dtype", default="f32", choices=("f32", "f16", "q8_0"))
    ap.add_argument("--n-gpu-layers", type=int, default=0, help="layers to offload, on both sides")
    ap.add_argument("--llama-bench", type=Path, help="llama.cpp's llama-bench, as a third peer")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        tmpdir = Path(tmp)
        path = bench_model(
            tmpdir, n_ctx=4096, n_embd=args.n_embd, n_layer=args.n_layer, n_head=args.n_head, dtype=args.dtype
        )
        exe = build_native(tmpdir)
        model = Model(path, n_gpu_layers=args.n_gpu_layers)
        layer_devices = model.layer_devices  # where llama.cpp put each layer (the output layer last)
        text = "The quick brown fox jumps over the lazy dog. " * 200
        prompt = model.vocab.tokenize(text)[: args.n_prompt]
        rows: dict[str, list[dict]] = {"c": [], "python": []}
        if args.llama_bench:
            rows["llama-bench"] = []
        for _ in range(args.rounds):  # alternate, so drift hits all alike; the first round warms up
            rows["c"] += run_native(exe, path, args.threads, args.n_gen, 2, prompt, args.n_gpu_layers)[1:]
            run_python(model, args.threads, args.n_gen, prompt)
            rows["python"].append(run_python(model, args.threads, args.n_gen, prompt))
            if args.llama_bench:
                rows["llama-bench"].append(
                    run_llama_bench(args.llama_bench, path, args.threads, args.n_gen, len(prompt), args.n_gpu_layers)
                )
        same_tokens = all(r["tokens"] == rows["c"][0]["tokens"] for rs in rows.values() for r in rs if "tokens" in r)
        model.close()

    table, summary = [], {}
    for name, rs in rows.items():
        tgs = [args.n_gen / r["tg_s"] for r in rs]
        pp = statistics.median(len(prompt) / r["pp_s"] for r in rs)
        tg = statistics.median(tgs)
        summary[name] = {"tg_tokens_per_s": tg, "tg_tokens_per_s_best": max(tgs), "pp_tokens_per_s": pp}
        table.append({"impl": name, "tg_tok_per_s": tg, "tg_best": max(tgs), "pp_tok_per_s": pp})
    try:
        import llama_cpp  # noqa: F401

        print("llama-cpp-python is installed but not benchmarked here (different libllama build)")
    except ImportError:
        print("llama-cpp-python: not installed (optional third column skipped)")
    print_table(table, ["impl", "tg_tok_per_s", "tg_best", "pp_tok_per_s"])
    ratio = summary["python"]["tg_tokens_per_s"] / summary["c"]["tg_tokens_per_s"]
    best_ratio = summary["python"]["tg_tokens_per_s_best"] / summary["c"]["tg_tokens_per_s_best"]
    pp_ratio = summary["python"]["pp_tokens_per_s"] / summary["c"]["pp_tokens_per_s"]
    print(f"python_vs_c_tokens_per_s_ratio = {ratio:.3f}  (single-token steps, {args.threads} thread(s); goal >= 0.97)")
    print(f"python_vs_c_tokens_per_s_ratio_best_of_rounds = {best_ratio:.3f}")
    print(f"python_vs_c_prompt_tokens_per_s_ratio = {pp_ratio:.3f}")
    print(f"same generated tokens: {same_tokens}")
    extra: dict[str, object] = {}
    if "llama-bench" in summary:
        extra["python_vs_llama_bench_tokens_per_s_ratio"] = (
            summary["python"]["tg_tokens_per_s"] / summary["llama-bench"]["tg_tokens_per_s"]
        )
        extra["python_vs_llama_bench_prompt_tokens_per_s_ratio"] = (
            summary["python"]["pp_tokens_per_s"] / summary["llama-bench"]["pp_tokens_per_s"]
        )
        print(
            f"python_vs_llama_bench: tg {extra['python_vs_llama_bench_tokens_per_s_ratio']:.3f}, "
            f"pp {extra['python_vs_llama_bench_prompt_tokens_per_s_ratio']:.3f}"
        )
    write_json(
        "bench_decode",
        {
            "commit": git_commit(HERE.parent),
            "config": vars(args) | {"out": None, "llama_bench": str(args.llama_bench) if args.llama_bench else None},
            "rows": rows,
            "devices": [
                {"backend": b.name, "devices": [d.description for d in b.devices]} for b in pyllama_yield.backends()
            ],
            "layer_devices": list(layer_devices),
            **extra,
            "prompt_tokens": len(prompt),
            "results": summary,
            "python_vs_c_tokens_per_s_ratio": ratio,
            "python_vs_c_tokens_per_s_ratio_best_of_rounds": best_ratio,
            "python_vs_c_prompt_tokens_per_s_ratio": pp_ratio,
            "same_tokens": same_tokens,
        },
        args.out,
    )
    if not same_tokens:
        sys.exit("the Python and C loops generated different tokens")


if __name__ == "__main__":
    main()
