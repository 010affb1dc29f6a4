#!/usr/bin/env python3
"""Write the README's benchmark figures from the committed results under ``benchmarks/``.

Each table sits between ``<!-- figures:NAME -->`` and ``<!-- /figures:NAME -->`` in README.md and
is made from ``benchmarks/NAME.json``, every row of it. The medians and ratios are computed here from
the rows, never read from the file's own summary, and a summary that disagrees with its rows is an
error. ``--check`` fails when the README differs from what the results say (a figure edited by hand,
a result committed without its table) or when a table's file is missing.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def _source(result: dict[str, Any], name: str) -> str:
    return f"`benchmarks/{name}.json`, commit `{result.get('commit', '?')}`, model {result.get('model', '?')}"


def bench_llama_api(result: dict[str, Any]) -> str:
    flags = result["flags"]
    n = flags["threads_clients"]
    lines = [
        f"{n} threads, {flags['max_tokens']} greedy tokens each, llama.cpp on {flags['threads']} threads; "
        f"tokens/s per round, the peers taking turns ({_source(result, 'bench_llama_api')}):",
        "",
        "| round | " + " | ".join(result["median_tok_s"]) + " |",
        "|---|" + "---|" * len(result["median_tok_s"]),
    ]
    rounds: dict[int, dict[str, float]] = {}
    for row in result["rounds"]:
        rounds.setdefault(row["round"], {})[row["peer"]] = row["tok_s"]
    names = list(result["median_tok_s"])
    for r, peers in sorted(rounds.items()):
        lines.append(f"| {r} | " + " | ".join(f"{peers.get(p, float('nan')):.1f}" for p in names) + " |")
    lines.append("| **median** | " + " | ".join(f"**{v:.1f}**" for v in result["median_tok_s"].values()) + " |")
    ratios = result["ratios"]
    words = {
        "ours_over_lcp_serialized": "ours ÷ llama-cpp-python serialized",
        "ours_over_http": "ours ÷ our HTTP server",
    }
    lines += ["", "; ".join(f"{words.get(k, k)}: **{v:.2f}**" for k, v in ratios.items())]
    return "\n".join(lines)


def bench_serving(result: dict[str, Any]) -> str:
    flags = result["flags"]
    ratios = result.get("ratios", {})
    lines = [
        f"Fresh servers, `-t {flags['threads']} -np N -c N×1024 --metrics`, N clients streaming {flags['n_predict']} "
        f"tokens each, `/metrics` polled every {flags['poll_ms']} ms; median of {flags['repeat']} rounds, the servers "
        f"taking turns ({_source(result, 'bench_serving')}). Ratios are ours ÷ llama-server:",
        "",
        "| N | tok/s ours | tok/s llama-server | tok/s ratio | first burst (slowest) ratio | TTFT p50 ratio "
        "| ITL p99 ratio | `/metrics` p50 ours / llama-server | `/metrics` p99 ratio |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    by = {(m["server"], m["clients"]): m for m in result["medians"]}
    for n in dict.fromkeys(m["clients"] for m in result["medians"]):
        ours, theirs, r = by.get(("ours", n)), by.get(("llama-server", n)), ratios.get(str(n), {})
        if ours is None or theirs is None:
            continue
        lines.append(
            f"| {n} | {ours['tokens_per_s']:.1f} | {theirs['tokens_per_s']:.1f} | {r['tokens_per_s']:.2f} "
            f"| {r['first_burst_slowest_ms']:.2f} | {r['ttft_p50_ms']:.2f} | {r['itl_p99_ms']:.2f} "
            f"| {ours['metrics_p50_ms']:.1f} / {theirs['metrics_p50_ms']:.1f} ms | {r['metrics_p99_ms']:.2f} |"
        )
    for b in result.get("big_burst", []):
        lines.append(
            f"\n{b['clients']} streaming clients at once on a fresh `-np 2` server, {b['server']}: "
            f"{b['answered']} answered, first event p50 {b['first_event_p50_ms'] / 1e3:.1f} s, slowest "
            f"{b['first_event_slowest_ms'] / 1e3:.1f} s, {b['slots_busy_after']:.0f} requests left processing."
        )
    keys = ["tokens_per_s", "first_burst_slowest_ms", "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms",
            "metrics_p50_ms", "metrics_p99_ms"]  # fmt: skip
    lines += ["", "<details><summary>every round</summary>", "", "| server | N | round | " + " | ".join(keys) + " |",
              "|---|---|---|" + "---|" * len(keys)]  # fmt: skip
    for row in result["rows"]:
        cells = " | ".join(f"{row[k]:.1f}" for k in keys)
        lines.append(f"| {row['server']} | {row['clients']} | {row['round']} | {cells} |")
    lines += ["", "</details>"]
    return "\n".join(lines)


def bench_webui(result: dict[str, Any]) -> str:
    flags, page = result["flags"], result["answer_through_page"]
    lines = [
        f"One streamed `/completion` of {flags['n_predict']} tokens, `serve {flags['server']}`, the chat page "
        f"closed or open in headless Chromium, in turns ({_source(result, 'bench_webui')}):",
        "",
        "| round | page | tok/s | panel refreshes during the load |",
        "|---|---|---|---|",
    ]
    for row in result["rows"]:
        lines.append(f"| {row['round']} | {row['page']} | {row['tok_s']:.1f} | {row.get('panel_refreshes', '')} |")
    med = result["median_tok_s"]
    lines += [
        "",
        f"Median {med['open']:.1f} tok/s open vs {med['closed']:.1f} closed: "
        f"ratio **{result['ratio_open_closed']:.3f}**. "
        f"An answer of {page['tokens']} tokens streamed through the page took {page['requests']} requests: "
        f"{page['chat_requests']} chat request and {page['poll_requests']} polls of the queue panel.",
    ]
    return "\n".join(lines)


def bench_rpc(result: dict[str, Any]) -> str:
    flags = result["flags"]
    lines = [
        f"One greedy `/completion` ({result['rows'][0]['prompt_tokens']} prompt tokens, {flags['n_predict']} "
        f"generated) on a fresh `serve -t {flags['threads']}`: the model local, or its layers split over two "
        f"rpc-servers (`-t {flags['threads']}` each) on the same {result['cpus']}-core machine, `-ngl 99 -ts 1,1`; "
        f"the setups taking turns ({_source(result, 'bench_rpc')}):",
        "",
        "| setup | round | prompt tok/s | decode tok/s |",
        "|---|---|---|---|",
    ]
    for row in result["rows"]:
        lines.append(f"| {row['setup']} | {row['round']} | {row['prompt_tok_s']:.1f} | {row['decode_tok_s']:.1f} |")
    for m in result["medians"]:
        lines.append(f"| **{m['setup']}** | median | **{m['prompt_tok_s']:.1f}** | **{m['decode_tok_s']:.1f}** |")
    ratios = "; ".join(
        f"{name}: prompt **{r['prompt_tok_s']:.2f}**, decode **{r['decode_tok_s']:.2f}**"
        for name, r in result["ratios_over_local"].items()
    )
    same = "the same" if result["same_greedy_output"] else "**not** the same"
    lines += ["", f"Ratios to local: {ratios}. Greedy output: {same} in every round of every setup."]
    return "\n".join(lines)


def bench_decode(result: dict[str, Any]) -> str:
    c = result["config"]
    lines = [
        f"The bare greedy loop (sample, refill the batch, `llama_decode`) in Python over the binding and "
        f"the same loop in C (`scripts/bench_decode.c`), over the same libllama and model "
        f"({c['n_layer']} layers × {c['n_embd']}), {c['threads']} thread(s), {c['n_gen']} tokens after a "
        f"{result['prompt_tokens']}-token prompt, {c['rounds']} rounds taking turns "
        f"(`benchmarks/bench_decode.json`, commit `{result.get('commit', '?')}`):",
        "",
        "| loop | tokens/s, median | best round |",
        "|---|---|---|",
    ]
    for impl, r in result["results"].items():
        lines.append(f"| {impl} | {r['tg_tokens_per_s']:.0f} | {r['tg_tokens_per_s_best']:.0f} |")
    lines += [
        "",
        f"Python ÷ C: **{result['python_vs_c_tokens_per_s_ratio']:.3f}** (median), "
        f"{result['python_vs_c_tokens_per_s_ratio_best_of_rounds']:.3f} (best rounds).",
    ]
    return "\n".join(lines)


PROFILE_WHAT = {
    "token_streamed": "a token, streamed",
    "token_plain": "a token, not streamed",
    "request": "a request (1 token, streamed)",
}
PROFILE_PHASES = ("fill", "decode", "sample", "stop", "post", "publish", "other")


def profile_host_cost(result: dict[str, Any]) -> str:
    flags = result["flags"]
    lines = [
        f"Microseconds per token (one request of {flags['tokens']} tokens) and per request ({flags['requests']} "
        f"one-token requests), one client, model {result['model']}, `-t 1 -np 1`, fresh servers, median of "
        f"{flags['repeat']} rounds (`benchmarks/profile_host_cost.json`, commit `{result.get('commit', '?')}`"
        + (f", before: `{result['before_commit']}`" if result.get("before_commit") else "")
        + "). CPU per thread from `/proc`: ours runs its event loop (HTTP, rendering, the socket) on the main "
        "thread and the model on the loop thread; llama-server runs its slot loop on the main thread and HTTP "
        "on others. The loop thread's phases are its own clock (`/metrics`); since the step's one C call, "
        "*decode* includes the sampling of generating slots.",
        "",
        "| | server | wall | main thread | busiest other | other threads | " + " | ".join(PROFILE_PHASES) + " |",
        "|---|---|---|---|---|---|" + "---|" * len(PROFILE_PHASES),
    ]
    for m in result["medians"]:
        phases = m["loop_phases_us"]
        cells = [PROFILE_WHAT[m["what"]], m["server"]]
        cells += [f"{m[k]:.0f}" for k in ("wall_us", "main_thread_us", "busiest_other_thread_us", "other_threads_us")]
        cells += [f"{phases[k]:.0f}" if k in phases else "–" for k in PROFILE_PHASES]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _profile_medians(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["what"], row["server"]), []).append(row)
    order = sorted(groups, key=lambda g: (list(PROFILE_WHAT).index(g[0]), g[1]))
    out = []
    for what, server in order:
        rs = groups[(what, server)]
        m: dict[str, Any] = {"what": what, "server": server}
        for k in ("wall_us", "main_thread_us", "busiest_other_thread_us", "other_threads_us"):
            m[k] = statistics.median(r[k] for r in rs)
        m["loop_phases_us"] = {
            k: statistics.median(r["loop_phases_us"][k] for r in rs) for k in rs[0]["loop_phases_us"]
        }
        out.append(m)
    return out


HOST_KEYS = ("tokens_per_s", "ttft_p50_ms", "warm_ttft_p50_ms", "itl_p50_ms", "itl_p99_ms", "latency_p50_ms", "cold_ms")


def _fmt_ratio(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


HOST_LABELS = {
    "tokens_per_s": "tokens/s",
    "ttft_p50_ms": "TTFT p50",
    "warm_ttft_p50_ms": "TTFT warm p50",
    "itl_p50_ms": "ITL p50",
    "itl_p99_ms": "ITL p99",
    "latency_p50_ms": "answer p50",
    "cold_ms": "cold",
}


def bench_host_cost(result: dict[str, Any]) -> str:
    flags = result["flags"]
    before = result.get("before_commit")
    keys = [k for k in HOST_KEYS if any(r.get(k) is not None for r in result["rows"])]
    ttft = "warm_ttft_p50_ms" if "warm_ttft_p50_ms" in keys else "ttft_p50_ms"
    lines = [
        f"Models made by `make_tiny_model` that decode at GPU speed on one core here (2×64: ≈0.6 ms a "
        f"token; 4×256: ≈2.3 ms); fresh servers `-t {flags['threads']} -np N -c N×1024`, N clients asking "
        f"for {flags['n_predict']} greedy tokens each (EOS ignored), the servers taking turns, median of "
        f"{flags['repeat']} rounds (`benchmarks/bench_host_cost.json`, commit `{result.get('commit', '?')}`). "
        f"Ratios are ours ÷ llama-server "
        f"(tokens/s: higher is better; times: lower is better); *cold* is a fresh server's first request"
        + (
            f"; *TTFT warm* is the time to first token of {flags['warm_waves']} waves of N requests of "
            f"{flags['burst_tokens']} tokens each, one wave after another, on the warm server (at one "
            "client the load's TTFT is one request a round)"
            if "warm_ttft_p50_ms" in keys
            else ""
        )
        + (f"; *before* is ours at `{before}` ÷ llama-server, in the same run" if before else "")
        + (
            " (– where it answered nothing: that commit's chat routes call a function of the common shim "
            "this build no longer has)."
            if any(r["server"] == "ours-before" and not r["tokens"] for r in result["rows"])
            else "."
        ),
        "",
        "| model | endpoint | streamed | clients | " + " | ".join(HOST_LABELS[k] for k in keys) + " |"
        + (f" tokens/s before | {HOST_LABELS[ttft]} before |" if before else ""),
        "|---|---|---|---|" + "---|" * len(keys) + ("---|---|" if before else ""),
    ]
    for r in result["ratios"]:
        cells = [r["model"], f"`{r['endpoint']}`", "yes" if r["stream"] else "no", str(r["clients"])]
        cells += [_fmt_ratio(r["ours"].get(k)) for k in keys]
        if before:
            cells += [_fmt_ratio(r["before"].get(k)) for k in ("tokens_per_s", ttft)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _host_cost_ratios(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by = ("model", "endpoint", "stream", "clients", "server")
    present = [k for k in HOST_KEYS if any(r.get(k) is not None for r in rows)]
    medians: dict[tuple[Any, ...], dict[str, Any]] = {}
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(tuple(row[k] for k in by), []).append(row)
    for key, rs in groups.items():
        if not any(r["tokens"] for r in rs):  # the server answered nothing: no figure, the rows stay
            medians[key] = {}
            continue
        medians[key] = {k: statistics.median(r[k] for r in rs) for k in present if rs[0].get(k) is not None}
    def over(mine: dict[str, Any], theirs: dict[str, Any]) -> dict[str, float | None]:
        return {k: _ratio(mine[k], theirs[k]) for k in mine if k in theirs}

    out = []
    for key in dict.fromkeys(k[:-1] for k in groups):
        theirs = medians.get((*key, "llama-server"), {})
        row = dict(zip(by[:-1], key, strict=True))
        ours, before = medians.get((*key, "ours"), {}), medians.get((*key, "ours-before"), {})
        out.append({**row, "ours": over(ours, theirs), "before": over(before, theirs)})
    return out


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


def _suite_counts(files: dict[str, Any]) -> dict[str, Any]:
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
    counts = _suite_counts(result["files"])
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


FAIR_SHARE_KEYS = ("bob_ttft_ms", "bob_done_ms", "alice_tokens_per_s", "alice_last_done_ms")


def bench_fair_share(result: dict[str, Any]) -> str:
    f = result["flags"]
    slots = int(f["slots"])
    lines = [
        f"Fresh servers, `-t {f['threads']} -np {slots} -c {slots * 1024} --metrics`: alice streams {f['streams']} "
        f"requests of {f['n_predict']} tokens at once, then bob one (OpenAI's `user` names them); the servers taking "
        f"turns, {f['rounds']} rounds ({_source(result, 'bench_fair_share')}):",
        "",
        "| server | round | bob: first token | bob: answer | alice: tokens/s | alice: last answer |",
        "|---|---|---|---|---|---|",
    ]
    rows = [*result["rows"], *({**m, "round": "**median**"} for m in result["medians"])]
    for r in rows:
        lines.append(
            f"| {r['server']} | {r['round']} | {r['bob_ttft_ms']:.0f} ms | {r['bob_done_ms']:.0f} ms "
            f"| {r['alice_tokens_per_s']:.0f} | {r['alice_last_done_ms']:.0f} ms |"
        )
    q = result.get("ratios") or {}
    if q:
        lines += [
            "",
            f"Ours ÷ llama-server: bob's first token **{q['bob_ttft_ms']:.2f}**, his answer {q['bob_done_ms']:.2f}; "
            f"alice's tokens/s {q['alice_tokens_per_s']:.2f}, her last answer {q['alice_last_done_ms']:.2f}.",
        ]
    return "\n".join(lines)


def bench_many(result: dict[str, Any]) -> str:
    f = result["flags"]
    lines = [
        f"{f['prompts']} prompts of {f['pp']} random tokens, {f['tg']} generated each, {f['parallel']} at a time, "
        f"{f['threads']} threads, the peers taking turns ({_source(result, 'bench_many')}); (prompt + generated) "
        "tokens/s:",
        "",
        "| peer | round | tokens/s |",
        "|---|---|---|",
    ]
    lines += [f"| {r['peer']} | {r['round']} | {r['tokens_per_s']:.1f} |" for r in result["rows"]]
    lines += [f"| {m['peer']} | **median** | **{m['tokens_per_s']:.1f}** |" for m in result["medians"]]
    lines += ["", f"Ours ÷ llama-batched-bench: **{result['ratio']:.2f}**."]
    return "\n".join(lines)


TABLES: dict[str, Callable[[dict[str, Any]], str]] = {
    "upstream_server_tests": upstream_server_tests,
    "wheel_builds": wheel_builds,
    "wheel_checks": wheel_checks,
    "bench_builds": bench_builds,
    "bench_llama_api": bench_llama_api,
    "bench_serving": bench_serving,
    "bench_webui": bench_webui,
    "bench_rpc": bench_rpc,
    "bench_host_cost": bench_host_cost,
    "bench_decode": bench_decode,
    "profile_host_cost": profile_host_cost,
    "bench_fair_share": bench_fair_share,
    "bench_many": bench_many,
}


def _median_rows(rows: list[dict[str, Any]], by: tuple[str, ...], keys: tuple[str, ...]) -> list[dict[str, Any]]:
    """One row per distinct ``by`` value: the median of each key. Ordered as the benchmark scripts
    order them: by the first ``by`` field, then the next, each in its order of first appearance."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(tuple(row[k] for k in by), []).append(row)
    seen = [list(dict.fromkeys(row[k] for row in rows)) for k in by]
    order = sorted(groups, key=lambda group: [seen[i].index(v) for i, v in enumerate(group)])
    return [
        {**dict(zip(by, group, strict=True)), **{k: statistics.median(r[k] for r in groups[group]) for k in keys}}
        for group in order
    ]


