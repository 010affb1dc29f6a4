"""The README's build, wheel and upstream-suite tables (``scripts/readme_figures.py`` puts them in
place): one function per result file."""

from __future__ import annotations

import re
import statistics
from typing import Any


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f}"


# the oldest glibc a manylinux tag admits -> systems that have it (or newer)
GLIBC_SYSTEMS = {
    "2.17": "RHEL/CentOS 7, Amazon Linux 2, Ubuntu 14.04, Debian 8 and later",
    "2.28": "RHEL 8, Debian 10, Ubuntu 18.10 and later",
    "2.31": "Debian 11, Ubuntu 20.04 and later",
    "2.34": "RHEL 9, Amazon Linux 2023 and later",
    "2.35": "Ubuntu 22.04, Debian 12 and later",
}
# CUDA machine code -> the GPUs that run it (machine code runs on later minor versions of its major)
SASS_GPUS = {
    "sm_75": "Turing: T4, RTX 20xx",
    "sm_80": "Ampere and Ada: A100, A10, A40, RTX 30xx/40xx, L4, L40",
    "sm_86": "RTX 30xx, A10, A40",
    "sm_89": "Ada: RTX 40xx, L4, L40",
    "sm_90": "Hopper: H100, H200, GH200",
}


def _wheel_platform(wheel: str) -> tuple[str, str]:
    """(glibc floor, CPU) from a wheel's platform tag."""
    tag = wheel.removesuffix(".whl").split("-")[-1].split(".")[0]
    if m := re.match(r"manylinux2014_(\w+)", tag):
        return "2.17", m[1]
    if m := re.match(r"manylinux_(\d+)_(\d+)_(\w+)", tag):
        return f"{m[1]}.{m[2]}", m[3]
    return "?", tag


def wheel_fit(builds: dict[str, Any]) -> list[str]:
    """Which wheel fits which machine, from what each build's binaries hold."""
    lines = [
        "| wheel | CPU | Linux (glibc) | GPU code | needs |",
        "|---|---|---|---|---|",
    ]
    for name, b in sorted(builds.items()):
        glibc, arch = _wheel_platform(b["wheel"])
        n_cpu = sum(1 for lib in b["libraries_bytes"] if lib.startswith("libggml-cpu-"))
        cpu = f"{arch} ({n_cpu} CPU modules, the best one chosen at run time)" if n_cpu else arch
        code = b.get("cuda_code")
        if code:
            gpus = "; ".join(f"{a} ({SASS_GPUS.get(a, '?')})" for a in sorted(code["sass"]))
            ptx = ", ".join(sorted(code["ptx"]))
            gpu = f"machine code {gpus}; PTX {ptx} (later GPUs compile it on first use)"
            needs = "NVIDIA driver 580+ (CUDA 13), `[cuda13]` extra or a CUDA 13 runtime"
        elif "cuda_archs" in b:
            gpu, needs = f"archs `{b['cuda_archs']}` as asked (not read from the binary)", "NVIDIA driver 580+"
        else:
            gpu, needs = "-", "nothing"
        lines.append(f"| {name} | {cpu} | {glibc}+: {GLIBC_SYSTEMS.get(glibc, '?')} | {gpu} | {needs} |")
    return lines


