"""The README's host-cost tables (``bench_host_cost.py`` and ``bench_host_cost_paired.py``): ours
against llama-server on the models that decode at GPU speed here."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from _figures_bench import ratio

ROUND_KEYS = ("tokens_per_s", "warm_ttft_p50_ms")  # the ones the host-cost targets are about
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
        + "; *by round*: the median (lowest–highest) of each round's own ratio, its two servers run back "
        "to back, which leaves out this machine's drift between rounds"
        + (f"; *before* is ours at `{before}` ÷ llama-server, in the same run" if before else "")
        + (
            " (– where it answered nothing: that commit's chat routes call a function of the common shim "
            "this build no longer has)."
            if any(r["server"] == "ours-before" and not r["tokens"] for r in result["rows"])
            else "."
        ),
        "",
        "| model | endpoint | streamed | clients | "
        + " | ".join(HOST_LABELS[k] for k in keys)
        + " |"
        + "".join(f" {HOST_LABELS[k]} by round |" for k in ROUND_KEYS)
        + (f" tokens/s before | {HOST_LABELS[ttft]} before |" if before else ""),
        "|---|---|---|---|" + "---|" * (len(keys) + len(ROUND_KEYS)) + ("---|---|" if before else ""),
    ]
    for r in result["ratios"]:
        cells = [r["model"], f"`{r['endpoint']}`", "yes" if r["stream"] else "no", str(r["clients"])]
        cells += [_fmt_ratio(r["ours"].get(k)) for k in keys]
        cells += [_fmt_rounds(r.get("by_round", {}).get(k, [])) for k in ROUND_KEYS]
        if before:
            cells += [_fmt_ratio(r["before"].get(k)) for k in ("tokens_per_s", ttft)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def host_cost_ratios(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
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
        return {k: ratio(mine[k], theirs[k]) for k in mine if k in theirs}

    out = []
    for key in dict.fromkeys(k[:-1] for k in groups):
        theirs = medians.get((*key, "llama-server"), {})
        row = dict(zip(by[:-1], key, strict=True))
        ours, before = medians.get((*key, "ours"), {}), medians.get((*key, "ours-before"), {})
        mine_rows, their_rows = groups.get((*key, "ours"), []), groups.get((*key, "llama-server"), [])
        by_round = {k: _round_ratios(mine_rows, their_rows, k) for k in ROUND_KEYS}
        out.append({**row, "ours": over(ours, theirs), "before": over(before, theirs), "by_round": by_round})
    return out


def _round(row: dict[str, Any]) -> int:
    return row["round"]


def _round_ratios(
    ours: list[dict[str, Any]], theirs: list[dict[str, Any]], key: str, turn: Callable[[dict[str, Any]], Any] = _round
) -> list[float]:
    """Ours ÷ llama-server's ``key`` within each round, or each ``turn`` (the two ran back to back),
    sorted: their median does without the drift of this machine between rounds that a ratio of
    medians keeps."""
    by_turn = {turn(r): r.get(key) for r in theirs if r["tokens"]}
    pairs = (ratio(r[key], by_turn.get(turn(r))) for r in ours if r["tokens"] and r.get(key))
    return sorted(x for x in pairs if x is not None)


def _fmt_rounds(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({values[0]:.2f}–{values[-1]:.2f})" if values else "–"


PAIRED_KEYS = ("tokens_per_s", "warm_ttft_p50_ms")


def paired_ratios(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per configuration and peer (ours, ours-before): each pair's ratio to llama-server's load in
    the same pair, as median and quartiles over the pairs."""
    by = ("model", "endpoint", "stream", "clients")
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((*(r[k] for k in by), r["server"]), []).append(r)
    out = []
    for config in dict.fromkeys(tuple(r[k] for k in by) for r in rows):
        theirs = groups.get((*config, "llama-server"), [])
        for peer in dict.fromkeys(r["server"] for r in rows if r["server"] != "llama-server"):
            mine = groups.get((*config, peer), [])
            summary: dict[str, Any] = {**dict(zip(by, config, strict=True)), "peer": peer, "pairs": len(mine)}
            for key in PAIRED_KEYS:
                summary[key] = _spread(_round_ratios(mine, theirs, key, turn=_pair))
            out.append(summary)
    return out


def _pair(row: dict[str, Any]) -> tuple[int, int]:
    return row["session"], row["pair"]


def _spread(values: list[float]) -> dict[str, float] | None:
    """Median, quartiles and extremes of sorted ``values``."""
    if not values:
        return None
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive") if len(values) > 1 else (values[0],) * 3
    return {"median": q2, "q1": q1, "q3": q3, "min": values[0], "max": values[-1], "n": len(values)}


def bench_host_cost_paired(result: dict[str, Any]) -> str:
    f = result["flags"]
    before = result.get("before_commit")
    lines = [
        "Ours and llama-server up side by side on the models above"
        + (f", and ours at `{before}`" if before else "")
        + f", each given the same load in turn, the order reversed from one turn to the next: {f['sessions']} "
        f"fresh starts of all × {f['pairs']} turns per row (`benchmarks/bench_host_cost_paired.json`, commit "
        f"`{result.get('commit', '?')}`). A load is {f['clients']} client{'' if f['clients'] == '1' else 's'} "
        f"asking for {f['n_predict']} greedy tokens (EOS ignored); streamed, {f['warm_waves']} waves of "
        f"{f['burst_tokens']}-token requests follow it for the warm time to first token. Each turn's ratio is "
        "a peer's load ÷ llama-server's in the same turn: median (quartiles), lowest–highest.",
        "",
        "| model | streamed | peer | pairs | tokens/s | lowest–highest | TTFT warm p50 | lowest–highest |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in result["paired"]:
        cells = [r["model"], "yes" if r["stream"] else "no", "ours" if r["peer"] == "ours" else f"ours at `{before}`"]
        cells.append(str(r["pairs"]))
        for key in PAIRED_KEYS:
            s = r[key]
            if s is None:
                cells += ["–", "–"]
            else:
                cells += [f"**{s['median']:.2f}** ({s['q1']:.2f}–{s['q3']:.2f})", f"{s['min']:.2f}–{s['max']:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
