#!/usr/bin/env python3
"""The same decode on two installs of the package, side by side: e.g. the zig-built wheel (no
OpenMP: ggml's own thread pool) against a source build with gcc and OpenMP.

Each install is named by a Python that imports it (``--build NAME=PYTHON``). Every round runs
``bench_decode.py``'s Python loop (a prompt in one batch, then greedy tokens one at a time) in a fresh
process of each install in turn, on the same model (made here once), with the same threads; the
first round of each warms up and is dropped. Prints tokens/s (prompt and generation, median) and
the ratios to the first build; writes every round to ``--out`` (JSON).

    scripts/bench_builds.py --build gcc-openmp=.venv/bin/python \\
        --build zig-wheel=build/wheel-test/venv/bin/python --threads 2 --out /tmp/bench_builds.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _bench import bench_model, git_commit, print_table, write_json  # noqa: E402

# Runs in the install under test: its own pyllama_yield (cwd is not the checkout), this script's
# folder for bench_decode's loop.
CHILD = """
import json, sys
sys.path.insert(0, sys.argv[1])
import pyllama_yield
from bench_decode import run_python
from pyllama_yield.llama import Model
path, threads, n_prompt, n_gen = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
with Model(path, n_gpu_layers=0) as model:
    prompt = model.vocab.tokenize("The quick brown fox jumps over the lazy dog. " * 200)[:n_prompt]
    row = run_python(model, threads, n_gen, prompt)
row["n_prompt"] = len(prompt)
row["cpu_module"] = [m.module for m in pyllama_yield.module_report() if m.loaded and m.backend == "CPU"]
from importlib import metadata
build = pyllama_yield.build_info()
row["compiler"] = build.get("compiler", "?")
wheel = metadata.distribution("pyllama-yield").read_text("WHEEL") or ""
row["wheel_tag"] = [line.split(": ", 1)[1] for line in wheel.splitlines() if line.startswith("Tag:")]
print(json.dumps(row))
"""


def one_run(python: str, model: Path, args: argparse.Namespace, workdir: Path) -> dict:
    cmd = [python, "-c", CHILD, str(HERE), str(model), str(args.threads), str(args.n_prompt), str(args.n_gen)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=workdir).stdout
    return json.loads(out.splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", action="append", required=True, help="NAME=PYTHON (two or more)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--n-prompt", type=int, default=256)
    ap.add_argument("--n-gen", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--n-embd", type=int, default=512)
    ap.add_argument("--n-layer", type=int, default=8)
    ap.add_argument("--dtype", default="f16")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    # absolute (each child runs in a scratch folder), not resolved (a venv's python is a link)
    builds = {name: str(Path(python).absolute()) for name, python in (b.split("=", 1) for b in args.build)}
    rows: dict[str, list[dict]] = {name: [] for name in builds}
    with tempfile.TemporaryDirectory() as tmp:
        model = bench_model(Path(tmp), n_ctx=4096, n_embd=args.n_embd, n_layer=args.n_layer, dtype=args.dtype)
        for r in range(args.rounds + 1):  # taking turns, so that drift hits every build alike
            for name, python in builds.items():
                row = one_run(python, model, args, Path(tmp))
                if r:
                    rows[name].append(row)
    table, summary = [], {}
    for name, rs in rows.items():
        tg = statistics.median(args.n_gen / r["tg_s"] for r in rs)
        pp = statistics.median(r["n_prompt"] / r["pp_s"] for r in rs)
        summary[name] = {
            "tg_tokens_per_s": tg,
            "pp_tokens_per_s": pp,
            **{key: rs[0][key] for key in ("cpu_module", "compiler", "wheel_tag")},
        }
    first = next(iter(summary.values()))
    for name, s in summary.items():
        table.append(
            {
                "build": name,
                "tg_tok_per_s": s["tg_tokens_per_s"],
                "tg_ratio": s["tg_tokens_per_s"] / first["tg_tokens_per_s"],
                "pp_tok_per_s": s["pp_tokens_per_s"],
                "pp_ratio": s["pp_tokens_per_s"] / first["pp_tokens_per_s"],
                "cpu_module": ",".join(s["cpu_module"]),
            }
        )
    print_table(table, ["build", "tg_tok_per_s", "tg_ratio", "pp_tok_per_s", "pp_ratio", "cpu_module"])
    same = len({json.dumps(rs[0]["tokens"]) for rs in rows.values()}) == 1
    print(f"same generated tokens: {same}")
    write_json(
        "bench_builds",
        {
            "commit": git_commit(HERE.parent),
            "config": vars(args) | {"out": None, "build": builds},
            "rows": rows,
            "results": summary,
            "same_tokens": same,
        },
        args.out,
    )


if __name__ == "__main__":
    main()