def wheel_builds(result: dict[str, Any]) -> str:
    builds = result["builds"]
    lines = [
        "Which wheel for which machine (from each wheel's platform tag and, for CUDA, the GPU code its "
        "binary holds as `cuobjdump` lists it):",
        "",
        *wheel_fit(builds),
        "",
        "Built by `scripts/build_wheels.sh` (`benchmarks/wheel_builds.json`):",
        "",
        "| backend | wheel | size (MiB) | largest libraries (MiB, unpacked) | compiler | CUDA | build time | machine "
        "| commit | note |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, b in sorted(builds.items()):
        libs = sorted(b["libraries_bytes"].items(), key=lambda kv: -kv[1])[:3]
        cuda = f"nvcc {b['nvcc']}, archs `{b['cuda_archs']}`, cuBLAS {b['cublas']}" if "nvcc" in b else "-"
        compiler = b["tools"]["c_compiler"]
        lines.append(
            f"| {name} | `{b['wheel']}` | {_mib(b['wheel_bytes'])} | "
            + ", ".join(f"{lib} {_mib(size)}" for lib, size in libs)
            + f" | {compiler} | {cuda} | {b['build_seconds'] / 60:.0f} min on {b['build_parallel']} jobs | "
            f"{b['machine']['cpus']} × {b['machine']['cpu']} | `{b['commit']}` | {b.get('note', '')} |"
        )
    return "\n".join(lines)


def wheel_checks(result: dict[str, Any]) -> str:
    lines = [
        "Where the wheels were run, by `scripts/test_wheel_debian.sh` (`benchmarks/wheel_checks.json`): a "
        "fresh venv in a debootstrapped Debian userland (arm64 under `qemu-user`), `info`, one generation, "
        "then pytest:",
        "",
        "| wheel | userland | glibc | Python | CPU module ggml chose | generated t/s | tests | pytest | commit |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for c in sorted(result["checks"].values(), key=lambda c: (c["wheel"], c["system"])):
        lines.append(
            f"| `{c['wheel']}` | {c['system']} ({c['cpu']}) | {c['glibc']} | {c['python']} | {c['cpu_module']} "
            f"| {c['generated_tokens_per_s']} | `{c['tests']}` | {c['pytest']} | `{c['commit']}` |"
        )
    return "\n".join(lines)


def bench_builds(result: dict[str, Any]) -> str:
    c = result["config"]
    n_gen = c["n_gen"]
    lines = [
        f"The same decode on two CPU wheels, `scripts/bench_builds.py` (`benchmarks/bench_builds.json`, commit "
        f"`{result['commit']}`): a random {c['n_layer']} layers × {c['n_embd']} {c['dtype']} model, {c['threads']} "
        f"threads, a {c['n_prompt']}-token prompt then {n_gen} tokens, fresh processes taking turns, median of "
        f"{c['rounds']} rounds:",
        "",
        "| wheel | compiler | tag | CPU module | generated tokens/s | ratio | prompt tokens/s | ratio |",
        "|---|---|---|---|---|---|---|---|",
    ]
    med = {
        name: (
            statistics.median(n_gen / r["tg_s"] for r in rows),
            statistics.median(r["n_prompt"] / r["pp_s"] for r in rows),
        )
        for name, rows in result["rows"].items()
    }
    tg0, pp0 = next(iter(med.values()))
    for name, (tg, pp) in med.items():
        info = result["results"][name]
        lines.append(
            f"| {name} | {info['compiler']} | `{info['wheel_tag'][-1]}` | {', '.join(info['cpu_module'])} "
            f"| {tg:.0f} | {tg / tg0:.3f} | {pp:.0f} | {pp / pp0:.3f} |"
        )
    return "\n".join(lines)


def suite_counts(files: dict[str, Any]) -> dict[str, Any]:
    """Per file: the tests llama-server passed, and those of them ours passed too."""
    out = {}
    for f, row in files.items():
        llama = row.get("llama", {}).get("tests", {})
        ours = row.get("ours", {}).get("tests", {})
        passed = [t for t, v in llama.items() if v["outcome"] == "passed"]
        both = [t for t in passed if ours.get(t, {}).get("outcome") == "passed"]
        out[f] = {"llama_passed": passed, "ours_too": both}
    return out


def upstream_server_tests(result: dict[str, Any]) -> str:
    counts = suite_counts(result["files"])
    flags = result.get("flags", {})
    lines = [
        f"llama.cpp's server suite at this pin, llama-server and ours on {flags.get('model', '?')} "
        f"(`benchmarks/upstream_server_tests.json`, commit `{result.get('commit', '?')[:9]}`, "
        f"{result.get('when', '?')}, slow tests {'on' if flags.get('slow') == '1' else 'off'}): ours passes "
        f"**{result['ours_passed_of_llama']} of the {result['llama_passed']}** tests llama-server passes.",
        "",
        "| file | llama-server passed / run | ours passed / run | ours, of llama-server's passes |",
        "|---|---|---|---|",
    ]
    for f, row in result["files"].items():
        cells = [f"{row[t]['passed']}/{row[t]['total']}" if t in row else "-" for t in ("llama", "ours")]
        c = counts[f]
        lines.append(f"| `{f}` | {cells[0]} | {cells[1]} | {len(c['ours_too'])}/{len(c['llama_passed'])} |")
    missed = [f"`{t}`" for f, c in counts.items() for t in c["llama_passed"] if t not in c["ours_too"]]
    lines += ["", "Passed by llama-server, not by ours: " + (", ".join(missed) if missed else "none") + "."]
    return "\n".join(lines)
