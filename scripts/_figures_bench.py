"""The README's benchmark tables (``scripts/readme_figures.py`` puts them in place): one function
per result file, each row of it; the medians and ratios are the ones the main module recomputed."""

from __future__ import annotations

import statistics
from typing import Any


def ratio(a: float, b: float | None) -> float | None:
    return a / b if b else None


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


def profile_medians(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
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


def trace_first_token(result: dict[str, Any]) -> str:
    flags = result["flags"]
    ours = [r for r in result["rows"] if r["server"] == "ours"]
    theirs = [r for r in result["rows"] if r["server"] == "llama-server"]
    at = {name: statistics.median(r["milestones_us"][name] for r in ours) for name in ours[0]["milestones_us"]}
    lines = [
        f"One client, {flags['requests']} streamed `/completion` requests of {flags['n_predict']} tokens with "
        f"distinct prompts, model 2x64, `-t 1 -np 1`, fresh servers taking turns, {flags['repeat']} rounds "
        f"({_source(result, 'trace_first_token')}). Each milestone is the median over the requests (the "
        "first fifth dropped) of its time after the request arrived (the event loop's last read of its "
        "socket before its tasks are built: its body's, which the client sends apart from its headers), "
        "then the median of the rounds; *step* is the difference from the line above. Ours is traced (a "
        "few µs per stamped call).",
        "",
        "| milestone | µs after arrival | step |",
        "|---|---|---|",
    ]
    previous = 0.0
    for name, t in at.items():
        lines.append(f"| {name} | {t:.0f} | {t - previous:+.0f} |")
        previous = t
    mine = statistics.median(r["ttft_p50_ms"] for r in ours)
    peer = statistics.median(r["ttft_p50_ms"] for r in theirs)
    lines += [
        "",
        f"Time to first event at the client, p50: ours (traced) {mine:.2f} ms, llama-server {peer:.2f} ms "
        f"({mine / peer:.2f}×).",
    ]
    return "\n".join(lines)