def _ratio(a: float, b: float) -> float | None:
    return a / b if b else None


def _summaries(name: str, result: dict[str, Any]) -> dict[str, Any]:
    """The summary fields of a result, recomputed from its rows as the benchmark script computes them."""
    if name == "bench_llama_api":
        med = {m["peer"]: m["tok_s"] for m in _median_rows(result["rounds"], ("peer",), ("tok_s",))}
        ratios = {"ours_over_http": med["ours"] / med["http"]}
        if "lcp" in med:
            ratios["ours_over_lcp_serialized"] = med["ours"] / med["lcp"]
        return {"median_tok_s": med, "ratios": ratios}
    if name == "bench_serving":
        keys = tuple(result["medians"][0].keys() - {"server", "clients"})
        medians = _median_rows(result["rows"], ("server", "clients"), keys)
        by = {(m["server"], m["clients"]): m for m in medians}
        per_n: dict[str, Any] = {}
        for n in dict.fromkeys(m["clients"] for m in medians):
            ours, theirs = by.get(("ours", n)), by.get(("llama-server", n))
            if ours and theirs:
                per_n[str(n)] = {k: _ratio(ours[k], theirs[k]) for k in keys}
        bursts = result.get("big_burst", [])
        if len(bursts) == 2:
            per_n["big_burst_slowest_first_event"] = _ratio(
                bursts[0]["first_event_slowest_ms"], bursts[1]["first_event_slowest_ms"]
            )
        return {"medians": medians, "ratios": per_n}
    if name == "bench_host_cost":
        return {"ratios": _host_cost_ratios(result["rows"])}
    if name == "bench_many":
        medians = _median_rows(result["rows"], ("peer",), ("tokens_per_s",))
        order = {"ours": 0, "llama-batched-bench": 1}
        medians.sort(key=lambda m: order[m["peer"]])
        return {"medians": medians, "ratio": medians[0]["tokens_per_s"] / medians[1]["tokens_per_s"]}
    if name == "bench_fair_share":
        medians = _median_rows(result["rows"], ("server",), FAIR_SHARE_KEYS)
        if len(medians) < 2:
            return {"medians": medians, "ratios": {}}
        ours, theirs = medians
        return {"medians": medians, "ratios": {k: ours[k] / theirs[k] for k in FAIR_SHARE_KEYS if theirs[k]}}
    if name == "profile_host_cost":
        return {"medians": _profile_medians(result["rows"])}
    if name == "bench_decode":
        n_gen = result["config"]["n_gen"]
        summary = {}
        for impl, rs in result["rows"].items():
            tgs = [n_gen / r["tg_s"] for r in rs]
            pp = statistics.median(result["prompt_tokens"] / r["pp_s"] for r in rs)
            summary[impl] = {"tg_tokens_per_s": statistics.median(tgs), "tg_tokens_per_s_best": max(tgs)}
            summary[impl]["pp_tokens_per_s"] = pp
        py, c = summary["python"], summary["c"]
        return {
            "results": summary,
            "python_vs_c_tokens_per_s_ratio": py["tg_tokens_per_s"] / c["tg_tokens_per_s"],
            "python_vs_c_tokens_per_s_ratio_best_of_rounds": py["tg_tokens_per_s_best"] / c["tg_tokens_per_s_best"],
        }
    if name == "upstream_server_tests":
        counts = _suite_counts(result["files"])
        llama = sum(len(c["llama_passed"]) for c in counts.values())
        ours = sum(len(c["ours_too"]) for c in counts.values())
        return {"llama_passed": llama, "ours_passed_of_llama": ours, "ratio": ours / llama if llama else None}
    if name == "bench_webui":
        med = {m["page"]: m["tok_s"] for m in _median_rows(result["rows"], ("page",), ("tok_s",))}
        return {"median_tok_s": med, "ratio_open_closed": med["open"] / med["closed"]}
    if name == "bench_rpc":
        medians = _median_rows(result["rows"], ("setup",), ("prompt_tok_s", "decode_tok_s"))
        local = medians[0]
        ratios = {m["setup"]: {k: m[k] / local[k] for k in ("prompt_tok_s", "decode_tok_s")} for m in medians[1:]}
        return {"medians": medians, "ratios_over_local": ratios}
    return {}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9)
    return a == b


