#!/usr/bin/env python3
"""What ``scripts/gpu_check.sh run`` proved: exits non-zero unless the GPU did the work.

Reads the two ``bench_decode.py`` results of the same model (offloaded, and on the CPU) and,
optionally, whether the GPU tier of the tests passed:

- every layer of the offloaded run on a GPU device (llama.cpp's own load report, which
  ``bench_decode.py`` records as ``layer_devices``; the output layer counts, the input layer (token
  embeddings) always stays on the CPU in llama.cpp and is not a layer here);
- its decode (tokens/s of our Python loop, median) faster than the run with every layer on the CPU;
- the GPU tier of the tests passed (``--tests-exit``: pytest's exit status).

With ``GPU_CHECK_DRY_RUN=1`` (a rehearsal on a machine without a GPU) it prints the same verdict
and exits 0.

    scripts/gpu_check_verdict.py OUT/gpu_check.json OUT/cpu_check.json --tests-exit 0
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path


def decode_tokens_per_s(result: dict) -> float:
    n_gen = result["config"]["n_gen"]
    return statistics.median(n_gen / row["tg_s"] for row in result["rows"]["python"])


def failures(gpu: dict, cpu: dict, tests_exit: int | None) -> list[str]:
    """Why the check fails (empty: it passed)."""
    found = []
    devices = gpu.get("layer_devices") or []
    on_cpu = [i for i, dev in enumerate(devices) if dev == "CPU"]
    if not devices:
        found.append("the offloaded run did not record where its layers went")
    elif on_cpu:
        found.append(f"layers {on_cpu} of {len(devices)} stayed on the CPU (asked: {gpu['config']['n_gpu_layers']})")
    gpu_tps, cpu_tps = decode_tokens_per_s(gpu), decode_tokens_per_s(cpu)
    if gpu_tps <= cpu_tps:
        found.append(f"the offloaded decode ({gpu_tps:.1f} tokens/s) is no faster than the CPU's ({cpu_tps:.1f})")
    if tests_exit is not None and tests_exit != 0:
        found.append(f"the GPU tier of the tests failed (pytest exit {tests_exit})")
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("gpu", type=Path, help="bench_decode.py's result with the layers offloaded")
    ap.add_argument("cpu", type=Path, help="bench_decode.py's result of the same model on the CPU")
    ap.add_argument("--tests-exit", type=int, help="pytest's exit status for the GPU tier")
    args = ap.parse_args()
    gpu, cpu = json.loads(args.gpu.read_text()), json.loads(args.cpu.read_text())
    devices = sorted(set(gpu.get("layer_devices") or []))
    gpu_tps, cpu_tps = decode_tokens_per_s(gpu), decode_tokens_per_s(cpu)
    print(f"layers on: {devices}; decode tokens/s: offloaded {gpu_tps:.1f}, CPU {cpu_tps:.1f}")
    found = failures(gpu, cpu, args.tests_exit)
    for why in found:
        print(f"FAIL: {why}")
    if not found:
        print("PASS: every layer on the GPU, and the GPU decodes faster than the CPU")
        return 0
    if os.environ.get("GPU_CHECK_DRY_RUN") == "1":
        print("(dry run: these would fail the check on a GPU machine)")
        return 0
    return 1


if __name__ == "__main__":
    sys.exit(main())