def load_result(name: str) -> dict[str, Any]:
    """A result with its summary recomputed from its rows; an error if the file's summary disagrees."""
    path = REPO / "benchmarks" / f"{name}.json"
    if not path.exists():
        raise SystemExit(f"README.md shows figures:{name}, but {path.relative_to(REPO)} is not committed")
    result = json.loads(path.read_text())
    for key, value in _summaries(name, result).items():
        if key in result and not _same(result[key], value):
            raise SystemExit(f"{path.relative_to(REPO)}: its '{key}' is not what its rows give")
        result[key] = value
    return result


def render(readme: str) -> str:
    for name, make in TABLES.items():
        pattern = re.compile(rf"(<!-- figures:{name} -->\n).*?(<!-- /figures:{name} -->)", re.S)
        found = pattern.search(readme)
        if found is None:
            raise SystemExit(f"README.md has no <!-- figures:{name} --> block")
        block = make(load_result(name))
        readme = readme[: found.end(1)] + block + "\n" + readme[found.start(2) :]
    return readme


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--check", action="store_true", help="fail if the README's figures are not the results'")
    a = ap.parse_args()
    path = REPO / "README.md"
    old = path.read_text()
    new = render(old)
    if a.check:
        if new != old:
            print("README.md figures differ from benchmarks/*.json: run scripts/readme_figures.py", file=sys.stderr)
            return 1
        return 0
    path.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
